//! `quill bench ops`: the CPU compute kernels on f32 against NumPy and PyTorch (when they
//! import) in one run, alternating quill and each peer case by case: matmul in f32 (square and
//! Linear-layer shapes) and bf16 (PyTorch only: NumPy has no bf16) in GFLOP/s, elementwise ops
//! and reductions (GB/s, bytes read plus written), and conv layers (GFLOP/s, forward alone
//! and forward + backward: the MNIST CNN's, ResNet's, depthwise, grouped, dilated). Medians and ratios; absolute
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
    let a = rand(&[m, k], 1)?.astype(dtype).map_err(|e| e.to_string())?;
    let b = rand(&[k, n], 2)?.astype(dtype).map_err(|e| e.to_string())?;
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

/// A conv layer of the conv group: batch, in and out channels, square image side, square
/// kernel side, stride, padding, dilation, groups.
#[derive(Clone, Copy)]
struct ConvLayer {
    n: usize,
    c: usize,
    o: usize,
    hw: usize,
    k: usize,
    stride: usize,
    pad: usize,
    dilation: usize,
    groups: usize,
}

const fn layer(n: usize, c: usize, o: usize, hw: usize, k: usize) -> ConvLayer {
    ConvLayer {
        n,
        c,
        o,
        hw,
        k,
        stride: 1,
        pad: k / 2,
        dilation: 1,
        groups: 1,
    }
}

/// The conv group's layers. Case names spell out the geometry (`ConvLayer::key`), and
/// `ops_peer.py` builds its PyTorch layer from the name, so this table is the only list.
const CONVS: [(&str, ConvLayer); 9] = [
    ("MNIST CNN conv 2", layer(64, 16, 32, 14, 3)),
    ("ResNet 3x3", layer(8, 64, 64, 56, 3)),
    (
        "ResNet 3x3 stride 2",
        ConvLayer {
            stride: 2,
            ..layer(8, 128, 256, 28, 3)
        },
    ),
    (
        "ResNet 1x1 bottleneck",
        ConvLayer {
            pad: 0,
            ..layer(8, 256, 64, 56, 1)
        },
    ),
    (
        "ResNet stem 7x7 stride 2",
        ConvLayer {
            stride: 2,
            ..layer(8, 3, 64, 224, 7)
        },
    ),
    (
        "depthwise 3x3",
        ConvLayer {
            groups: 128,
            ..layer(8, 128, 128, 56, 3)
        },
    ),
    (
        "depthwise 3x3 stride 2",
        ConvLayer {
            groups: 128,
            stride: 2,
            ..layer(8, 128, 128, 56, 3)
        },
    ),
    (
        "grouped 3x3, 32 groups",
        ConvLayer {
            groups: 32,
            ..layer(8, 128, 128, 28, 3)
        },
    ),
    (
        "dilated 3x3, dilation 2",
        ConvLayer {
            pad: 2,
            dilation: 2,
            ..layer(8, 64, 64, 28, 3)
        },
    ),
];

impl ConvLayer {
    /// The geometry as a case-name key, parsed back by `ops_peer.py`.
    fn key(&self) -> String {
        let ConvLayer {
            n,
            c,
            o,
            hw,
            k,
            stride,
            pad,
            dilation,
            groups,
        } = *self;
        format!("conv_n{n}_c{c}_o{o}_hw{hw}_k{k}_s{stride}_p{pad}_d{dilation}_g{groups}")
    }

    fn out_side(&self) -> usize {
        (self.hw + 2 * self.pad - self.dilation * (self.k - 1) - 1) / self.stride + 1
    }

    /// Multiply-adds times two of the forward.
    fn flops(&self) -> f64 {
        let taps = self.c / self.groups * self.k * self.k;
        2.0 * (self.n * self.o * taps * self.out_side().pow(2)) as f64
    }
}

/// The forward, and forward + backward (input and weight), of one conv layer.
fn conv_cases(v: &mut Vec<Case>, label: &str, l: ConvLayer) -> Result<(), String> {
    let spec = quill::Conv2dSpec {
        stride: (l.stride, l.stride),
        padding: (l.pad, l.pad),
        dilation: (l.dilation, l.dilation),
        groups: l.groups,
    };
    let x = rand(&[l.n, l.c, l.hw, l.hw], 10)?;
    let w = rand(&[l.o, l.c / l.groups, l.k, l.k], 11)?;
    let geometry = format!(
        "{}x{}x{}x{}, {} {}x{} filters, stride {}, pad {}, dilation {}, groups {}",
        l.n, l.c, l.hw, l.hw, l.o, l.k, l.k, l.stride, l.pad, l.dilation, l.groups
    );
    let (xa, wa) = (x.clone(), w.clone());
    v.push(Case {
        name: format!("{}_fwd", l.key()),
        what: format!("conv {label} ({geometry}): forward"),
        unit: Unit::GFlops(l.flops()),
        run: Box::new(move || drop(xa.conv2d(&wa, spec).expect("conv2d"))),
    });
    let tx = Tensor::from_array(x, true).map_err(|e| e.to_string())?;
    let tw = Tensor::from_array(w, true).map_err(|e| e.to_string())?;
    let ho = l.out_side();
    let g = Tensor::new(rand(&[l.n, l.o, ho, ho], 12)?);
    v.push(Case {
        name: format!("{}_fwd_bwd", l.key()),
        what: format!("conv {label}: forward + backward (input and weight)"),
        unit: Unit::GFlops(3.0 * l.flops()),
        run: Box::new(move || {
            let y = tx.conv2d(&tw, spec).expect("conv2d");
            y.backward_with(&g).expect("backward");
            tx.zero_grad();
            tw.zero_grad();
        }),
    });
    Ok(())
}

/// The groups `--only` may name.
const GROUPS: [&str; 5] = ["matmul", "bf16", "elementwise", "reduce", "conv"];

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
        let into = x.deep_copy().map_err(|e| e.to_string())?;
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
        for (label, layer) in CONVS {
            conv_cases(&mut v, label, layer)?;
        }
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
                let g = it.next().ok_or_else(|| {
                    format!("bench ops --only needs one of {}", GROUPS.join(", "))
                })?;
                if !GROUPS.contains(&g.as_str()) {
                    return Err(format!(
                        "bench ops --only: '{g}' is not a group; the groups are {}",
                        GROUPS.join(", ")
                    ));
                }
                only = Some(g);
            }
            "--filter" => filter = Some(it.next().ok_or("--filter needs a case-name substring")?),
            other => return Err(format!("bench ops: unknown option '{other}'")),
        }
    }
    let mut cases = cases(only.map(String::as_str))?;
    if let Some(f) = filter {
        let names: Vec<String> = cases.iter().map(|c| c.name.clone()).collect();
        cases.retain(|c| c.name.contains(f.as_str()));
        if cases.is_empty() {
            return Err(format!(
                "bench ops --filter: no case name contains '{f}'; the cases{} are {}",
                only.map_or(String::new(), |g| format!(" of --only {g}")),
                names.join(", ")
            ));
        }
    }
    let reps = 3;
    let mut peer = Peer::start(include_str!("ops_peer.py"));
    let has_torch = peer.as_ref().is_some_and(|p| p.version.contains("torch"));
    crate::report::heading(format!(
        "quill bench ops: {} threads (RAYON_NUM_THREADS; the peers get the same), {rounds} rounds x {reps} reps, medians; matmul kernel {} (QUILL_MATMUL_KERNEL); peers: {}",
        rayon::current_num_threads(),
        std::env::var("QUILL_MATMUL_KERNEL").unwrap_or_else(|_| "best".into()),
        peer.as_ref()
            .map_or("none".to_string(), |p| p.version.clone())
    ));
    let table = crate::report::Table::new(
        "ops",
        &[
            "case",
            "unit",
            "quill",
            "NumPy",
            "PyTorch",
            "quill / NumPy",
            "quill / PyTorch",
        ],
    );
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
        table.line(format!(
            "| {} | {unit} | {q:.1} | {} | {} | {} | {} |",
            c.what,
            show(n),
            show(t),
            ratio(n),
            ratio(t)
        ));
    }
    Ok(())
}
