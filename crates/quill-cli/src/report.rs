//! How the `quill` command speaks, chosen once per run by two flags accepted anywhere on the
//! command line:
//! - plain (the default): lines for people on stdout, and a progress bar on stderr while a long
//!   step runs, drawn only when stderr is a terminal (in a log file the epoch lines suffice);
//! - `--quiet`: only each command's result (the final accuracy, predictions, generated text,
//!   benchmark tables) and errors; no bars, no per-epoch lines;
//! - `--json`: one JSON object per line on stdout, each with an `"event"` field (`"setup"`,
//!   `"epoch"`, `"sample"`, `"result"`, `"bench"`, ...), for scripts; no bars.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Map, Value};
use std::io::IsTerminal;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The output mode of this run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Lines for people, bars on a terminal.
    Plain,
    /// Results and errors only.
    Quiet,
    /// JSON lines.
    Json,
}

static MODE: OnceLock<Mode> = OnceLock::new();

/// The spinner of the long step running now (a benchmark), if one is drawn: lines printed
/// meanwhile clear it first and redraw it after, so the two never share a terminal row.
static ACTIVE: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Prints `line` on stdout, around the active spinner.
fn say(line: &str) {
    let active = ACTIVE.lock().ok().and_then(|g| g.clone());
    match active {
        Some(bar) => bar.suspend(|| println!("{line}")),
        None => println!("{line}"),
    }
}

/// Takes `--quiet` and `--json` out of `args` (wherever they stand) and sets the mode; giving
/// both is an error, since a script asking for JSON would otherwise get nothing.
pub fn take_flags(args: Vec<String>) -> Result<Vec<String>, String> {
    let quiet = args.iter().any(|a| a == "--quiet");
    let json = args.iter().any(|a| a == "--json");
    if quiet && json {
        return Err("--quiet and --json exclude each other (--json is already terse)".into());
    }
    let mode = match (quiet, json) {
        (true, _) => Mode::Quiet,
        (_, true) => Mode::Json,
        _ => Mode::Plain,
    };
    let _ = MODE.set(mode);
    Ok(args
        .into_iter()
        .filter(|a| a != "--quiet" && a != "--json")
        .collect())
}

/// This run's mode (plain until `take_flags` ran).
pub fn mode() -> Mode {
    *MODE.get().unwrap_or(&Mode::Plain)
}

/// A path as a JSON string, lossily where it is not UTF-8 (serde_json's own `Path` encoding
/// fails, and `json!` would panic, on such a path).
pub fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

fn emit(event: &str, fields: Value) {
    let mut obj = Map::new();
    obj.insert("event".into(), Value::from(event));
    match fields {
        Value::Object(m) => obj.extend(m),
        Value::Null => {}
        other => {
            obj.insert("value".into(), other);
        }
    }
    say(&Value::Object(obj).to_string());
}

/// A step of a long job (setup, an epoch, a sample): `text` in plain mode, `{"event": event,
/// ...fields}` in JSON mode, nothing when quiet. `text` is built only when printed.
pub fn progress(event: &str, text: impl FnOnce() -> String, fields: Value) {
    match mode() {
        Mode::Plain => say(&text()),
        Mode::Json => emit(event, fields),
        Mode::Quiet => {}
    }
}

/// A command's result: `text` in plain and quiet mode, the JSON object otherwise.
pub fn result(event: &str, text: impl FnOnce() -> String, fields: Value) {
    match mode() {
        Mode::Plain | Mode::Quiet => say(&text()),
        Mode::Json => emit(event, fields),
    }
}

/// A benchmark's heading (what runs, threads, rounds, peers): printed in plain mode, an
/// `{"event": "setup", "text": ...}` line in JSON mode, left out when quiet.
pub fn heading(text: String) {
    match mode() {
        Mode::Plain => say(&text),
        Mode::Json => emit("setup", serde_json::json!({ "text": text })),
        Mode::Quiet => {}
    }
}

/// A progress bar of `len` steps titled `prefix`: drawn on stderr in plain mode when stderr is
/// a terminal, hidden otherwise (its messages then cost nothing).
pub fn bar(len: u64, prefix: String) -> ProgressBar {
    if mode() != Mode::Plain || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style = ProgressStyle::with_template(
        "{prefix} [{bar:30.cyan/blue}] {pos}/{len} {elapsed_precise} {msg}",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr())
        .with_style(style)
        .with_prefix(prefix)
}

/// A spinner for a long step whose length is unknown ahead (a benchmark): `prefix`, the time
/// elapsed and the last [`activity`] message, redrawn ten times a second on stderr in plain
/// mode on a terminal; nothing otherwise. It disappears when the returned guard drops.
pub fn spinner(prefix: String) -> Spinner {
    if mode() != Mode::Plain || !std::io::stderr().is_terminal() {
        return Spinner(None);
    }
    let style = ProgressStyle::with_template("{spinner} {prefix} {elapsed_precise} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
        .with_style(style)
        .with_prefix(prefix);
    bar.enable_steady_tick(Duration::from_millis(100));
    if let Ok(mut g) = ACTIVE.lock() {
        *g = Some(bar.clone());
    }
    Spinner(Some(bar))
}

/// Sets the active spinner's message (what is being measured now); nothing without one.
pub fn activity(msg: String) {
    if let Some(bar) = ACTIVE.lock().ok().and_then(|g| g.clone()) {
        bar.set_message(msg);
    }
}

/// Clears its spinner when dropped.
pub struct Spinner(Option<ProgressBar>);

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
            if let Ok(mut g) = ACTIVE.lock() {
                *g = None;
            }
        }
    }
}

/// A benchmark's result table: Markdown in plain and quiet mode, one `{"event": "bench",
/// "bench": name, column: value, ...}` object per row in JSON mode (numbers as numbers, a
/// trailing `x` of a ratio dropped, `-` as null).
pub struct Table {
    name: String,
    columns: Vec<String>,
}

impl Table {
    /// Starts the table of benchmark `name` with `columns`, printing its header where text.
    pub fn new(name: &str, columns: &[&str]) -> Table {
        if mode() != Mode::Json {
            say(&format!("| {} |", columns.join(" | ")));
            say(&format!("|{}", "---|".repeat(columns.len())));
        }
        Table {
            name: name.to_string(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
        }
    }

    /// One row given as its Markdown line (`| a | b |`), split into cells for JSON.
    pub fn line(&self, line: String) {
        let t = line.trim().trim_start_matches('|').trim_end_matches('|');
        let cells: Vec<String> = t.split('|').map(|c| c.trim().to_string()).collect();
        self.row(&cells);
    }

    /// One row, a cell per column.
    pub fn row(&self, cells: &[String]) {
        activity(format!(
            "measured: {}",
            cells.first().map_or("", |c| c.as_str())
        ));
        if mode() != Mode::Json {
            say(&format!("| {} |", cells.join(" | ")));
            return;
        }
        let mut obj = Map::new();
        obj.insert("bench".into(), Value::from(self.name.clone()));
        for (c, v) in self.columns.iter().zip(cells) {
            obj.insert(c.clone(), cell_value(v));
        }
        emit("bench", Value::Object(obj));
    }
}

fn cell_value(cell: &str) -> Value {
    let t = cell.trim();
    if t == "-" || t.is_empty() {
        return Value::Null;
    }
    t.trim_end_matches('x')
        .parse::<f64>()
        .ok()
        .and_then(|v| serde_json::Number::from_f64(v).map(Value::Number))
        .unwrap_or_else(|| Value::from(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_become_numbers_nulls_or_text() {
        assert_eq!(cell_value(" 1.50x "), Value::from(1.5));
        assert_eq!(cell_value("12"), Value::from(12.0));
        assert_eq!(cell_value("-"), Value::Null);
        assert_eq!(cell_value("mlp step"), Value::from("mlp step"));
    }
}
