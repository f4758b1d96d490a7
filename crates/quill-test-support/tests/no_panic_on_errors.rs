//! Library code never turns an error value into a panic (issue 48): every crate's `src/` is
//! read and any `panic!` that formats an error (`|e| panic!`, `panic!("{e}")`,
//! `panic!("{}", err)`, ...) outside `#[cfg(test)]` code fails this test with its place. The
//! few `panic!`s left are internal invariants (a quill bug, never user input), and name none.

use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Whether `line` panics on an error value.
fn panics_on_error(line: &str) -> bool {
    let Some(at) = line.find("panic!(") else {
        return false;
    };
    let before = &line[..at];
    let args = &line[at..];
    let names_error = ["{e}", "{e:?}", "{err}", "{err:?}", "{error}", "{error:?}"]
        .iter()
        .any(|p| args.contains(p))
        || args.contains("\", e)")
        || args.contains("\", err)");
    names_error || before.contains("|e|") || before.contains("|err|")
}

/// The non-test lines of a source file: a `#[cfg(test)]` item is skipped to its closing brace
/// at the same indentation.
fn library_lines(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut skip_to: Option<String> = None;
    let mut pending = false;
    for (i, line) in text.lines().enumerate() {
        if let Some(end) = &skip_to {
            if line == end {
                skip_to = None;
            }
            continue;
        }
        if line.trim() == "#[cfg(test)]" {
            pending = true;
            continue;
        }
        if pending {
            pending = false;
            let indent = &line[..line.len() - line.trim_start().len()];
            if line.trim_end().ends_with('{') {
                skip_to = Some(format!("{indent}}}"));
            }
            continue;
        }
        out.push((i + 1, line));
    }
    out
}

#[test]
fn library_code_never_panics_on_an_error_value() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for entry in fs::read_dir(crates).unwrap().flatten() {
        let src = entry.path().join("src");
        // This crate is test support: its panics are test failures by design.
        if src.is_dir() && !entry.path().ends_with("quill-test-support") {
            rust_files(&src, &mut files);
        }
    }
    assert!(files.len() > 100, "read only {} files", files.len());
    let mut found = Vec::new();
    for f in &files {
        let text = fs::read_to_string(f).unwrap();
        for (n, line) in library_lines(&text) {
            if panics_on_error(line) && !line.trim_start().starts_with("//") {
                found.push(format!("{}:{n}: {}", f.display(), line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "library code panics on an error value:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_what_it_looks_for() {
    assert!(panics_on_error(
        r#"    r.unwrap_or_else(|e| panic!("{e}"))"#
    ));
    assert!(panics_on_error(r#"Err(err) => panic!("{}", err),"#));
    assert!(panics_on_error(r#"Err(e) => panic!("load: {e:?}"),"#));
    assert!(!panics_on_error(r#"panic!("internal: ordinal {ordinal}")"#));
    let text = "fn a() {}\n#[cfg(test)]\nmod tests {\n    x(|e| panic!(\"{e}\"));\n}\nfn b() {}\n";
    let lines: Vec<usize> = library_lines(text).iter().map(|(n, _)| *n).collect();
    assert_eq!(lines, vec![1, 6]);
}
