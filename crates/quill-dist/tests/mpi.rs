//! MPI integration tests (feature `mpi`): each launches `mpirun --oversubscribe -np N` on the
//! `quill-dist-check` binary over loopback, with a wall-clock limit so a hang fails the test
//! instead of stalling CI. Works as root (the OMPI_ALLOW_RUN_AS_ROOT variables) and not.
#![cfg(feature = "mpi")]

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn mpirun(np: usize, args: &[&str], env: &[(&str, &str)], limit: Duration) -> (Output, Duration) {
    let mut cmd = Command::new("mpirun");
    cmd.args(["--oversubscribe", "-np", &np.to_string()])
        .arg(env!("CARGO_BIN_EXE_quill-dist-check"))
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .expect("mpirun not found: run scripts/install-mpi.sh");
    while child.try_wait().expect("wait on mpirun").is_none() {
        if start.elapsed() > limit {
            child.kill().ok();
            panic!("mpirun {args:?} ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (
        child.wait_with_output().expect("mpirun output"),
        start.elapsed(),
    )
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn collectives_match_a_naive_computation_on_2_and_3_ranks() {
    for np in [2, 3] {
        let (o, _) = mpirun(np, &["collectives"], &[], Duration::from_secs(120));
        let t = text(&o);
        assert!(o.status.success(), "np {np}: {t}");
        for r in 0..np {
            assert!(t.contains(&format!("rank {r}: ok")), "np {np}: {t}");
        }
    }
}

fn params(path: &std::path::Path) -> Vec<f64> {
    std::fs::read_to_string(path)
        .unwrap()
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect()
}

/// Runs the toy training once per (ranks, micro-batches per step) and returns rank 0's
/// parameters of each.
fn toy_runs(name: &str, runs: &[(usize, usize)]) -> Vec<Vec<f64>> {
    let dir = std::env::temp_dir().join(format!("quill-dist-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let steps = "12";
    let mut out = Vec::new();
    for &(np, accum) in runs {
        let file = dir.join(format!("np{np}-accum{accum}.txt"));
        let (o, _) = mpirun(
            np,
            &[
                "train",
                file.to_str().unwrap(),
                steps,
                "128",
                &accum.to_string(),
            ],
            &[],
            Duration::from_secs(120),
        );
        assert!(o.status.success(), "np {np} accum {accum}: {}", text(&o));
        out.push(params(&file));
    }
    std::fs::remove_dir_all(&dir).ok();
    out
}

fn assert_same_params(runs: &[Vec<f64>]) {
    assert_eq!(runs[0].len(), 8 * 16 + 16 + 16 * 3 + 3);
    assert_eq!(runs[1].len(), runs[0].len());
    let mut moved = 0.0f64;
    for (a, b) in runs[0].iter().zip(&runs[1]) {
        assert!((a - b).abs() <= 1e-4 * (1.0 + a.abs()), "{a} vs {b}");
        moved += a.abs();
    }
    assert!(
        moved > 1.0,
        "the parameters are all near zero: nothing was compared"
    );
}

#[test]
fn two_ranks_of_64_equal_one_rank_of_128() {
    assert_same_params(&toy_runs("eq", &[(1, 1), (2, 1)]));
}

/// Gradient accumulation over MPI: 2 ranks x 4 micro-batches of 16 (the first three under
/// `no_sync`) reach 1 rank's parameters with batch 128, within the same 1e-4 (the sums happen
/// in another order; not bit-exact). The check binary fails the run if a backward under
/// `no_sync` started an all-reduce, or the synchronised one started other than one per bucket.
#[test]
fn two_ranks_accumulating_four_micro_batches_equal_one_rank_of_128() {
    assert_same_params(&toy_runs("accum", &[(1, 1), (2, 4)]));
}

#[test]
fn a_hanging_rank_fails_the_job_within_the_timeout() {
    let (o, took) = mpirun(
        2,
        &["fault", "hang"],
        &[("QUILL_DIST_TIMEOUT", "2")],
        Duration::from_secs(60),
    );
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("all_reduce: rank 0 of 2 waited") && t.contains("timeout 2s"),
        "{t}"
    );
    // A later collective fails at once instead of joining a collective out of step.
    assert!(
        t.contains("then: ") && t.contains("an earlier all_reduce timed out"),
        "{t}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn a_dying_rank_fails_the_job_fast() {
    let (o, took) = mpirun(
        2,
        &["fault", "exit"],
        &[("QUILL_DIST_TIMEOUT", "20")],
        Duration::from_secs(60),
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(took < Duration::from_secs(30), "took {took:?}");
}
