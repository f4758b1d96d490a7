//! What the CLI's tests share: running the binary from the repository root (where data/mnist
//! and data/kjv live), scratch directories, small fast runs' flags (the image and the language
//! job), and reading a run's metrics.csv.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root, where the binary finds data/mnist.
pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

pub fn command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_quill"));
    c.args(args).current_dir(ROOT);
    c
}

pub fn quill(args: &[&str]) -> Output {
    command(args).output().expect("the quill binary runs")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts a refused run: exit status 2, no panic, and `says` all in the message.
pub fn assert_refused(o: &Output, says: &[&str]) -> String {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "expected a refusal, got: {e}");
    assert!(!e.contains("panicked"), "{e}");
    for s in says {
        assert!(e.contains(s), "{s:?} missing from: {e}");
    }
    e
}

/// A fresh scratch directory for `name`.
pub fn scratch(group: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("quill-{group}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A quick run on a small slice of MNIST: 256 samples, 2 steps per epoch, a constant rate so
/// that runs with different --epochs agree epoch by epoch.
pub fn small(out: &Path, epochs: usize) -> Vec<String> {
    [
        "--limit",
        "256",
        "--batch-size",
        "128",
        "--seed",
        "5",
        "--schedule",
        "none",
        "--out",
        out.to_str().unwrap(),
        "--epochs",
        &epochs.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The flags of a small, fast language-model run: a 200-line slice of data/kjv, one layer of
/// 64, constant rate.
pub const SMALL_LM: [&str; 16] = [
    "--task",
    "lm",
    "--limit",
    "200",
    "--hidden",
    "64",
    "--embedding",
    "32",
    "--layers",
    "1",
    "--bptt",
    "32",
    "--batch-size",
    "16",
    "--schedule",
    "none",
];

pub fn run_ok(args: &[String]) -> String {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = quill(&a);
    assert!(o.status.success(), "{}", stderr(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The epochs listed in `dir`/metrics.csv (empty when it is missing).
pub fn csv_epochs(dir: &Path) -> Vec<usize> {
    std::fs::read_to_string(dir.join("metrics.csv"))
        .unwrap_or_default()
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect()
}

/// metrics.csv without the timing columns (which differ between runs).
pub fn csv_figures(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("metrics.csv"))
        .unwrap()
        .lines()
        .map(|l| l.split(',').take(5).collect::<Vec<_>>().join(","))
        .collect()
}

/// The float tensors of `dir`/checkpoint.safetensors (model and optimizer state) as f64, by
/// name.
pub fn checkpoint_floats(dir: &Path) -> Vec<(String, Vec<f64>)> {
    let ck = quill::io::load_checkpoint(&dir.join("checkpoint.safetensors")).unwrap();
    ck.tensors
        .into_iter()
        .filter(|(_, a)| a.dtype().is_float())
        .map(|(name, a)| {
            let v = a
                .astype(quill::DType::F64)
                .unwrap()
                .to_vec::<f64>()
                .unwrap();
            (name, v)
        })
        .collect()
}

/// The largest |a - b| / (1 + |a|) over two checkpoints' float tensors, which must have the same
/// names and sizes; also the number of elements that differ at all.
pub fn checkpoint_difference(a: &Path, b: &Path) -> (f64, usize) {
    let (ta, tb) = (checkpoint_floats(a), checkpoint_floats(b));
    assert_eq!(ta.len(), tb.len(), "{} vs {}", a.display(), b.display());
    assert!(!ta.is_empty());
    let (mut worst, mut differ) = (0.0f64, 0usize);
    for ((na, va), (nb, vb)) in ta.iter().zip(&tb) {
        assert_eq!(na, nb);
        assert_eq!(va.len(), vb.len(), "{na}");
        for (x, y) in va.iter().zip(vb) {
            worst = worst.max((x - y).abs() / (1.0 + x.abs()));
            differ += usize::from(x != y);
        }
    }
    (worst, differ)
}

/// metrics.csv's figures (epoch, train loss and accuracy, held-out loss and accuracy) per
/// epoch, parsed.
pub fn csv_numbers(dir: &Path) -> Vec<Vec<f64>> {
    csv_figures(dir)
        .iter()
        .skip(1)
        .map(|l| l.split(',').map(|x| x.parse().unwrap()).collect())
        .collect()
}

/// Asserts that two runs' metrics agree within `tol` relative, epoch by epoch.
pub fn assert_csv_close(a: &Path, b: &Path, tol: f64) {
    let (na, nb) = (csv_numbers(a), csv_numbers(b));
    assert_eq!(na.len(), nb.len(), "{na:?} vs {nb:?}");
    assert!(!na.is_empty());
    for (ra, rb) in na.iter().zip(&nb) {
        for (x, y) in ra.iter().zip(rb) {
            assert!(
                (x - y).abs() <= tol * (1.0 + x.abs()),
                "{} vs {}: {ra:?} vs {rb:?}",
                a.display(),
                b.display()
            );
        }
    }
}
