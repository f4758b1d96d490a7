//! Kernels whose loop is many short inner runs (or one tiny reduction per output), where the
//! cost of quill-core's `Runs` per run and per construction shows; `quill bench` cases all have
//! long runs. Prints ns per element, best of `reps` (first argument, default 15). Compare two
//! builds alternately, e.g. `RAYON_NUM_THREADS=1 cargo run --release -p quill --example
//! short_runs -- 10`.
use quill::{s, BinaryOp, DType, NDArray, UnaryOp};
use std::time::Instant;

fn time(name: &str, elems: usize, reps: usize, f: impl Fn()) {
    f();
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!("{name:50} {:8.3} ns/elem", best * 1e9 / elems as f64);
}

fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(15);
    let n = 1usize << 20;
    // (N, 3) transposed views: runs of 3
    let a = NDArray::arange(0.0, (3 * n) as f64, 1.0, DType::F32)
        .unwrap()
        .reshape(&[3, n as isize])
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    time("add (N,3).T + (N,3).T, runs of 3", 3 * n, reps, || {
        drop(a.binary(BinaryOp::Add, &a).unwrap())
    });
    time("exp (N,3).T, runs of 3", 3 * n, reps, || {
        drop(a.unary(UnaryOp::Exp).unwrap())
    });
    // (256, 256, 4) permuted (1, 0, 2): runs of 4 contiguous
    let c = NDArray::arange(0.0, (256 * 256 * 4 * 4) as f64, 1.0, DType::F32)
        .unwrap()
        .reshape(&[512, 512, 4])
        .unwrap()
        .permute(&[1, 0, 2])
        .unwrap();
    let cn = c.numel();
    time(
        "compact (512,512,4).permute(1,0,2), runs of 4",
        cn,
        reps,
        || drop(c.compact()),
    );
    time("astype f64 of the same, runs of 4", cn, reps, || {
        drop(c.astype(DType::F64))
    });
    time(
        "sum over last axis of the same (rows of 4)",
        cn,
        reps,
        || drop(c.sum(Some(&[-1]), false).unwrap()),
    );
    let c3 = NDArray::arange(0.0, (3 * n) as f64, 1.0, DType::F32)
        .unwrap()
        .reshape(&[n as isize, 3])
        .unwrap();
    time(
        "sum over last axis of (N,3) contiguous",
        3 * n,
        reps,
        || drop(c3.sum(Some(&[-1]), false).unwrap()),
    );
    let d = NDArray::arange(0.0, (64 * 64 * 64 * 4) as f64, 1.0, DType::F32)
        .unwrap()
        .reshape(&[64, 64, 64, 4])
        .unwrap()
        .permute(&[2, 0, 1, 3])
        .unwrap();
    time(
        "sum over axes (1,2) of (64,64,64,4).permute(2,0,1,3)",
        d.numel(),
        reps,
        || drop(d.sum(Some(&[1, 2]), false).unwrap()),
    );
    let z = NDArray::zeros(&[n, 8], DType::F32).unwrap();
    let zs = z.slice(&s![.., ..;2]).unwrap();
    time(
        "fill z[:, ::2] of (N,8), runs of 4 stride 2",
        4 * n,
        reps,
        || zs.assign_scalar(1.0).unwrap(),
    );
    time("compact of (N,3).T via tiles", 3 * n, reps, || {
        drop(a.compact())
    });
}
