//! `quill train --distributed`: without the `mpi` feature it is a clear error; with it, 2 ranks
//! under mpirun train, rank 0 alone writes the CSV and checkpoint, and a resume on 1 rank
//! continues from the 2-rank checkpoint (a different world size).

use std::process::Command;

#[cfg(not(feature = "mpi"))]
fn quill(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_quill"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .unwrap()
}

#[cfg(not(feature = "mpi"))]
#[test]
fn distributed_without_the_mpi_feature_says_how_to_build() {
    let o = quill(&["train", "--distributed", "--epochs", "1", "--limit", "10"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--features mpi"), "{err}");
}

#[cfg(feature = "mpi")]
#[test]
fn two_ranks_train_and_one_rank_resumes() {
    let dir = std::env::temp_dir().join(format!("quill-ddp-cli-{}", std::process::id()));
    let out = dir.to_str().unwrap();
    let run = |np: &str, epochs: &str, resume: bool| {
        let mut c = Command::new("mpirun");
        c.args(["--oversubscribe", "-np", np, env!("CARGO_BIN_EXE_quill")])
            .args([
                "train",
                "--distributed",
                "--limit",
                "600",
                "--epochs",
                epochs,
                "--out",
                out,
            ])
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("QUILL_DIST_TIMEOUT", "60")
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
        if resume {
            c.arg("--resume");
        }
        c.output().unwrap()
    };
    let o = run("2", "1", false);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Rank 0 alone prints the epoch line.
    assert_eq!(text.matches("epoch 1/1:").count(), 1, "{text}");
    assert!(text.contains("2 ranks x 64"), "{text}");
    assert!(dir.join("checkpoint.safetensors").exists());
    let o = run("1", "2", true);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        text.contains("resumed from") && text.contains("epoch 2/2:"),
        "{text}"
    );
    let csv = std::fs::read_to_string(dir.join("metrics.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `--dist-backend nccl` on 2 ranks: without the `nccl` feature, or (with it) on a machine
/// without a GPU, every rank stops with a message saying why, within a time limit, instead of
/// waiting for the others. With a GPU and the feature it is left to the GPU machine.
#[cfg(feature = "mpi")]
#[test]
fn the_nccl_backend_fails_cleanly_where_it_cannot_run() {
    if cfg!(feature = "nccl") && std::path::Path::new("/dev/nvidia0").exists() {
        return;
    }
    let mut c = Command::new("mpirun");
    c.args(["--oversubscribe", "-np", "2", env!("CARGO_BIN_EXE_quill")])
        .args(["train", "--distributed", "--dist-backend", "nccl"])
        .args(["--limit", "100", "--epochs", "1"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("QUILL_DIST_TIMEOUT", "30")
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let start = std::time::Instant::now();
    let o = c.output().unwrap();
    assert!(start.elapsed() < std::time::Duration::from_secs(90));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let why = if cfg!(feature = "nccl") {
        "nccl init"
    } else {
        "--features nccl"
    };
    assert!(err.contains(why), "{err}");
    let bad = Command::new(env!("CARGO_BIN_EXE_quill"))
        .args(["train", "--distributed", "--dist-backend", "gloo"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("not mpi or nccl"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}
