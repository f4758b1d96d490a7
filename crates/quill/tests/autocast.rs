//! Autocast (`quill::autocast`): which ops run in bf16 and which in f32, their values against
//! references computed here from inputs rounded to bf16 by hand (round-to-nearest-even of the
//! f32 bits, written out below rather than taken from quill's cast), gradients reaching f32
//! parameters, guard nesting and restore, strided inputs, and the error for a bad dtype.
//! `conv2d` is on autocast's f32 side (its CPU kernel has no bf16 arithmetic), needle's `conv`
//! on the bf16 side.

use quill::nn::functional::{cross_entropy, mse_loss, Reduction};
use quill::nn::{Linear, Module};
use quill::tensor::Tensor;
use quill::{autocast, autocast_dtype, is_autocast_enabled, Conv2dSpec, DType, Error, NDArray};

/// f32 to the nearest bf16 (ties to even), returned widened: the rounding autocast's casts do.
fn rne(x: f32) -> f32 {
    let b = x.to_bits();
    let rounded = b.wrapping_add(0x7fff + ((b >> 16) & 1)) & 0xffff_0000;
    f32::from_bits(rounded)
}

/// One bf16 ulp at `x` (the spacing of bf16 values around it).
fn ulp(x: f64) -> f64 {
    let e = if x == 0.0 {
        -126.0
    } else {
        x.abs().log2().floor().max(-126.0)
    };
    2f64.powf(e - 7.0)
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.astype(DType::F64)
        .unwrap()
        .array()
        .compact()
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
}

/// The f32 values of `t` rounded to bf16 by `rne`, in C order.
fn rounded(t: &Tensor) -> Vec<f64> {
    vals(t).iter().map(|&v| rne(v as f32) as f64).collect()
}

fn randn(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, seed, DType::F32).unwrap()
}

fn param(shape: &[usize], seed: u64) -> Tensor {
    randn(shape, seed).requires_grad_(true).unwrap()
}

/// `a (m, k) @ b (k, n)` in f64 over the given values.
fn matmul_ref(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            for j in 0..n {
                out[i * n + j] += a[i * k + p] * b[p * n + j];
            }
        }
    }
    out
}

/// `got` within one bf16 ulp (of the larger) of `want` plus `slack`, element by element: a
/// product accumulated in f32 and rounded once to bf16 can land on the other neighbour of a
/// value near a tie, never further.
#[track_caller]
fn assert_bf16_close(got: &[f64], want: &[f64], slack: f64, ctx: &str) {
    assert_eq!(got.len(), want.len(), "{ctx}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let tol = ulp(g.abs().max(w.abs())) + slack;
        assert!(
            (g - w).abs() <= tol,
            "{ctx}: element {i}: got {g}, want {w} (tol {tol})"
        );
    }
}

#[test]
fn guards_nest_and_restore() {
    assert_eq!(autocast_dtype(), None);
    {
        let _outer = autocast(DType::BF16).unwrap();
        assert_eq!(autocast_dtype(), Some(DType::BF16));
        {
            let _off = autocast(None).unwrap();
            assert!(!is_autocast_enabled());
            {
                let _half = autocast(DType::F16).unwrap();
                assert_eq!(autocast_dtype(), Some(DType::F16));
            }
            assert_eq!(autocast_dtype(), None, "the inner guard restores 'off'");
        }
        assert_eq!(autocast_dtype(), Some(DType::BF16));
        // Another thread has its own state.
        let there = std::thread::spawn(autocast_dtype).join().unwrap();
        assert_eq!(there, None);
    }
    assert_eq!(autocast_dtype(), None);
}

#[test]
fn a_dtype_other_than_bf16_or_f16_is_an_error_naming_the_op() {
    let _g = autocast(DType::BF16).unwrap();
    for bad in [DType::F32, DType::F64, DType::I32, DType::Bool] {
        let e = autocast(bad).err().expect("refused");
        assert!(
            matches!(e, Error::InvalidArgument { op: "autocast", .. }),
            "{e}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains("bf16") && msg.contains(&bad.to_string()),
            "{msg}"
        );
        assert_eq!(
            autocast_dtype(),
            Some(DType::BF16),
            "a refused call leaves the state"
        );
    }
}

#[test]
fn matmul_runs_in_bf16_on_rounded_inputs() {
    let (m, k, n) = (9, 70, 13);
    let (a, b) = (randn(&[m, k], 1), randn(&[k, n], 2));
    let y = {
        let _g = autocast(DType::BF16).unwrap();
        a.matmul(&b).unwrap()
    };
    assert_eq!(y.dtype(), DType::BF16);
    let want = matmul_ref(&rounded(&a), &rounded(&b), m, k, n);
    assert_bf16_close(&vals(&y), &want, 1e-6, "bf16 matmul");
    // The same as casting by hand and running the f32 product, then rounding it.
    let by_hand = a
        .astype(DType::BF16)
        .unwrap()
        .astype(DType::F32)
        .unwrap()
        .matmul(&b.astype(DType::BF16).unwrap().astype(DType::F32).unwrap())
        .unwrap();
    assert_bf16_close(&vals(&y), &vals(&by_hand), 1e-6, "against the f32 op");
    // Outside the region the same product is f32 again.
    assert_eq!(a.matmul(&b).unwrap().dtype(), DType::F32);
}

#[test]
fn strided_operands_are_cast_through_their_views() {
    let (m, k, n) = (6, 40, 5);
    // a^T of a (k, m) tensor and every other column of a (k, 2n) one.
    let at = randn(&[k, m], 3);
    let wide = randn(&[k, 2 * n], 4);
    let a = at.mt().unwrap();
    let b = wide.slice(&quill::s![.., ..;2]).unwrap();
    assert_eq!(b.shape(), &[k, n]);
    let y = {
        let _g = autocast(DType::BF16).unwrap();
        a.matmul(&b).unwrap()
    };
    assert_eq!(y.dtype(), DType::BF16);
    let (av, bv) = (rounded(&a), rounded(&b));
    assert_bf16_close(&vals(&y), &matmul_ref(&av, &bv, m, k, n), 1e-6, "strided");
}

#[test]
fn gradients_reach_f32_parameters_in_f32() {
    let (m, k, n) = (8, 33, 6);
    let x = param(&[m, k], 5);
    let w = param(&[k, n], 6);
    // Upstream gradient weights that bf16 holds exactly (multiples of 1/4 in [-2, 2)).
    let c: Vec<f32> = (0..m * n)
        .map(|i| ((i * 7) % 16) as f32 / 4.0 - 2.0)
        .collect();
    let ct = Tensor::from_vec(c.clone(), &[m, n]).unwrap();
    {
        let _g = autocast(DType::BF16).unwrap();
        let y = x.matmul(&w).unwrap();
        let loss = y.mul(&ct).unwrap().sum(None, false).unwrap();
        assert_eq!(loss.dtype(), DType::F32, "sum runs in f32 under autocast");
        // Backward inside the region: the pass turns autocast off itself.
        loss.backward().unwrap();
    }
    let (gx, gw) = (x.grad().unwrap(), w.grad().unwrap());
    assert_eq!((gx.dtype(), gw.dtype()), (DType::F32, DType::F32));
    // dL/dw = x_bf16^T @ c, rounded to bf16 once (the gradient of the bf16 copy of w).
    let (xv, wv) = (rounded(&x), rounded(&w));
    let cv: Vec<f64> = c.iter().map(|&v| v as f64).collect();
    let xt: Vec<f64> = (0..k * m).map(|i| xv[(i % m) * k + i / m]).collect();
    assert_bf16_close(&vals(&gw), &matmul_ref(&xt, &cv, k, m, n), 1e-6, "dL/dw");
    let wt: Vec<f64> = (0..n * k).map(|i| wv[(i % k) * n + i / k]).collect();
    assert_bf16_close(&vals(&gx), &matmul_ref(&cv, &wt, m, n, k), 1e-6, "dL/dx");
    // The manual cast chain gives the same gradients bit for bit.
    let (x2, w2) = (param(&[m, k], 5), param(&[k, n], 6));
    let y2 = x2
        .astype(DType::BF16)
        .unwrap()
        .matmul(&w2.astype(DType::BF16).unwrap())
        .unwrap();
    let loss2 = y2.astype(DType::F32).unwrap().mul(&ct).unwrap();
    loss2.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(
        vals(&gw),
        vals(&w2.grad().unwrap()),
        "w: autocast vs by hand"
    );
    assert_eq!(
        vals(&gx),
        vals(&x2.grad().unwrap()),
        "x: autocast vs by hand"
    );
}

#[test]
fn f32_ops_widen_bf16_inputs_and_others_keep_their_dtype() {
    let x = randn(&[4, 10], 7);
    let xb = x.astype(DType::BF16).unwrap();
    let _g = autocast(DType::BF16).unwrap();
    let f32_results = [
        ("softmax", xb.softmax(-1).unwrap()),
        ("log_softmax", xb.log_softmax(-1).unwrap()),
        ("logsumexp", xb.logsumexp(Some(&[-1]), false).unwrap()),
        ("sum", xb.sum(None, false).unwrap()),
        ("mean", xb.mean(Some(&[0]), false).unwrap()),
        ("var", xb.var(None, 1, false).unwrap()),
        ("exp", xb.exp().unwrap()),
        ("log", xb.abs().unwrap().log().unwrap()),
    ];
    for (name, r) in &f32_results {
        assert_eq!(r.dtype(), DType::F32, "{name} under autocast");
    }
    // Values: the f32 op on the bf16 values (exactly representable in f32).
    let xr = rounded(&x);
    let row_max = |r: usize| {
        xr[r * 10..r * 10 + 10]
            .iter()
            .cloned()
            .fold(f64::MIN, f64::max)
    };
    let want: Vec<f64> = (0..40)
        .map(|i| {
            let r = i / 10;
            let z: f64 = xr[r * 10..r * 10 + 10]
                .iter()
                .map(|v| (v - row_max(r)).exp())
                .sum();
            (xr[i] - row_max(r)).exp() / z
        })
        .collect();
    quill_test_support::compare::assert_close_values(
        &vals(&f32_results[0].1),
        &want,
        1e-6,
        "softmax",
    );
    // Elementwise ops outside the list run in their operand's dtype.
    assert_eq!(xb.relu().unwrap().dtype(), DType::BF16);
    assert_eq!(xb.add(&xb).unwrap().dtype(), DType::BF16);
    assert_eq!(x.exp().unwrap().dtype(), DType::F32);
    drop(_g);
    // Without autocast a bf16 softmax stays bf16.
    assert_eq!(xb.softmax(-1).unwrap().dtype(), DType::BF16);
}

#[test]
fn norms_and_losses_run_in_f32() {
    let x = randn(&[6, 8], 8).astype(DType::BF16).unwrap();
    let (w, b) = (randn(&[8], 9), randn(&[8], 10));
    let labels = NDArray::from_vec((0..6).map(|i| i % 8).collect::<Vec<i64>>(), &[6]).unwrap();
    let _g = autocast(DType::BF16).unwrap();
    let ln = x.layer_norm(&w, &b, 1e-5).unwrap();
    assert_eq!(ln.dtype(), DType::F32);
    let (bn, _, _) = x.batch_norm_train(&w, &b, 1e-5).unwrap();
    assert_eq!(bn.dtype(), DType::F32);
    assert_eq!(x.rms_norm(&w, 1e-6).unwrap().dtype(), DType::F32);
    let ce = cross_entropy(&x, &labels, 0.0, Reduction::Mean).unwrap();
    assert_eq!(ce.dtype(), DType::F32);
    let mse = mse_loss(&x, &x.astype(DType::F32).unwrap(), Reduction::Sum).unwrap();
    assert_eq!((mse.dtype(), mse.item().unwrap()), (DType::F32, 0.0));
    // layer_norm's values: those of the f32 op on the bf16 values.
    drop(_g);
    let want = x
        .astype(DType::F32)
        .unwrap()
        .layer_norm(&w, &b, 1e-5)
        .unwrap();
    assert_eq!(vals(&ln), vals(&want));
}

#[test]
fn f64_and_integer_operands_are_left_alone() {
    let a = Tensor::randn(&[3, 4], 11, DType::F64).unwrap();
    let b = Tensor::randn(&[4, 2], 12, DType::F64).unwrap();
    let _g = autocast(DType::BF16).unwrap();
    assert_eq!(a.matmul(&b).unwrap().dtype(), DType::F64);
    let i = Tensor::new(NDArray::arange(0.0, 4.0, 1.0, DType::I64).unwrap());
    assert_eq!(i.matmul(&i).unwrap().dtype(), DType::I64);
}

#[test]
fn linear_layers_cast_their_f32_weights() {
    let with_bias = Linear::new(12, 5, true, 0).unwrap();
    let no_bias = Linear::new(12, 5, false, 1).unwrap();
    let x = randn(&[3, 12], 13);
    let _g = autocast(DType::BF16).unwrap();
    // The product is bf16; an f32 bias then promotes it to f32 (NumPy's rules).
    assert_eq!(no_bias.forward(&x).unwrap().dtype(), DType::BF16);
    let y = with_bias.forward(&x).unwrap();
    assert_eq!(y.dtype(), DType::F32);
    y.sum(None, false).unwrap().backward().unwrap();
    for p in with_bias.parameters() {
        assert_eq!(p.dtype(), DType::F32);
        assert_eq!(p.grad().unwrap().dtype(), DType::F32);
    }
}

#[test]
fn conv2d_runs_in_f32_and_widens_a_bf16_activation() {
    // conv2d is on autocast's f32 side (the CPU kernel has no bf16 arithmetic): a bf16 input
    // meets the f32 weight, and the result is the f32 convolution of its values.
    let x = param(&[2, 3, 7, 6], 14);
    let w = param(&[4, 3, 3, 3], 15);
    let spec = Conv2dSpec {
        padding: (1, 1),
        ..Conv2dSpec::default()
    };
    let xb = x.astype(DType::BF16).unwrap();
    let (y, y32) = {
        let _g = autocast(DType::BF16).unwrap();
        (xb.conv2d(&w, spec).unwrap(), x.conv2d(&w, spec).unwrap())
    };
    assert_eq!((y.dtype(), y32.dtype()), (DType::F32, DType::F32));
    // Reference: the f64 convolution of the bf16 values, by its definition.
    let (xv, wv) = (rounded(&x), vals(&w));
    let mut want = vec![0.0; 2 * 4 * 7 * 6];
    for n in 0..2 {
        for o in 0..4 {
            for i in 0..7 {
                for j in 0..6 {
                    let mut s = 0.0;
                    for c in 0..3 {
                        for (di, dj) in (0..3).flat_map(|a| (0..3).map(move |b| (a, b))) {
                            let (r, q) = (i + di, j + dj);
                            if (1..8).contains(&r) && (1..7).contains(&q) {
                                let xi = ((n * 3 + c) * 7 + r - 1) * 6 + q - 1;
                                s += xv[xi] * wv[((o * 3 + c) * 3 + di) * 3 + dj];
                            }
                        }
                    }
                    want[((n * 4 + o) * 7 + i) * 6 + j] = s;
                }
            }
        }
    }
    quill_test_support::compare::assert_close_values(&vals(&y), &want, 1e-5, "conv2d");
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(w.grad().unwrap().dtype(), DType::F32);
    assert_eq!(
        x.grad().unwrap().dtype(),
        DType::F32,
        "through the bf16 cast"
    );
}

#[test]
fn needle_conv_runs_in_bf16_on_rounded_inputs() {
    // NHWC input (1, 5, 5, 2), (kh, kw, Cin, Cout) weight (3, 3, 2, 3), stride 1, padding 1.
    let x = param(&[1, 5, 5, 2], 20);
    let w = param(&[3, 3, 2, 3], 21);
    let y = {
        let _g = autocast(DType::BF16).unwrap();
        x.conv(&w, 1, 1).unwrap()
    };
    assert_eq!(y.dtype(), DType::BF16);
    let (xv, wv) = (rounded(&x), rounded(&w));
    let mut want = vec![0.0; 5 * 5 * 3];
    for i in 0..5 {
        for j in 0..5 {
            for o in 0..3 {
                let mut s = 0.0;
                for (di, dj) in (0..3).flat_map(|a| (0..3).map(move |b| (a, b))) {
                    let (r, q) = (i + di, j + dj);
                    if (1..6).contains(&r) && (1..6).contains(&q) {
                        for c in 0..2 {
                            s += xv[((r - 1) * 5 + q - 1) * 2 + c]
                                * wv[((di * 3 + dj) * 2 + c) * 3 + o];
                        }
                    }
                }
                want[(i * 5 + j) * 3 + o] = s;
            }
        }
    }
    assert_bf16_close(&vals(&y), &want, 1e-6, "conv");
    y.astype(DType::F32)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(w.grad().unwrap().dtype(), DType::F32);
}

#[test]
fn attention_runs_in_bf16_and_matches_the_composite_on_rounded_inputs() {
    let shape = [2, 2, 5, 8];
    let (q, k, v) = (param(&shape, 16), param(&shape, 17), param(&shape, 18));
    let out = {
        let _g = autocast(DType::BF16).unwrap();
        q.scaled_dot_product_attention(&k, &v, true, None).unwrap()
    };
    assert_eq!(out.dtype(), DType::BF16);
    let r = |t: &Tensor| t.astype(DType::BF16).unwrap().astype(DType::F32).unwrap();
    let want = r(&q)
        .attention_composite(&r(&k), &r(&v), true, None)
        .unwrap();
    // The kernel computes in f32 and rounds the output once.
    assert_bf16_close(&vals(&out), &vals(&want), 1e-5, "attention");
    out.sum(None, false).unwrap().backward().unwrap();
    for t in [&q, &k, &v] {
        assert_eq!(t.grad().unwrap().dtype(), DType::F32);
    }
}

#[test]
fn a_small_mlp_trains_under_autocast_as_in_f32() {
    // Regression y = sin(x0) + x1 * x2 on fixed inputs; 200 Adam steps each way.
    let x = randn(&[64, 3], 19);
    let xs = vals(&x);
    let y: Vec<f32> = (0..64)
        .map(|i| (xs[3 * i].sin() + xs[3 * i + 1] * xs[3 * i + 2]) as f32)
        .collect();
    let y = Tensor::from_vec(y, &[64, 1]).unwrap();
    let run = |precision: Option<DType>| -> f64 {
        let (l1, l2) = (
            Linear::new(3, 32, true, 7).unwrap(),
            Linear::new(32, 1, true, 8).unwrap(),
        );
        let mut params = l1.parameters();
        params.extend(l2.parameters());
        let mut opt = quill::optim::Adam::new(params, 1e-2).unwrap();
        use quill::optim::Optimizer;
        let mut last = 0.0;
        for _ in 0..200 {
            opt.zero_grad();
            let loss = {
                let _g = autocast(precision).unwrap();
                let h = l1.forward(&x).unwrap().tanh().unwrap();
                mse_loss(&l2.forward(&h).unwrap(), &y, Reduction::Mean).unwrap()
            };
            assert_eq!(loss.dtype(), DType::F32);
            loss.backward().unwrap();
            opt.step().unwrap();
            last = loss.item().unwrap();
        }
        last
    };
    let (f32_loss, bf16_loss) = (run(None), run(Some(DType::BF16)));
    assert!(f32_loss < 0.05, "f32 learns: {f32_loss}");
    assert!(
        bf16_loss < 2.0 * f32_loss + 0.01,
        "bf16 {bf16_loss} vs f32 {f32_loss}"
    );
}
