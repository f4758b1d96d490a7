//! quill-gemm against the two Rust GEMMs, `gemm` (faer's) and `matrixmultiply` (ndarray's), in
//! one process: the three take turns case by case and round by round (the order rotating), so
//! that a drifting machine load hits all alike, and the report gives GFLOP/s medians and the
//! median over rounds of each round's time ratio (> 1: quill-gemm faster). Every product is
//! checked against the peers' once per case.
//!
//! ```sh
//! cargo run --release -p quill-gemm --example peers -- [--threads 2] [--rounds 7] \
//!     [--only f32|f64] [--shapes 64x512x512,...]
//! ```
//!
//! Threads: quill-gemm and `gemm` share a rayon pool of `--threads` threads; `matrixmultiply`
//! runs its own (`MATMUL_NUM_THREADS`, set here, at most 4). `QUILL_MATMUL_KERNEL` picks
//! quill-gemm's kernel family.

use quill_gemm::{matmul, row_major, Element, Operand};
use std::time::Instant;

/// The three libraries, in their base order.
const NAMES: [&str; 3] = ["quill-gemm", "gemm", "matrixmultiply"];

/// A type all three multiply.
trait Num: Element + Copy + Default + PartialOrd + 'static {
    const NAME: &'static str;
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
    /// `c = a @ b` (row-major m x k, k x n) through `matrixmultiply`.
    fn mm(m: usize, k: usize, n: usize, a: &[Self], b: &[Self], c: &mut [Self]);
}

impl Num for f32 {
    const NAME: &'static str = "f32";
    fn from_f64(x: f64) -> Self {
        x as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn mm(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
        let (k_, n_) = (k as isize, n as isize);
        // SAFETY: row-major m x k, k x n and m x n slices of exactly those lengths.
        unsafe {
            let (ap, bp, cp) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
            matrixmultiply::sgemm(m, k, n, 1.0, ap, k_, 1, bp, n_, 1, 0.0, cp, n_, 1);
        }
    }
}

impl Num for f64 {
    const NAME: &'static str = "f64";
    fn from_f64(x: f64) -> Self {
        x
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn mm(m: usize, k: usize, n: usize, a: &[f64], b: &[f64], c: &mut [f64]) {
        let (k_, n_) = (k as isize, n as isize);
        // SAFETY: row-major m x k, k x n and m x n slices of exactly those lengths.
        unsafe {
            let (ap, bp, cp) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
            matrixmultiply::dgemm(m, k, n, 1.0, ap, k_, 1, bp, n_, 1, 0.0, cp, n_, 1);
        }
    }
}

/// `c = a @ b` through `gemm` on `threads` rayon threads.
fn faer_gemm<T: Num>(m: usize, k: usize, n: usize, a: &[T], b: &[T], c: &mut [T], threads: usize) {
    let par = if threads > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    let one = T::from_f64(1.0);
    // SAFETY: row-major m x k, k x n and m x n slices of exactly those lengths (column stride
    // 1, row stride the width); with `read_dst` false, `c` is only written.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            1,
            n as isize,
            T::default(),
            one,
            false,
            false,
            false,
            par,
        )
    }
}

/// `c = a @ b` through quill-gemm's batched entry, as quill's `matmul` calls it.
fn quill<T: Num>(m: usize, k: usize, n: usize, a: &[T], b: &[T], c: &mut [T]) {
    let (sa, sb) = ([m, k], [k, n]);
    let (ra, rb) = (row_major(&sa), row_major(&sb));
    matmul(Operand::new(a, &sa, &ra), Operand::new(b, &sb, &rb), c).expect("shapes match");
}

/// Runs library `lib` once.
fn run<T: Num>(lib: usize, [m, k, n]: [usize; 3], a: &[T], b: &[T], c: &mut [T], threads: usize) {
    match lib {
        0 => quill(m, k, n, a, b, c),
        1 => faer_gemm(m, k, n, a, b, c, threads),
        _ => T::mm(m, k, n, a, b, c),
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Values in [-1, 1).
fn values<T: Num>(seed: u64, len: usize) -> Vec<T> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            T::from_f64((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
        })
        .collect()
}

/// Times every case of type `T`, printing a line per case.
fn bench<T: Num>(shapes: &[[usize; 3]], rounds: usize, threads: usize) {
    for &[m, k, n] in shapes {
        let (a, b) = (values::<T>(1, m * k), values::<T>(2, k * n));
        let mut outs: Vec<Vec<T>> = (0..3).map(|_| vec![T::default(); m * n]).collect();
        for (lib, c) in outs.iter_mut().enumerate() {
            run(lib, [m, k, n], &a, &b, c, threads);
        }
        let worst = outs[1..]
            .iter()
            .flat_map(|o| o.iter().zip(&outs[0]))
            .map(|(x, y)| (x.to_f64() - y.to_f64()).abs())
            .fold(0.0, f64::max);
        // Summation orders differ: allow k rounding errors of sums up to about sqrt(k).
        let eps = if T::NAME == "f32" { 1.2e-7 } else { 2.3e-16 };
        let tol = 8.0 * k as f64 * eps * (k as f64).sqrt().max(1.0);
        assert!(worst <= tol, "{m}x{k}x{n} {}: off by {worst}", T::NAME);
        // Enough products per timing to last about 20 ms (at 50 GFLOP/s).
        let flops = 2.0 * (m * k * n) as f64;
        let inner = ((50e9 * 0.02 / flops) as usize).clamp(1, 10_000);
        let mut secs: [Vec<f64>; 3] = Default::default();
        for r in 0..rounds {
            for i in 0..3 {
                let lib = (i + r) % 3;
                let t = Instant::now();
                for _ in 0..inner {
                    run(lib, [m, k, n], &a, &b, &mut outs[lib], threads);
                }
                secs[lib].push(t.elapsed().as_secs_f64() / inner as f64);
            }
        }
        let gf = |s: &[f64]| flops / median(&mut s.to_vec()) / 1e9;
        let ratio = |peer: usize| {
            let mut r: Vec<f64> = secs[peer]
                .iter()
                .zip(&secs[0])
                .map(|(p, q)| p / q)
                .collect();
            median(&mut r)
        };
        println!(
            "{:<4} {:>5} x {:>5} x {:>5} | {:>8.1} {:>8.1} {:>8.1} | {:>6.2}x {:>6.2}x",
            T::NAME,
            m,
            k,
            n,
            gf(&secs[0]),
            gf(&secs[1]),
            gf(&secs[2]),
            ratio(1),
            ratio(2)
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let threads: usize = opt("--threads").map_or(2, |v| v.parse().expect("--threads N"));
    let rounds: usize = opt("--rounds").map_or(7, |v| v.parse().expect("--rounds N"));
    let only = opt("--only");
    let shapes: Vec<[usize; 3]> = match opt("--shapes") {
        Some(s) => s
            .split(',')
            .map(|c| {
                let d: Vec<usize> = c.split('x').map(|x| x.parse().expect("MxKxN")).collect();
                [d[0], d[1], d[2]]
            })
            .collect(),
        None => [64, 128, 256, 512, 1024]
            .map(|s| [s, s, s])
            .into_iter()
            .chain([[32, 512, 512], [128, 784, 512], [1024, 128, 384]])
            .collect(),
    };
    // Before either pool starts: both read their thread count once.
    std::env::set_var("MATMUL_NUM_THREADS", threads.to_string());
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build_global()
        .expect("the global pool is not yet built");
    println!(
        "{threads} thread(s), {rounds} rounds, kernel {:?}; GFLOP/s medians, then quill-gemm's \
         speed over each peer (median of same-round ratios)",
        quill_gemm::active_kernel()
    );
    println!(
        "type   m x     k x     n | {:>8} {:>8} {:>8} | {:>7} {:>7}",
        "quill", NAMES[1], "mm", "/gemm", "/mm"
    );
    if only.as_deref() != Some("f64") {
        bench::<f32>(&shapes, rounds, threads);
    }
    if only.as_deref() != Some("f32") {
        bench::<f64>(&shapes, rounds, threads);
    }
}
