//! The main job end to end through the `quill` binary, on a small slice of MNIST: a resumed run
//! reproduces an uninterrupted one exactly; a crash mid-save keeps the old checkpoint usable;
//! bad options print a clear message and the usage.

use std::path::Path;
use std::process::Command;

fn quill(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_quill"))
        .args(args)
        // The binary reads data/mnist relative to the repository root.
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("the quill binary runs")
}

fn tmp(name: &str) -> String {
    let d = std::env::temp_dir().join(format!("quill-train-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d.to_string_lossy().into_owned()
}

fn csv(dir: &str) -> Vec<String> {
    let s = std::fs::read_to_string(Path::new(dir).join("metrics.csv")).unwrap();
    // Drop the timing columns: everything else must match exactly.
    s.lines()
        .map(|l| l.split(',').take(5).collect::<Vec<_>>().join(","))
        .collect()
}

#[test]
fn resume_reproduces_an_uninterrupted_run() {
    // A constant rate: a cosine schedule spans the planned epochs, which differ between runs.
    let common = [
        "--limit",
        "384",
        "--batch-size",
        "128",
        "--seed",
        "3",
        "--schedule",
        "none",
    ];
    let (a, b) = (tmp("a"), tmp("b"));
    let run = |out: &str, extra: &[&str]| {
        let mut args = common.to_vec();
        args.extend_from_slice(&["--out", out]);
        args.extend_from_slice(extra);
        let o = quill(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    run(&a, &["--epochs", "2"]);
    run(&b, &["--epochs", "1"]);
    let resumed = run(&b, &["--epochs", "2", "--resume"]);
    assert!(resumed.contains("resumed"), "{resumed}");
    let (ca, cb) = (csv(&a), csv(&b));
    assert_eq!(ca.len(), 3, "{ca:?}");
    assert_eq!(ca, cb, "a resumed run must match the uninterrupted one");
    assert!(Path::new(&a).join("curves.png").exists());
    // Resuming with other options is refused with a message naming the option.
    let o = quill(&[
        "--limit", "384", "--seed", "4", "--out", &b, "--epochs", "3", "--resume",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("seed"));
}

#[test]
fn a_crash_mid_save_keeps_the_old_checkpoint() {
    let d = tmp("crash");
    let o = quill(&["--limit", "256", "--epochs", "1", "--out", &d]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A save that died before its rename leaves only a stray temporary file behind.
    let ck = Path::new(&d).join("checkpoint.safetensors");
    let before = std::fs::read(&ck).unwrap();
    std::fs::write(
        Path::new(&d).join(".checkpoint.safetensors.tmp-1"),
        b"garbage",
    )
    .unwrap();
    let o = quill(&["--limit", "256", "--epochs", "2", "--out", &d, "--resume"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_ne!(
        std::fs::read(&ck).unwrap(),
        before,
        "the resumed run saved a new checkpoint"
    );
    // A truncated checkpoint is an error that names the file, not a panic.
    std::fs::write(&ck, &before[..before.len() / 2]).unwrap();
    let o = quill(&["--limit", "256", "--epochs", "3", "--out", &d, "--resume"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("checkpoint.safetensors"));
}

#[test]
fn bad_options_print_the_usage() {
    for (args, says) in [
        (&["--epochs", "x"][..], "--epochs"),
        (&["--optimizer", "rmsprop"][..], "rmsprop"),
        (&["--lr", "-1"][..], "--lr"),
        (&["--bogus"][..], "--bogus"),
        (&["--batch-size", "0"][..], "--batch-size"),
    ] {
        let o = quill(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            err.contains(says) && err.contains("usage"),
            "{args:?}: {err}"
        );
    }
    let o = quill(&["--data", "/nonexistent/mnist", "--epochs", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/mnist"));
}
