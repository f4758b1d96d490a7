//! `quill bench ops`: the CPU compute kernels on f32 against NumPy and PyTorch (when they
//! import) in one run, alternating quill and each peer case by case: matmul in f32 (square and
//! Linear-layer shapes) and bf16 (PyTorch only: NumPy has no bf16) in GFLOP/s, elementwise ops
//! and reductions (GB/s, bytes read plus written), and a conv layer (GFLOP/s, forward alone
//! and forward + backward). Medians and ratios; absolute
//! figures drift with the machine's load, ratios much less.

use super::{median, peer::Peer};
use quill::{DType, NDArray, Tensor};
use std::time::Instant;

enum Unit {
    /// Bytes read plus written.
    GBs(f64),
    /// Floating-point operations.
    GFlops(f64),
}

struct Case {
    name: String,
    what: String,
    unit: Unit,
    run: Box<dyn Fn()>,
}

fn gb(name: &str, what: &str, bytes: f64, run: impl Fn() + 'static) -> Case {
    Case {
        name: name.into(),
        what: what.into(),
        unit: Unit::GBs(bytes),
        run: Box::new(run),
    }
}

fn rand(shape: &[usize], seed: u64) -> Result<NDArray, String> {
    NDArray::rand(shape, seed, DType::F32).map_err(|e| e.to_string())
}

/// Linear-layer shapes `[m, k, n]` of the matmul group; `ops_peer.py` lists the same.
const LINEAR: [(&str, [usize; 3]); 3] = [
    ("linear_32x512x512", [32, 512, 512]),
    ("linear_128x784x512", [128, 784, 512]),
    ("linear_1024x128x384", [1024, 128, 384]),
];

/// `(m x k) @ (k x n)` in `dtype` (inputs drawn in f32 and cast, as the peers do).
fn gemm(name: &str, [m, k, n]: [usize; 3], dtype: DType) -> Result<Case, String> {
    let a = rand(&[m, k], 1)?.astype(dtype);
    let b = rand(&[k, n], 2)?.astype(dtype);
    // Small products repeat within one timing so that the clock's resolution and the peer's
    // call overhead do not dominate; `ops_peer.py` repeats the same count.
    let inner = ((1usize << 25) / (2 * m * k * n)).max(1);
    Ok(Case {
        name: name.into(),
        what: format!("{dtype:?} ({m} x {k}) @ ({k} x {n})"),
        unit: Unit::GFlops(2.0 * (m * k * n * inner) as f64),
        run: Box::new(move || {
            for _ in 0..inner {
                drop(a.matmul(&b).expect("matmul"));
            }
        }),
    })
}

fn cases(only: Option<&str>) -> Result<Vec<Case>, String> {
    let mut v = Vec::new();
    let want = |group: &str| only.is_none_or(|o| o == group);
    if want("matmul") {
        for n in [64usize, 128, 256, 512, 1024, 2048, 4096] {
            v.push(gemm(&format!("sgemm_{n}"), [n, n, n], DType::F32)?);
        }
        // The products Linear layers see in training: a small batch, an MNIST batch, and a
        // transformer's (batch * seq) x d_model @ d_model x 3 d_model projection.
        for (name, mkn) in LINEAR {
            v.push(gemm(name, mkn, DType::F32)?);
        }
        let (a, b) = (rand(&[64, 128, 128], 3)?, rand(&[64, 128, 128], 4)?);
        v.push(Case {
            name: "bmm".into(),
            what: "batched matmul 64 x 128^3".into(),
            unit: Unit::GFlops(64.0 * 2.0 * 128f64.powi(3)),
            run: Box::new(move || drop(a.matmul(&b).expect("bmm"))),
        });
    }
    if want("bf16") {
        for n in [256usize, 512, 1024] {
            v.push(gemm(&format!("bf16_{n}"), [n, n, n], DType::BF16)?);
        }
        for (name, mkn) in LINEAR {
            v.push(gemm(&format!("bf16_{name}"), mkn, DType::BF16)?);
        }
    }
    if want("elementwise") {
        let n = 1usize << 24;
        let (x, y) = (rand(&[n], 5)?, rand(&[n], 6)?);
        let (xa, ya) = (x.clone(), y.clone());
        v.push(gb(
            "add_new",
            "add 2^24, new output",
            12.0 * n as f64,
            move || drop(xa.add(&ya).expect("add")),
        ));
        let into = x.deep_copy();
        let ya = y.clone();
        // The peers write x + y into a third buffer; quill's in-place form reads and writes
        // `into`: the same bytes moved.
        v.push(gb(
            "add_into",
            "add 2^24, into an existing array",
            12.0 * n as f64,
            move || into.add_assign(&ya).expect("add_assign"),
        ));
        let (m, col) = (rand(&[4096, 4096], 7)?, rand(&[4096, 1], 8)?);
        let mb = 4096.0 * 4096.0 * 4.0;
        v.push(gb(
            "add_bcast",
            "(4096,4096) + (4096,1)",
            2.0 * mb,
            move || drop(m.add(&col).expect("add")),
        ));
        let xe = x.clone();
        v.push(gb("exp", "exp 2^24", 8.0 * n as f64, move || {
            drop(xe.exp().expect("exp"))
        }));
    }
    if want("reduce") {
        let m = rand(&[4096, 4096], 9)?;
        let mb = 4096.0 * 4096.0 * 4.0;
        let (m1, m2, m3) = (m.clone(), m.clone(), m);
        v.push(gb(
            "sum_last",
            "sum over the last axis of (4096,4096)",
            mb,
            move || drop(m1.sum(Some(&[1]), false).expect("sum")),
        ));
        v.push(gb(
            "sum_first",
            "sum over the first axis of (4096,4096)",
            mb,
            move || drop(m2.sum(Some(&[0]), false).expect("sum")),
        ));
        v.push(gb(
            "max_last",
            "max over the last axis of (4096,4096)",
            mb,
            move || drop(m3.max(Some(&[1]), false).expect("max")),
        ));
    }
    if want("conv") {
        // The second conv of the MNIST CNN at batch 64: 16 -> 32 channels, 14x14, 3x3, pad 1.
        let (n, c, o, hw) = (64usize, 16usize, 32usize, 14usize);
        let flops = 2.0 * (n * o * c * 9 * hw * hw) as f64;
        let spec = quill::Conv2dSpec {
            padding: (1, 1),
            ..quill::Conv2dSpec::default()
        };
        let (x, w) = (rand(&[n, c, hw, hw], 10)?, rand(&[o, c, 3, 3], 11)?);
        let (xa, wa) = (x.clone(), w.clone());
        v.push(Case {
            name: "conv_fwd".into(),
            what: format!("conv2d {n}x{c}x{hw}x{hw}, {o} 3x3 filters, pad 1: forward"),
            unit: Unit::GFlops(flops),
            run: Box::new(move || drop(xa.conv2d(&wa, spec).expect("conv2d"))),
        });
        let tx = Tensor::from_array(x, true).map_err(|e| e.to_string())?;
        let tw = Tensor::from_array(w, true).map_err(|e| e.to_string())?;
        let g = Tensor::new(rand(&[n, o, hw, hw], 12)?);
        v.push(Case {
            name: "conv_fwd_bwd".into(),
            what: "the same conv2d: forward + backward (input and weight)".into(),
            unit: Unit::GFlops(3.0 * flops),
            run: Box::new(move || {
                let y = tx.conv2d(&tw, spec).expect("conv2d");
                y.backward_with(&g).expect("backward");
                tx.zero_grad();
                tw.zero_grad();
            }),
        });
    }
    Ok(v)
}

pub fn run(args: &[String]) -> Result<(), String> {
    let mut rounds = 5usize;
    let mut only = None;
    let mut filter = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => rounds = super::rounds_value(it.next())?,
            "--only" => {
                only = Some(
                    it.next()
                        .ok_or("--only needs matmul|bf16|elementwise|reduce|conv")?,
                )
            }
            "--filter" => filter = Some(it.next().ok_or("--filter needs a case-name substring")?),
            other => return Err(format!("bench ops: unknown option '{other}'")),
        }
    }
    let mut cases = cases(only.map(String::as_str))?;
    if let Some(f) = filter {
        cases.retain(|c| c.name.contains(f.as_str()));
    }
    let reps = 3;
    let mut peer = Peer::start(include_str!("ops_peer.py"));
    let has_torch = peer.as_ref().is_some_and(|p| p.version.contains("torch"));
    println!(
        "quill bench ops: {} threads (RAYON_NUM_THREADS; the peers get the same), {rounds} rounds x {reps} reps, medians; matmul kernel {} (QUILL_MATMUL_KERNEL); peers: {}",
        rayon::current_num_threads(),
        std::env::var("QUILL_MATMUL_KERNEL").unwrap_or_else(|_| "best".into()),
        peer.as_ref()
            .map_or("none".to_string(), |p| p.version.clone())
    );
    println!("| case | unit | quill | NumPy | PyTorch | quill / NumPy | quill / PyTorch |");
    println!("|---|---|---|---|---|---|---|");
    for c in &cases {
        let (mut ours, mut np, mut pt) = (Vec::new(), Vec::new(), Vec::new());
        (c.run)();
        for _ in 0..rounds {
            for _ in 0..reps {
                let t = Instant::now();
                (c.run)();
                ours.push(t.elapsed().as_secs_f64());
            }
            if let Some(p) = peer.as_mut() {
                np.extend(
                    p.run(&format!("{} numpy", c.name), reps)
                        .unwrap_or_default(),
                );
                if has_torch {
                    pt.extend(
                        p.run(&format!("{} torch", c.name), reps)
                            .unwrap_or_default(),
                    );
                }
            }
        }
        let (unit, amount) = match c.unit {
            Unit::GBs(b) => ("GB/s", b / 1e9),
            Unit::GFlops(f) => ("GFLOP/s", f / 1e9),
        };
        let rate = |xs: &mut Vec<f64>| (!xs.is_empty()).then(|| amount / median(xs));
        let q = rate(&mut ours).unwrap_or(f64::NAN);
        let show = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.1}"));
        let ratio = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{:.2}x", q / r));
        let (n, t) = (rate(&mut np), rate(&mut pt));
        println!(
            "| {} | {unit} | {q:.1} | {} | {} | {} | {} |",
            c.what,
            show(n),
            show(t),
            ratio(n),
            ratio(t)
        );
    }
    Ok(())
}
