//! The per-epoch figures: `metrics.csv` (rewritten atomically after every epoch) and the same
//! rows as the checkpoint's `history` metadata, from which `--resume` rebuilds a CSV that a
//! crash left missing, empty, short or ahead of the checkpoint.

use std::path::{Path, PathBuf};

/// One epoch's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub epoch: usize,
    pub train_loss: f64,
    pub train_acc: f64,
    pub test_loss: f64,
    pub test_acc: f64,
    pub seconds: f64,
    pub samples_per_s: f64,
}

impl Row {
    /// The row as `--json`'s epoch fields (the CSV's columns).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "epoch": self.epoch, "train_loss": self.train_loss, "train_acc": self.train_acc,
            "test_loss": self.test_loss, "test_acc": self.test_acc, "seconds": self.seconds,
            "samples_per_s": self.samples_per_s,
        })
    }
}

const HEADER: &str = "epoch,train_loss,train_acc,test_loss,test_acc,seconds,samples_per_s";

/// The metadata key of the checkpoint that holds the rows (CSV lines, no header).
pub const HISTORY_KEY: &str = "history";

fn line(r: &Row) -> String {
    format!(
        "{},{:.6},{:.6},{:.6},{:.6},{:.3},{:.1}",
        r.epoch, r.train_loss, r.train_acc, r.test_loss, r.test_acc, r.seconds, r.samples_per_s
    )
}

/// The rows as the checkpoint's `history` value.
pub fn history(rows: &[Row]) -> String {
    rows.iter().map(line).collect::<Vec<_>>().join("\n")
}

/// The whole CSV file for `rows`.
pub fn csv_text(rows: &[Row]) -> String {
    let mut s = format!("{HEADER}\n");
    for r in rows {
        s.push_str(&line(r));
        s.push('\n');
    }
    s
}

fn parse_line(l: &str) -> Option<Row> {
    let v: Vec<&str> = l.split(',').collect();
    if v.len() != 7 {
        return None;
    }
    let f = |i: usize| v[i].parse::<f64>().ok();
    Some(Row {
        epoch: v[0].parse().ok()?,
        train_loss: f(1)?,
        train_acc: f(2)?,
        test_loss: f(3)?,
        test_acc: f(4)?,
        seconds: f(5)?,
        samples_per_s: f(6)?,
    })
}

/// Parses a checkpoint's `history`, which must hold exactly epochs 1..=`epoch` in order.
pub fn parse_history(text: &str, epoch: usize) -> Result<Vec<Row>, String> {
    let mut rows = Vec::with_capacity(epoch);
    for (i, l) in text.lines().filter(|l| !l.is_empty()).enumerate() {
        let r = parse_line(l).ok_or_else(|| {
            format!(
                "the metadata key {HISTORY_KEY:?} has a malformed line {}: {l:?}",
                i + 1
            )
        })?;
        if r.epoch != i + 1 {
            return Err(format!(
                "the metadata key {HISTORY_KEY:?} lists epoch {} where epoch {} belongs",
                r.epoch,
                i + 1
            ));
        }
        rows.push(r);
    }
    if rows.len() != epoch {
        return Err(format!(
            "the metadata key {HISTORY_KEY:?} holds {} epochs but the checkpoint is at epoch {epoch}",
            rows.len()
        ));
    }
    Ok(rows)
}

/// Writes the CSV for `rows` to `path` atomically (the whole history each time).
pub fn write_csv(path: &Path, rows: &[Row]) -> Result<(), String> {
    let text = csv_text(rows);
    quill::io::write_atomic(path, |w| w.write_all(text.as_bytes())).map_err(|e| e.to_string())
}

/// The rows a resumed run continues from, with `metrics.csv` made to agree with the checkpoint
/// at `epoch`. With the checkpoint's `history` (`Some`), the CSV is rewritten from it unless it
/// already matches; a CSV holding anything the rebuilt one lacks is first kept as
/// `metrics.csv.bak`, so no line is lost silently. A checkpoint from before histories were stored (`None`) keeps the
/// CSV's rows up to `epoch`, again backing up a file that had more, and warns about gaps.
/// `write` is false on ranks that must not touch the files.
pub fn reconcile(
    csv: &Path,
    epoch: usize,
    history: Option<Vec<Row>>,
    write: bool,
) -> Result<Vec<Row>, String> {
    let old = std::fs::read_to_string(csv).unwrap_or_default();
    let old_rows: Vec<Row> = old.lines().skip(1).filter_map(parse_line).collect();
    let rows = match history {
        Some(h) => h,
        None => {
            let kept: Vec<Row> = old_rows
                .iter()
                .filter(|r| r.epoch <= epoch)
                .cloned()
                .collect();
            let complete =
                kept.len() == epoch && kept.iter().enumerate().all(|(i, r)| r.epoch == i + 1);
            if write && !complete {
                eprintln!(
                    "warning: {} lacks some of epochs 1-{epoch}, and this checkpoint (written before checkpoints carried the history) cannot rebuild them",
                    csv.display()
                );
            }
            kept
        }
    };
    let new = csv_text(&rows);
    if !write || old == new {
        return Ok(rows);
    }
    // A CSV that is a prefix of the rebuilt one (a crash between checkpoint and CSV) loses
    // nothing when replaced; anything else is kept.
    if !old.trim().is_empty() && !new.starts_with(&old) {
        let bak = backup_path(csv);
        std::fs::rename(csv, &bak)
            .map_err(|e| format!("cannot keep {} as {}: {e}", csv.display(), bak.display()))?;
        eprintln!(
            "note: {} (epochs {}) disagreed with the checkpoint (epoch {epoch}); kept as {}",
            csv.display(),
            describe(&old_rows),
            bak.display()
        );
    }
    write_csv(csv, &rows)?;
    crate::report::progress(
        "metrics_rebuilt",
        || {
            format!(
                "{} rebuilt from the checkpoint's history (epochs 1-{epoch})",
                csv.display()
            )
        },
        serde_json::json!({"metrics": crate::report::path(csv), "epochs": epoch}),
    );
    Ok(rows)
}

/// `metrics.csv.bak`, or `.bak.2`, `.bak.3`, ... when earlier backups exist (never replaced).
fn backup_path(csv: &Path) -> PathBuf {
    (1..)
        .map(|i| {
            let mut s = csv.as_os_str().to_owned();
            s.push(if i == 1 {
                ".bak".to_string()
            } else {
                format!(".bak.{i}")
            });
            PathBuf::from(s)
        })
        .find(|p| !p.exists())
        .unwrap_or_else(|| csv.with_extension("csv.bak"))
}

fn describe(rows: &[Row]) -> String {
    match (rows.first(), rows.last()) {
        (Some(a), Some(b)) => format!("{}-{}", a.epoch, b.epoch),
        _ => "none readable".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(e: usize) -> Row {
        Row {
            epoch: e,
            train_loss: 1.0 / e as f64,
            train_acc: 0.5,
            test_loss: 0.25,
            test_acc: 0.75,
            seconds: 1.5,
            samples_per_s: 100.0,
        }
    }

    #[test]
    fn history_round_trips_and_is_checked() {
        let rows: Vec<Row> = (1..=3).map(row).collect();
        let h = history(&rows);
        let back = parse_history(&h, 3).unwrap();
        assert_eq!(csv_text(&back), csv_text(&rows));
        assert!(parse_history(&h, 4).unwrap_err().contains("epoch 4"));
        assert!(parse_history("1,x,0,0,0,0,0", 1)
            .unwrap_err()
            .contains("malformed"));
        let skipped = history(&[row(1), row(3)]);
        assert!(parse_history(&skipped, 2)
            .unwrap_err()
            .contains("lists epoch 3"));
        assert_eq!(parse_history("", 0).unwrap(), vec![]);
    }
}
