//! The per-device matrix of the fused ops, driven by quill-array's registry (`fused_ops()`):
//! every fused op has a case here (a test fails when the registry gains one that has not), and
//! each case runs on every device (`device_test!`), on contiguous, permuted, reversed-stepped,
//! offset and broadcast (stride 0) inputs of rank 1 to 8 with size-0 and size-1 dims, in the
//! kernel's dtypes (f32, f64) and the composite's (f16, bf16, mixed dtypes), against a per-row
//! f64 loop. Gradients: the fused backward against the recorded (Tensor-op) backward and
//! against the gradient of the op written as primitives; f64 central differences to second
//! order.

use quill::tensor::{grad, BackwardOptions, Tensor};
use quill::{fused_kernel, fused_ops, s, DType, Device, NDArray, Result};
use quill_test_support::grads::gradcheck_two_orders;
use quill_test_support::{device_test, Prng};

/// One fused op (and its backward): how to call it, its per-row reference and its composite.
struct Case {
    name: &'static str,
    backward: &'static str,
    /// Parameter vectors of length D after x (layer norm: weight, bias; RMS norm: weight).
    params: usize,
    run: fn(&Tensor, &[Tensor]) -> Result<Tensor>,
    /// The output of one row given the row and the parameters.
    row: fn(&[f64], &[Vec<f64>]) -> Vec<f64>,
    /// The op as primitive Tensor ops.
    composite: fn(&Tensor, &[Tensor]) -> Result<Tensor>,
}

const EPS: f64 = 1e-5;

fn layer_norm_row(x: &[f64], p: &[Vec<f64>]) -> Vec<f64> {
    let d = x.len() as f64;
    let mean = x.iter().sum::<f64>() / d;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / d;
    let r = 1.0 / (var + EPS).sqrt();
    x.iter()
        .enumerate()
        .map(|(j, v)| (v - mean) * r * p[0][j] + p[1][j])
        .collect()
}

fn rms_norm_row(x: &[f64], p: &[Vec<f64>]) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let r = 1.0 / (ms + EPS).sqrt();
    x.iter().enumerate().map(|(j, v)| v * r * p[0][j]).collect()
}

const CASES: [Case; 2] = [
    Case {
        name: "layer_norm",
        backward: "layer_norm_backward",
        params: 2,
        run: |x, p| x.layer_norm(&p[0], &p[1], EPS),
        row: layer_norm_row,
        composite: |x, p| {
            let c = x.sub(&x.mean(Some(&[-1]), true)?)?;
            let var = c.square()?.mean(Some(&[-1]), true)?;
            c.div(&var.add_scalar(EPS)?.sqrt()?)?.mul(&p[0])?.add(&p[1])
        },
    },
    Case {
        name: "rms_norm",
        backward: "rms_norm_backward",
        params: 1,
        run: |x, p| x.rms_norm(&p[0], EPS),
        row: rms_norm_row,
        composite: |x, p| {
            let ms = x.square()?.mean(Some(&[-1]), true)?;
            x.div(&ms.add_scalar(EPS)?.sqrt()?)?.mul(&p[0])
        },
    },
];

/// Batch norm with batch statistics per channel (dim 1) over the C-order values, optionally
/// ReLU'd: the per-channel f64 reference.
fn batch_norm_reference(x: &[f64], shape: &[usize], w: &[f64], b: &[f64], relu: bool) -> Vec<f64> {
    let (n, c) = (shape[0], shape[1]);
    let inner: usize = shape[2..].iter().product();
    let at = |i: usize, ch: usize, k: usize| (i * c + ch) * inner + k;
    let mut out = vec![0.0; x.len()];
    for ch in 0..c {
        let vals: Vec<f64> = (0..n)
            .flat_map(|i| (0..inner).map(move |k| (i, k)))
            .map(|(i, k)| x[at(i, ch, k)])
            .collect();
        let m = vals.iter().sum::<f64>() / vals.len() as f64;
        let var = vals.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / vals.len() as f64;
        for i in 0..n {
            for k in 0..inner {
                let y = (x[at(i, ch, k)] - m) / (var + EPS).sqrt() * w[ch] + b[ch];
                out[at(i, ch, k)] = if relu { y.max(0.0) } else { y };
            }
        }
    }
    out
}

const BN_SHAPES: [&[usize]; 5] = [
    &[4, 3],
    &[2, 3, 5],
    &[3, 2, 4, 5],
    &[1, 2, 7],
    &[2, 1, 2, 1, 2, 1, 2, 3],
];

device_test!(batch_norm_matches_the_channel_reference_and_its_gradients -> Result<()>);
fn batch_norm_matches_the_channel_reference_and_its_gradients(dev: Device) -> Result<()> {
    let mut rng = Prng::new(54);
    for relu in [false, true] {
        let run = |x: &Tensor, w: &Tensor, b: &Tensor| -> Result<Tensor> {
            Ok(if relu {
                x.batch_norm_relu_train(w, b, EPS)?.0
            } else {
                x.batch_norm_train(w, b, EPS)?.0
            })
        };
        for (xt, pt, tol) in [
            (DType::F64, DType::F64, 1e-10),
            (DType::F32, DType::F32, 2e-5),
            (DType::F16, DType::F16, 3e-2),
            (DType::F32, DType::F64, 2e-5),
        ] {
            for shape in BN_SHAPES {
                let c = shape[1];
                for (layout, x) in layouts(&mut rng, dev, shape, xt) {
                    if layout == "broadcast" && shape.len() == 2 {
                        continue; // every value of a channel equal: zero variance
                    }
                    let ctx =
                        format!("batch_norm relu={relu} {xt}/{pt} {shape:?} {layout} on {dev}");
                    let w = on(dev, uniform(&mut rng, c, 0.5, 1.5), &[c], pt);
                    let b = on(dev, uniform(&mut rng, c, -0.5, 0.5), &[c], pt);
                    let want = batch_norm_reference(&vals(&x), shape, &vals(&w), &vals(&b), relu);
                    let (xl, wl, bl) = (
                        Tensor::from_array(x, true)?,
                        Tensor::from_array(w, true)?,
                        Tensor::from_array(b, true)?,
                    );
                    let y = run(&xl, &wl, &bl)?;
                    assert_eq!((y.shape(), y.device()), (shape, dev), "{ctx}");
                    assert_close(&vals(y.array()), &want, tol, &ctx);
                    if xt == DType::F16 {
                        continue;
                    }
                    // Gradients: the fused backward against the recorded (Tensor-op) one.
                    let ins = [xl.clone(), wl.clone(), bl.clone()];
                    let n = y.numel();
                    let seed =
                        Tensor::new(on(dev, uniform(&mut rng, n, -1.0, 1.0), shape, y.dtype()));
                    let plain = BackwardOptions::default();
                    let fused = grad(&y, &ins, Some(&seed), plain)?;
                    let y2 = run(&xl, &wl, &bl)?;
                    let recorded = BackwardOptions {
                        create_graph: true,
                        ..plain
                    };
                    let taped = grad(&y2, &ins, Some(&seed), recorded)?;
                    let gtol = if xt == DType::F64 { 1e-9 } else { 1e-3 };
                    for k in 0..3 {
                        assert_eq!(fused[k].dtype(), ins[k].dtype(), "{ctx} grad {k}");
                        assert_eq!(fused[k].device(), dev, "{ctx} grad {k}");
                        assert_close(
                            &vals(fused[k].array()),
                            &vals(taped[k].array()),
                            gtol,
                            &format!("{ctx} grad {k}"),
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

device_test!(sum_squares_matches_an_f64_loop -> Result<()>);
fn sum_squares_matches_an_f64_loop(dev: Device) -> Result<()> {
    let mut rng = Prng::new(55);
    for (dt, tol) in [
        (DType::F64, 1e-12),
        (DType::F32, 1e-12),
        (DType::F16, 1e-12),
        (DType::BF16, 1e-12),
    ] {
        for shape in SHAPES {
            for (layout, x) in layouts(&mut rng, dev, shape, dt) {
                // The reference reads the values as stored (already rounded to dt).
                let want: f64 = vals(&x).iter().map(|v| v * v).sum();
                let got = x.sum_squares()?;
                let ctx = format!("sum_squares {dt} {shape:?} {layout} on {dev}");
                assert!(
                    (got - want).abs() <= tol * (1.0 + want),
                    "{ctx}: {got} vs {want}"
                );
            }
        }
    }
    let e = NDArray::ones(&[3], DType::I32)?
        .to_device(dev)?
        .sum_squares()
        .unwrap_err();
    assert!(e.to_string().contains("sum_squares"), "{e}");
    Ok(())
}

/// One run of a fused op: its output and the gradients of `sum(out * seed)` at its inputs.
type Run = Box<dyn Fn(Device, DType) -> Result<Vec<Vec<f64>>>>;

/// Inputs for the kernel-composite comparison: leaves on `dev`, values from a fixed seed.
fn leaves(dev: Device, dt: DType, shapes: &[&[usize]], seed: u64) -> Result<Vec<Tensor>> {
    let mut rng = Prng::new(seed);
    shapes
        .iter()
        .map(|sh| {
            let n = sh.iter().product();
            Tensor::from_array(on(dev, uniform(&mut rng, n, -1.5, 1.5), sh, dt), true)
        })
        .collect()
}

/// `out`'s values and the gradients of `sum(out * seed)` at `ins`.
fn out_and_grads(out: &Tensor, ins: &[Tensor]) -> Result<Vec<Vec<f64>>> {
    let mut rng = Prng::new(77);
    let seed = on(
        out.device(),
        uniform(&mut rng, out.numel(), -1.0, 1.0),
        out.shape(),
        out.dtype(),
    );
    let gs = grad(
        out,
        ins,
        Some(&Tensor::new(seed)),
        BackwardOptions::default(),
    )?;
    let mut v = vec![vals(out.array())];
    v.extend(gs.iter().map(|g| vals(g.array())));
    Ok(v)
}

/// A two-layer LSTM (3 -> 4) with its parameters on `dev` in `dt`.
fn lstm_on(dev: Device, dt: DType) -> Result<quill::nn::LSTM> {
    let mut m = quill::nn::LSTM::with_dtype(3, 4, 2, true, 6, dt)?;
    for l in &mut m.layers {
        let moved = |t: &Tensor| Tensor::from_array(t.array().to_device(dev)?, true);
        l.weight_ih = moved(&l.weight_ih)?;
        l.weight_hh = moved(&l.weight_hh)?;
        l.bias_ih = l.bias_ih.as_ref().map(moved).transpose()?;
        l.bias_hh = l.bias_hh.as_ref().map(moved).transpose()?;
    }
    Ok(m)
}

/// The names of the graph nodes behind `t`.
fn node_names(t: &Tensor) -> Vec<&'static str> {
    let (mut names, mut stack) = (Vec::new(), vec![t.clone()]);
    while let Some(t) = stack.pop() {
        names.extend(t.grad_fn_name());
        stack.extend(t.inputs());
    }
    names
}

/// Every fused op by name, run through its Tensor (or array) API.
fn runs() -> Vec<(&'static str, Run)> {
    vec![
        (
            "layer_norm",
            Box::new(|dev, dt| {
                let t = leaves(dev, dt, &[&[3, 4, 9], &[9], &[9]], 1)?;
                out_and_grads(&t[0].layer_norm(&t[1], &t[2], EPS)?, &t)
            }),
        ),
        (
            "rms_norm",
            Box::new(|dev, dt| {
                let t = leaves(dev, dt, &[&[5, 2, 7], &[7]], 2)?;
                out_and_grads(&t[0].rms_norm(&t[1], EPS)?, &t)
            }),
        ),
        (
            "batch_norm",
            Box::new(|dev, dt| {
                let t = leaves(dev, dt, &[&[4, 3, 2, 5], &[3], &[3]], 3)?;
                let mut v = out_and_grads(&t[0].batch_norm_train(&t[1], &t[2], EPS)?.0, &t)?;
                v.extend(out_and_grads(
                    &t[0].batch_norm_relu_train(&t[1], &t[2], EPS)?.0,
                    &t,
                )?);
                Ok(v)
            }),
        ),
        (
            "scaled_dot_product_attention",
            Box::new(|dev, dt| {
                let t = leaves(dev, dt, &[&[2, 3, 5, 4], &[2, 3, 7, 4], &[2, 3, 7, 6]], 4)?;
                let mut v = Vec::new();
                for causal in [false, true] {
                    let y = t[0].scaled_dot_product_attention(&t[1], &t[2], causal, None)?;
                    v.extend(out_and_grads(&y, &t)?);
                }
                Ok(v)
            }),
        ),
        (
            "sum_squares",
            Box::new(|dev, dt| {
                let t = leaves(dev, dt, &[&[6, 5]], 5)?;
                let strided = t[0].array().slice(&s![..;-2, 1..])?;
                Ok(vec![vec![strided.sum_squares()?]])
            }),
        ),
        (
            "conv2d",
            Box::new(|dev, dt| {
                use quill::Conv2dSpec;
                let mut v = Vec::new();
                // (x, w, spec): plain, strided + padded, dilated, grouped (depthwise too).
                let cases: [(&[usize], &[usize], Conv2dSpec); 4] = [
                    (&[2, 3, 6, 5], &[4, 3, 3, 3], Conv2dSpec::default()),
                    (
                        &[1, 2, 9, 8],
                        &[3, 2, 3, 2],
                        Conv2dSpec {
                            stride: (2, 3),
                            padding: (1, 2),
                            ..Default::default()
                        },
                    ),
                    (
                        &[2, 2, 9, 9],
                        &[2, 2, 2, 3],
                        Conv2dSpec {
                            dilation: (2, 3),
                            padding: (1, 0),
                            ..Default::default()
                        },
                    ),
                    (
                        &[1, 4, 5, 5],
                        &[6, 2, 3, 3],
                        Conv2dSpec {
                            groups: 2,
                            padding: (1, 1),
                            ..Default::default()
                        },
                    ),
                ];
                for (k, (xs, ws, spec)) in cases.into_iter().enumerate() {
                    let t = leaves(dev, dt, &[xs, ws], 10 + k as u64)?;
                    // A permuted view as the input: the kernels and the composite read any layout.
                    let xv = t[0].permute(&[0, 1, 3, 2])?.permute(&[0, 1, 3, 2])?;
                    v.extend(out_and_grads(&xv.conv2d(&t[1], spec)?, &t)?);
                }
                Ok(v)
            }),
        ),
        (
            "max_pool2d",
            Box::new(|dev, dt| {
                let mut v = Vec::new();
                for (shape, kernel, stride) in [
                    (&[2, 3, 6, 7][..], (2, 2), (2, 2)),
                    (&[1, 2, 7, 7], (3, 2), (2, 1)),
                ] {
                    let t = leaves(dev, dt, &[shape], 20)?;
                    v.extend(out_and_grads(&t[0].max_pool2d(kernel, stride)?, &t)?);
                }
                // Ties split the gradient evenly; NaN wins its window.
                let mut vals_in = vec![1.0; 16];
                vals_in[5] = f64::NAN;
                let x = Tensor::from_array(on(dev, vals_in, &[1, 1, 4, 4], dt), true)?;
                let y = x.max_pool2d((2, 2), (2, 2))?;
                let g = grad(&y.sum(None, false)?, &[x], None, BackwardOptions::default())?;
                v.push(
                    vals(y.array())
                        .into_iter()
                        .map(|a| if a.is_nan() { -1.0 } else { a })
                        .collect(),
                );
                v.push(vals(g[0].array()));
                Ok(v)
            }),
        ),
        (
            "recurrent_layer",
            Box::new(|dev, dt| {
                let lstm = lstm_on(dev, dt)?;
                let x = leaves(dev, dt, &[&[5, 2, 3]], 7)?;
                let (y, _) = lstm.forward_with(&x[0], None)?;
                out_and_grads(&y, &x)
            }),
        ),
    ]
}

device_test!(every_kernel_agrees_with_its_composite -> Result<()>);
fn every_kernel_agrees_with_its_composite(dev: Device) -> Result<()> {
    let runs = runs();
    for op in fused_ops() {
        let forward = op.split("_backward").next().unwrap_or(op);
        assert!(
            runs.iter().any(|(n, _)| *n == forward),
            "{op}: no kernel-composite case"
        );
    }
    for (name, run) in &runs {
        for (dt, tol) in [(DType::F64, 1e-9), (DType::F32, 2e-4)] {
            let kernel = run(dev, dt)?;
            let composite = quill::fused::with_composites(|| run(dev, dt))?;
            assert_eq!(kernel.len(), composite.len(), "{name}");
            for (k, (a, b)) in kernel.iter().zip(&composite).enumerate() {
                assert_close(a, b, tol, &format!("{name} {dt} on {dev}: output {k}"));
            }
        }
    }
    // The switch is real: the LSTM takes its per-step graph under it.
    let m = lstm_on(dev, DType::F64)?;
    let x = Tensor::new(on(dev, vec![0.5; 6], &[2, 1, 3], DType::F64));
    let fused = node_names(&m.forward_with(&x, None)?.0);
    let per_step = node_names(&quill::fused::with_composites(|| m.forward_with(&x, None))?.0);
    assert!(fused.contains(&"LSTMLayerBackward"), "{fused:?}");
    assert!(!per_step.contains(&"LSTMLayerBackward"), "{per_step:?}");
    Ok(())
}

/// Fused ops whose values and gradients are checked in a file of their own (against an
/// independent reference there), and the tests that do it; this file checks their policy.
const ELSEWHERE: [(&str, &str); 1] = [(
    "recurrent_layer",
    "tests/nn_rnn.rs: sequence_modules_match_the_per_step_reference (per-step f64 loop, \
     non-contiguous inputs), fused_gradients_equal_the_per_step_graph (first and second order)",
)];

#[test]
fn every_registered_fused_op_has_a_case() {
    for op in fused_ops() {
        assert!(
            CASES.iter().any(|c| c.name == op || c.backward == op)
                || op.starts_with("batch_norm")
                || op.starts_with("scaled_dot_product_attention")
                || op.starts_with("conv2d")
                || op.starts_with("max_pool2d")
                || op == "sum_squares"
                || ELSEWHERE.iter().any(|(name, _)| *name == op),
            "fused op {op} has no case in tests/fused_matrix.rs"
        );
    }
    for c in &CASES {
        for op in [c.name, c.backward] {
            assert!(fused_ops().contains(&op), "{op} is not in the registry");
            // On the CPU: kernels for f32 / f64, the composite otherwise.
            assert!(fused_kernel(op, DType::F32, Device::Cpu).unwrap(), "{op}");
            assert!(fused_kernel(op, DType::F64, Device::Cpu).unwrap(), "{op}");
            assert!(!fused_kernel(op, DType::F16, Device::Cpu).unwrap(), "{op}");
            assert!(
                quill::supports(op, DType::BF16, Device::Cpu).unwrap(),
                "{op}"
            );
        }
    }
}

fn vals(t: &NDArray) -> Vec<f64> {
    t.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn uniform(rng: &mut Prng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|_| lo + (hi - lo) * rng.unit()).collect()
}

/// `v` as an array of `shape` on `dev` in `dtype`.
fn on(dev: Device, v: Vec<f64>, shape: &[usize], dtype: DType) -> NDArray {
    NDArray::from_vec(v, shape)
        .unwrap()
        .astype(dtype)
        .unwrap()
        .to_device(dev)
        .unwrap()
}

/// x of `shape` as views made on `dev`: contiguous, permuted, reversed and stepped along dim
/// 0, offset by one row, and a row broadcast along dim 0 (stride 0). Empty shapes get the
/// first two.
fn layouts(
    rng: &mut Prng,
    dev: Device,
    shape: &[usize],
    dt: DType,
) -> Vec<(&'static str, NDArray)> {
    let n: usize = shape.iter().product();
    let rank = shape.len();
    let rev: Vec<usize> = shape.iter().rev().copied().collect();
    let axes: Vec<isize> = (0..rank as isize).rev().collect();
    let mut out = vec![
        ("contiguous", on(dev, uniform(rng, n, -2.0, 2.0), shape, dt)),
        (
            "permuted",
            on(dev, uniform(rng, n, -2.0, 2.0), &rev, dt)
                .permute(&axes)
                .unwrap(),
        ),
    ];
    if n == 0 {
        return out;
    }
    let row = n / shape[0];
    let mut big = shape.to_vec();
    big[0] *= 2;
    let stepped = on(dev, uniform(rng, 2 * n, -2.0, 2.0), &big, dt);
    out.push(("reversed, stepped", stepped.slice(&s![..;-2]).unwrap()));
    let mut longer = shape.to_vec();
    longer[0] += 1;
    let offset = on(dev, uniform(rng, n + row, -2.0, 2.0), &longer, dt);
    out.push(("offset", offset.slice(&s![1..]).unwrap()));
    if rank == 1 {
        // A broadcast row would be one value repeated: zero variance, ill-conditioned.
        return out;
    }
    let mut one = shape.to_vec();
    one[0] = 1;
    let b = on(dev, uniform(rng, row, -2.0, 2.0), &one, dt);
    out.push(("broadcast", b.broadcast_to(shape).unwrap()));
    out
}

/// The reference output over the C-order values, row by row.
fn reference(case: &Case, x: &[f64], d: usize, p: &[Vec<f64>]) -> Vec<f64> {
    if d == 0 {
        return vec![];
    }
    x.chunks(d).flat_map(|r| (case.row)(r, p)).collect()
}

#[track_caller]
fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

const SHAPES: [&[usize]; 9] = [
    &[6],
    &[7, 5],
    &[3, 4, 9],
    &[0, 5],
    &[4, 1],
    &[1, 8],
    &[2, 1, 3, 17],
    &[2, 1, 2, 1, 2, 1, 2, 3],
    &[70, 40],
];

device_test!(fused_ops_match_the_row_reference_on_every_layout -> Result<()>);
fn fused_ops_match_the_row_reference_on_every_layout(dev: Device) -> Result<()> {
    let mut rng = Prng::new(50);
    for case in &CASES {
        // (x dtype, parameter dtype, tolerance): the kernels, then the composite.
        for (xt, pt, tol) in [
            (DType::F64, DType::F64, 1e-12),
            (DType::F32, DType::F32, 2e-5),
            (DType::F16, DType::F16, 2e-2),
            (DType::BF16, DType::BF16, 1e-1),
            (DType::F32, DType::F64, 2e-5),
        ] {
            for shape in SHAPES {
                let d = *shape.last().unwrap();
                for (layout, x) in layouts(&mut rng, dev, shape, xt) {
                    let p: Vec<NDArray> = (0..case.params)
                        .map(|_| on(dev, uniform(&mut rng, d, 0.5, 1.5), &[d], pt))
                        .collect();
                    let ctx = format!("{} {xt}/{pt} {shape:?} {layout} on {dev}", case.name);
                    let pt: Vec<Tensor> = p.iter().map(|a| Tensor::new(a.clone())).collect();
                    let y = (case.run)(&Tensor::new(x.clone()), &pt)?;
                    assert_eq!(y.shape(), shape, "{ctx}");
                    assert_eq!(y.device(), dev, "{ctx}");
                    let pv: Vec<Vec<f64>> = p.iter().map(vals).collect();
                    let want = reference(case, &vals(&x), d, &pv);
                    assert_close(&vals(y.array()), &want, tol, &ctx);
                }
            }
        }
    }
    Ok(())
}

device_test!(fused_backward_matches_recorded_and_primitive_gradients -> Result<()>);
fn fused_backward_matches_recorded_and_primitive_gradients(dev: Device) -> Result<()> {
    let mut rng = Prng::new(51);
    for case in &CASES {
        for (dt, tol) in [(DType::F64, 1e-9), (DType::F32, 1e-4)] {
            for shape in SHAPES {
                let d = *shape.last().unwrap();
                for (layout, x) in layouts(&mut rng, dev, shape, dt) {
                    let ctx = format!("{} {dt} {shape:?} {layout} on {dev}", case.name);
                    let x = Tensor::from_array(x, true)?;
                    let mut ins = vec![x.clone()];
                    for _ in 0..case.params {
                        let v = on(dev, uniform(&mut rng, d, 0.5, 1.5), &[d], dt);
                        ins.push(Tensor::from_array(v, true)?);
                    }
                    let seed =
                        Tensor::new(on(dev, uniform(&mut rng, x.numel(), -1.0, 1.0), shape, dt));
                    let y = (case.run)(&x, &ins[1..])?;
                    let plain = BackwardOptions::default();
                    let fused = grad(&y, &ins, Some(&seed), plain)?;
                    let recorded = BackwardOptions {
                        create_graph: true,
                        ..plain
                    };
                    let y = (case.run)(&x, &ins[1..])?;
                    let taped = grad(&y, &ins, Some(&seed), recorded)?;
                    let r = (case.composite)(&x, &ins[1..])?;
                    let prim = grad(&r, &ins, Some(&seed), plain)?;
                    for k in 0..ins.len() {
                        assert_eq!(fused[k].shape(), ins[k].shape(), "{ctx} grad {k}");
                        assert_eq!(fused[k].device(), dev, "{ctx} grad {k}");
                        let f = vals(fused[k].array());
                        assert_close(
                            &f,
                            &vals(taped[k].array()),
                            tol,
                            &format!("{ctx} taped {k}"),
                        );
                        assert_close(&f, &vals(prim[k].array()), tol, &format!("{ctx} prim {k}"));
                    }
                }
            }
        }
    }
    Ok(())
}

device_test!(recurrent_layer_runs_its_kernel_where_declared -> Result<()>);
fn recurrent_layer_runs_its_kernel_where_declared(dev: Device) -> Result<()> {
    use quill::fused::{Activation, Cell};
    let (t, b, h) = (3usize, 2usize, 4usize);
    for (cell, g) in [
        (Cell::Rnn(Activation::Tanh), 1),
        (Cell::Lstm, 4),
        (Cell::Gru, 3),
    ] {
        for dt in [DType::F32, DType::F64, DType::F16] {
            let mut rng = Prng::new(53);
            let mut arr = |shape: &[usize]| {
                let n = shape.iter().product();
                on(dev, uniform(&mut rng, n, -1.0, 1.0), shape, dt)
            };
            // xg as a permuted view: the kernel reads any layout.
            let xg = arr(&[g * h, b, t]).permute(&[2, 1, 0])?;
            let (w, bias, h0, c0) = (arr(&[g * h, h]), arr(&[g * h]), arr(&[b, h]), arr(&[b, h]));
            let c0 = (cell == Cell::Lstm).then_some(&c0);
            let got = xg.recurrent_layer(cell, &w, &bias, &h0, c0)?;
            let kernel = fused_kernel("recurrent_layer", dt, dev).unwrap();
            assert_eq!(got.is_some(), kernel, "{cell:?} {dt} on {dev}");
            if let Some((out, tape)) = got {
                let lead = if cell == Cell::Lstm { vec![2] } else { vec![] };
                let want: Vec<usize> = lead.into_iter().chain([t, b, h]).collect();
                assert_eq!(out.shape(), &want[..]);
                assert_eq!(tape.cell(), cell);
                let need = vec![true; 4 + usize::from(cell == Cell::Lstm)];
                let gs = tape.backward(&out, &w, &need)?;
                assert_eq!(
                    gs[0].as_ref().map(|a| a.shape().to_vec()),
                    Some(vec![t, b, g * h])
                );
                // A gradient of the wrong shape is an error naming the op, not a panic.
                let e = tape.backward(&w, &w, &need).unwrap_err().to_string();
                assert!(e.contains("recurrent_layer_backward"), "{e}");
            }
            let e = xg
                .recurrent_layer(cell, &h0, &bias, &h0, c0)
                .unwrap_err()
                .to_string();
            assert!(e.contains("recurrent_layer") && e.contains("w_hh"), "{e}");
        }
    }
    Ok(())
}

#[test]
fn fused_ops_gradcheck_to_second_order() -> Result<()> {
    let mut rng = Prng::new(52);
    for case in &CASES {
        for shape in [&[5usize][..], &[4, 5], &[3, 2, 6]] {
            let d = *shape.last().unwrap();
            let n: usize = shape.iter().product();
            // A permuted x: its rows are strided in the buffer.
            let rev: Vec<usize> = shape.iter().rev().copied().collect();
            let axes: Vec<isize> = (0..shape.len() as isize).rev().collect();
            let xs = NDArray::from_vec(uniform(&mut rng, n, -2.0, 2.0), &rev)?.permute(&axes)?;
            let mut inputs = vec![Tensor::from_array(xs, true)?];
            for _ in 0..case.params {
                let v = NDArray::from_vec(uniform(&mut rng, d, 0.5, 1.5), &[d])?;
                inputs.push(Tensor::from_array(v, true)?);
            }
            let r = Tensor::new(NDArray::from_vec(uniform(&mut rng, n, -1.0, 1.0), shape)?);
            let f = |t: &[Tensor]| -> Result<Tensor> {
                (case.run)(&t[0], &t[1..])?.mul(&r)?.sum(None, false)
            };
            let (one, two) = gradcheck_two_orders(f, &inputs, &mut rng)?;
            assert!(one.passed, "{} first order {shape:?}: {one}", case.name);
            assert!(two.passed, "{} second order {shape:?}: {two}", case.name);
        }
    }
    Ok(())
}

#[test]
fn fused_ops_reject_bad_shapes_and_dtypes_by_name() -> Result<()> {
    let x = Tensor::new(NDArray::ones(&[4, 8], DType::F32)?);
    let w7 = Tensor::new(NDArray::ones(&[7], DType::F32)?);
    let w2 = Tensor::new(NDArray::ones(&[2, 4], DType::F32)?);
    let scalar = Tensor::new(NDArray::ones(&[], DType::F32)?);
    for case in &CASES {
        for w in [&w7, &w2] {
            let p = vec![w.clone(); case.params];
            let e = (case.run)(&x, &p).unwrap_err().to_string();
            assert!(e.contains(case.name) && e.contains("[4, 8]"), "{e}");
        }
        let p = vec![Tensor::new(NDArray::ones(&[1], DType::F32)?); case.params];
        assert!((case.run)(&scalar, &p).is_err(), "{}: rank 0", case.name);
    }
    let xi = Tensor::new(NDArray::ones(&[2, 3], DType::I32)?);
    let w = Tensor::new(NDArray::ones(&[3], DType::F32)?);
    let e = xi.rms_norm(&w, EPS).unwrap_err().to_string();
    assert!(
        e.contains("rms_norm") && e.contains("floating-point"),
        "{e}"
    );
    Ok(())
}

#[test]
fn rms_norm_module_threads_and_its_kernel_agree_with_f64() -> Result<()> {
    use quill::nn::{Module, RMSNorm};
    // 300 x 128 is past the kernels' threading threshold; results must not depend on it.
    let (rows, d) = (300usize, 128usize);
    let x = NDArray::randn(&[rows, d], 3, DType::F32)?.mul_scalar(3.0)?;
    let run = |threads: usize| -> Vec<f64> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let m = RMSNorm::new(d).unwrap();
            let xt = Tensor::from_array(x.clone(), true).unwrap();
            let y = m.forward(&xt).unwrap();
            assert_eq!(y.grad_fn_name(), Some("RmsNormBackward"));
            let g = grad(
                &y.square().unwrap().sum(None, false).unwrap(),
                &[xt, m.weight.clone()],
                None,
                Default::default(),
            )
            .unwrap();
            let mut out = vals(y.array());
            out.extend(vals(g[0].array()));
            out.extend(vals(g[1].array()));
            out
        })
    };
    let one = run(1);
    assert_eq!(one, run(2), "1 vs 2 threads");
    let want = reference(&CASES[1], &vals(&x), d, &[vec![1.0; d]]);
    assert_close(&one[..rows * d], &want, 2e-5, "module output");
    let e = RMSNorm::new(5)?
        .forward(&Tensor::new(x))
        .unwrap_err()
        .to_string();
    assert!(e.contains("RMSNorm"), "{e}");
    Ok(())
}
