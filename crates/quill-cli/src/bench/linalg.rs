//! `quill bench linalg`: the factorizations of `quill::linalg` (faer underneath) against
//! NumPy's LAPACK on the same 512 x 512 f64 matrices (a symmetric positive-definite one, and
//! the general one it is built from), then complex matmuls (quill-gemm's complex product on its
//! real GEMM against NumPy's zgemm / cgemm) and FFTs (rustfft against NumPy's pocketfft) on
//! data built from them, at the sizes issue 52 names (complex64 1024², 2^20 points, 2048² real)
//! and smaller ones; medians of alternating rounds, the ratio NumPy / quill (above 1: quill is
//! faster).

use super::peer::Peer;
use super::{median, rounds_only};
use crate::report::{heading, Table};
use crate::train::q;
use quill::linalg::{self, QrMode};
use quill::{DType, NDArray};
use std::time::Instant;

const N: usize = 512;

/// The matrices of `linalg_peer.py`, built the same way: g (general) and a = g gᵀ / N + I.
fn matrices() -> Result<(NDArray, NDArray, NDArray), String> {
    let g: Vec<f64> = (0..N * N)
        .map(|k| {
            let (r, c) = (k / N, k % N);
            (k as f64 * 0.37).sin() + ((c * N + r) as f64 * 0.11).cos()
        })
        .collect();
    let g = q(NDArray::from_vec(g, &[N, N]))?;
    let gt = q(g.transpose(0, 1))?;
    let eye = q(NDArray::eye(N, N, 0, DType::F64))?;
    let a = q(q(q(g.matmul(&gt))?.div_scalar(N as f64))?.add(&eye))?;
    let b: Vec<f64> = (0..N * 16).map(|k| (k as f64).cos()).collect();
    Ok((g, a, q(NDArray::from_vec(b, &[N, 16]))?))
}

/// Runs `quill bench linalg [--rounds N]`.
pub fn run(args: &[String]) -> Result<(), String> {
    let rounds = rounds_only("linalg", args, 5)?;
    quill::in_pool(move || bench(rounds))
}

fn bench(rounds: usize) -> Result<(), String> {
    let (g, a, b) = matrices()?;
    // z = g + i a on the leading 256 x 256 block; a signal of 2^16 points; g as 64 rows of 4096.
    let block = |m: &NDArray| q(q(m.slice(&quill::s![..256, ..256]))?.compact());
    let z = q(NDArray::complex(&block(&g)?, &block(&a)?))?;
    let z64 = q(z.astype(DType::C64))?;
    let flat = q(q(g.reshape(&[-1]))?.slice(&quill::s![..65536]))?;
    let sig = q(NDArray::complex(&flat, &q(flat.flip(&[0]))?))?;
    let rows = q(g.reshape(&[64, 4096]))?;
    // The large cases: z tiled to 1024² (complex64), a 2^20-point complex64 signal, a 2048²
    // f64 image (g tiled).
    let tile = |m: &NDArray, reps: usize| -> Result<NDArray, String> {
        let r = q(m.reshape(&[1, N as isize, 1, N as isize]))?;
        let r = q(r.broadcast_to(&[reps, N, reps, N]))?;
        q(q(r.compact())?.reshape(&[(reps * N) as isize, (reps * N) as isize]))
    };
    let big = q(NDArray::complex(&tile(&g, 2)?, &tile(&a, 2)?))?;
    let big64 = q(big.astype(DType::C64))?;
    let image = tile(&g, 4)?;
    let long = q(q(q(image.reshape(&[-1]))?.slice(&quill::s![..1 << 20]))?.compact())?;
    let long = q(q(NDArray::complex(&long, &q(long.flip(&[0]))?))?.astype(DType::C64))?;
    let norm = quill::fft::Norm::Backward;
    let mut peer = Peer::start(include_str!("linalg_peer.py"));
    heading(format!(
        "quill bench linalg: {N} x {N} f64 (a symmetric positive-definite a, a general g), \
         {} threads, {rounds} rounds, medians; peer: {}",
        rayon::current_num_threads(),
        peer.as_ref()
            .map_or("none".to_string(), |p| p.version.clone())
    ));
    type Case<'a> = (&'a str, &'a str, Box<dyn Fn() -> quill::Result<()> + 'a>);
    let cases: Vec<Case> = vec![
        (
            "solve",
            "solve(a, b), b 512 x 16",
            Box::new(|| linalg::solve(&a, &b).map(drop)),
        ),
        ("inv", "inv(a)", Box::new(|| linalg::inv(&a).map(drop))),
        (
            "det",
            "slogdet(a)",
            Box::new(|| linalg::slogdet(&a).map(drop)),
        ),
        (
            "cholesky",
            "cholesky(a)",
            Box::new(|| linalg::cholesky(&a, false).map(drop)),
        ),
        (
            "qr",
            "qr(a)",
            Box::new(|| linalg::qr(&a, QrMode::Reduced).map(drop)),
        ),
        ("eigh", "eigh(a)", Box::new(|| linalg::eigh(&a).map(drop))),
        (
            "svd",
            "svd(g)",
            Box::new(|| linalg::svd(&g, true).map(drop)),
        ),
        (
            "svdvals",
            "svdvals(g)",
            Box::new(|| linalg::svdvals(&g).map(drop)),
        ),
        (
            "cmatmul",
            "z @ z, complex128 256 x 256",
            Box::new(|| z.matmul(&z).map(drop)),
        ),
        (
            "cmatmul64",
            "z @ z, complex64 256 x 256",
            Box::new(|| z64.matmul(&z64).map(drop)),
        ),
        (
            "cmatmul1024",
            "z @ z, complex64 1024 x 1024",
            Box::new(|| big64.matmul(&big64).map(drop)),
        ),
        (
            "fft",
            "fft of 65536 complex128",
            Box::new(|| quill::fft::fft(&sig, None, -1, norm).map(drop)),
        ),
        (
            "rfft",
            "rfft of 64 x 4096 f64 rows",
            Box::new(|| quill::fft::rfft(&rows, None, -1, norm).map(drop)),
        ),
        (
            "fft20",
            "fft of 2^20 complex64",
            Box::new(|| quill::fft::fft(&long, None, -1, norm).map(drop)),
        ),
        (
            "rfft2",
            "rfft2 of 2048 x 2048 f64",
            Box::new(|| quill::fft::rfftn(&image, None, None, norm).map(drop)),
        ),
    ];
    let table = Table::new("linalg", &["case", "quill ms", "NumPy ms", "NumPy / quill"]);
    for (name, what, f) in &cases {
        q(f())?;
        if let Some(p) = peer.as_mut() {
            p.run(name, 1);
        }
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let t = Instant::now();
            q(f())?;
            ours.push(t.elapsed().as_secs_f64());
            if let Some(p) = peer.as_mut() {
                theirs.extend(p.run(name, 1).unwrap_or_default());
            }
        }
        let ms = median(&mut ours) * 1e3;
        let np = (!theirs.is_empty()).then(|| median(&mut theirs) * 1e3);
        table.line(format!(
            "| {what} | {ms:.2} | {} | {} |",
            np.map_or("-".into(), |t| format!("{t:.2}")),
            np.map_or("-".into(), |t| format!("{:.2}x", t / ms))
        ));
    }
    Ok(())
}
