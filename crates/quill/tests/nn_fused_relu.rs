//! `batch_norm_relu_train` (BatchNorm with the ReLU fused into its kernels) against two
//! references: the batch norm written as primitive Tensor ops followed by `relu` (values and
//! gradients, f64, on strided inputs; first and second derivatives by finite differences),
//! and the unfused `batch_norm_train` + `relu` (bit for bit: the gate only moves the ReLU's
//! mask into the same arithmetic). Then `Sequential`'s folding of BatchNorm + ReLU: same
//! values, gradients and running statistics as the layers one by one, only while training.

use quill::nn::{BatchNorm, Module, ReLU, Sequential, Tanh};
use quill::tensor::{grad, BackwardOptions, Tensor};
use quill::{s, DType, NDArray, Result};
use quill_test_support::grads::gradcheck_two_orders;
use quill_test_support::Prng;

fn vals(t: &NDArray) -> Vec<f64> {
    t.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn uniform(rng: &mut Prng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|_| lo + (hi - lo) * rng.unit()).collect()
}

fn leaf(v: Vec<f64>, shape: &[usize], dt: DType) -> Tensor {
    Tensor::from_array(
        NDArray::from_vec(v, shape).unwrap().astype(dt).unwrap(),
        true,
    )
    .unwrap()
}

/// Batch norm as primitives, then ReLU.
fn reference(x: &Tensor, w: &Tensor, b: &Tensor, eps: f64) -> Result<Tensor> {
    let axes: Vec<isize> = (0..x.ndim() as isize).filter(|&a| a != 1).collect();
    let mut p = vec![1isize; x.ndim()];
    p[1] = w.shape()[0] as isize;
    let mean = x.mean(Some(&axes), true)?;
    let var = x.sub(&mean)?.square()?.mean(Some(&axes), true)?;
    let xhat = x.sub(&mean)?.div(&var.add_scalar(eps)?.sqrt()?)?;
    xhat.mul(&w.reshape(&p)?)?.add(&b.reshape(&p)?)?.relu()
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

/// `x` of `shape` as a contiguous leaf, a permuted view and a reversed stepped offset view.
fn layouts(v: &[f64], shape: &[usize], dt: DType) -> Vec<(&'static str, Tensor)> {
    let rank = shape.len();
    let plain = NDArray::from_vec(v.to_vec(), shape)
        .unwrap()
        .astype(dt)
        .unwrap();
    let axes: Vec<isize> = (0..rank as isize).rev().collect();
    // The same values laid out in reverse dim order, permuted back.
    let permuted = plain
        .permute(&axes)
        .unwrap()
        .compact()
        .unwrap()
        .permute(&axes)
        .unwrap();
    // Every other row, reversed, of a buffer twice as long in dim 0 (negative stride, offset).
    let mut big = shape.to_vec();
    big[0] *= 2;
    let stepped = NDArray::zeros(&big, dt).unwrap();
    let view = stepped.slice(&s![..;-2]).unwrap();
    view.assign(&plain).unwrap();
    [
        ("contiguous", plain),
        ("permuted", permuted),
        ("reversed, stepped", view),
    ]
    .into_iter()
    .map(|(n, a)| (n, Tensor::from_array(a, true).unwrap()))
    .collect()
}

const SHAPES: [&[usize]; 6] = [
    &[5, 3],
    &[7, 4, 6],
    &[3, 4, 5, 5],
    &[16, 16, 14, 14],
    &[2, 3, 2, 3, 2],
    &[1, 2, 1, 1, 1, 3, 1, 2],
];

#[test]
fn fused_relu_matches_primitives_and_unfused_bit_for_bit() -> Result<()> {
    let mut rng = Prng::new(7);
    for shape in SHAPES {
        let c = shape[1];
        let n: usize = shape.iter().product();
        let xv = uniform(&mut rng, n, -2.0, 2.0);
        let (wv, bv) = (
            uniform(&mut rng, c, 0.5, 1.5),
            uniform(&mut rng, c, -0.5, 0.5),
        );
        let gv = uniform(&mut rng, n, -1.0, 1.0);
        let ins64 = [
            leaf(xv.clone(), shape, DType::F64),
            leaf(wv.clone(), &[c], DType::F64),
            leaf(bv.clone(), &[c], DType::F64),
        ];
        let want = reference(&ins64[0], &ins64[1], &ins64[2], 1e-5)?;
        let seed64 = Tensor::new(NDArray::from_vec(gv.clone(), shape)?);
        let want_g = grad(&want, &ins64, Some(&seed64), BackwardOptions::default())?;
        for dt in [DType::F64, DType::F32, DType::BF16] {
            let (w, b) = (leaf(wv.clone(), &[c], dt), leaf(bv.clone(), &[c], dt));
            let seed = Tensor::new(NDArray::from_vec(gv.clone(), shape)?.astype(dt).unwrap());
            let tol = match dt {
                DType::F64 => 1e-9,
                DType::F32 => 1e-4,
                _ => 5e-2,
            };
            for (layout, x) in layouts(&xv, shape, dt) {
                let ctx = format!("{shape:?} {dt:?} {layout}");
                let (y, mean, var) = x.batch_norm_relu_train(&w, &b, 1e-5)?;
                assert_eq!(y.grad_fn_name(), Some("BatchNormBackward"), "{ctx}");
                assert_eq!(y.dtype(), dt, "{ctx}");
                let ins = [x.clone(), w.clone(), b.clone()];
                let got_g = grad(&y, &ins, Some(&seed), BackwardOptions::default())?;
                if dt != DType::BF16 {
                    assert_close(&vals(y.array()), &vals(want.array()), tol, &ctx);
                    for (k, (g, r)) in got_g.iter().zip(&want_g).enumerate() {
                        let what = format!("{ctx} grad {k}");
                        assert_close(&vals(g.array()), &vals(r.array()), tol, &what);
                    }
                }
                // The unfused pair: the same kernel arithmetic, so the same bits.
                let (y2, mean2, var2) = x.batch_norm_train(&w, &b, 1e-5)?;
                let y2 = y2.relu()?;
                assert_eq!(vals(y.array()), vals(y2.array()), "{ctx} values");
                assert_eq!(vals(&mean), vals(&mean2), "{ctx} mean");
                assert_eq!(vals(&var), vals(&var2), "{ctx} var");
                let unfused_g = grad(&y2, &ins, Some(&seed), BackwardOptions::default())?;
                for (k, (g, r)) in got_g.iter().zip(&unfused_g).enumerate() {
                    assert_eq!(g.dtype(), dt, "{ctx} grad {k} dtype");
                    assert_eq!(vals(g.array()), vals(r.array()), "{ctx} grad {k}");
                }
            }
        }
    }
    Ok(())
}

/// Where the output is exactly zero (x at the channel mean, bias 0) or a NaN, no gradient
/// passes, as with `relu`'s own backward (`x > 0`).
#[test]
fn fused_relu_gate_at_zero_and_nan() -> Result<()> {
    // (4, 2): channel 0 is -1, 0, 1, 0 (mean 0, so both zeros map to exactly 0); channel 1
    // holds a NaN, which makes its statistics and outputs NaN.
    let xv = vec![-1.0, 2.0, 0.0, -2.0, 1.0, 3.0, 0.0, f64::NAN];
    let x = leaf(xv, &[4, 2], DType::F32);
    let w = leaf(vec![1.0, 1.0], &[2], DType::F32);
    let b = leaf(vec![0.0, 0.0], &[2], DType::F32);
    let (y, _, _) = x.batch_norm_relu_train(&w, &b, 1e-5)?;
    let yv = vals(y.array());
    assert_eq!([yv[0], yv[2], yv[6]], [0.0; 3], "{yv:?}");
    assert!(yv[4] > 0.0, "{yv:?}");
    assert!([1, 3, 5, 7].iter().all(|&i| yv[i].is_nan()), "{yv:?}");
    let seed = Tensor::new(NDArray::ones(&[4, 2], DType::F32)?);
    let ins = [x.clone(), w.clone(), b.clone()];
    let gs = grad(&y, &ins, Some(&seed), BackwardOptions::default())?;
    // The bias gradient counts the outputs the gate passes: one in channel 0.
    assert_eq!(vals(gs[2].array())[0], 1.0);
    let (y2, _, _) = x.batch_norm_train(&w, &b, 1e-5)?;
    let gs2 = grad(&y2.relu()?, &ins, Some(&seed), BackwardOptions::default())?;
    for (g, r) in gs.iter().zip(&gs2) {
        let (a, b) = (vals(g.array()), vals(r.array()));
        for (p, q) in a.iter().zip(&b) {
            assert!(p == q || (p.is_nan() && q.is_nan()), "{a:?} vs {b:?}");
        }
    }
    Ok(())
}

#[test]
fn fused_relu_gradcheck_first_and_second_order() -> Result<()> {
    let mut rng = Prng::new(11);
    for shape in [vec![6usize, 3], vec![3, 2, 2, 3]] {
        let c = shape[1];
        let n: usize = shape.iter().product();
        let x = leaf(uniform(&mut rng, n, -2.0, 2.0), &shape, DType::F64);
        let w = leaf(uniform(&mut rng, c, 0.5, 1.5), &[c], DType::F64);
        let b = leaf(uniform(&mut rng, c, -0.5, 0.5), &[c], DType::F64);
        let r = Tensor::new(NDArray::from_vec(uniform(&mut rng, n, -1.0, 1.0), &shape)?);
        let inputs = [x, w, b];
        let first = |t: &[Tensor]| -> Result<Tensor> {
            let (y, _, _) = t[0].batch_norm_relu_train(&t[1], &t[2], 1e-5)?;
            y.mul(&r)?.sum(None, false)
        };
        let (one, two) = gradcheck_two_orders(first, &inputs, &mut rng)?;
        assert!(one.passed, "first order {shape:?}: {one}");
        assert!(two.passed, "second order {shape:?}: {two}");
    }
    Ok(())
}

#[test]
fn fused_relu_array_errors() -> Result<()> {
    let x = NDArray::ones(&[4, 3, 5], DType::F32)?;
    let w = NDArray::ones(&[3], DType::F32)?;
    let (y, _, v) = x.batch_norm_relu_train(&w, &w, 1e-5)?;
    let bad = NDArray::ones(&[4, 3, 4], DType::F32)?;
    let e = x
        .batch_norm_relu_backward(&bad, &y, &w, &v, 1e-5)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("batch_norm_backward") && e.contains("y") && e.contains("[4, 3, 4]"),
        "{e}"
    );
    // A y of another float dtype runs the composite, with the kernel's results.
    let xr = NDArray::randn(&[4, 3, 5], 11, DType::F32)?;
    let g = NDArray::randn(&[4, 3, 5], 12, DType::F32)?;
    let (yr, _, vr) = xr.batch_norm_relu_train(&w, &w, 1e-5)?;
    let kernel = xr.batch_norm_relu_backward(&yr, &g, &w, &vr, 1e-5)?;
    let mixed = xr.batch_norm_relu_backward(&yr.astype(DType::F64)?, &g, &w, &vr, 1e-5)?;
    for (k, (a, b)) in [
        (kernel.0, mixed.0),
        (kernel.1, mixed.1),
        (kernel.2, mixed.2),
    ]
    .into_iter()
    .enumerate()
    {
        let (a, b) = (a.astype(DType::F64)?, b.astype(DType::F64)?);
        let (a, b) = (a.to_vec::<f64>()?, b.to_vec::<f64>()?);
        for (p, q) in a.iter().zip(&b) {
            assert!(
                (p - q).abs() <= 1e-4 * (1.0 + q.abs()),
                "grad {k}: {p} vs {q}"
            );
        }
    }
    let e = x
        .batch_norm_relu_backward(&y.astype(DType::I32).unwrap(), &y, &w, &v, 1e-5)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("batch_norm_backward") && e.contains("floating-point"),
        "{e}"
    );
    assert!(x.batch_norm_relu_train(&w, &w, f64::NAN).is_err());
    Ok(())
}

/// Two identical stacks: one run through `Sequential` (which folds BatchNorm + ReLU), one
/// layer by layer.
#[test]
fn sequential_folds_batch_norm_relu_only_in_training() -> Result<()> {
    let stack = || -> Result<Sequential> {
        Ok(Sequential::new()
            .add(BatchNorm::new_2d(3)?)
            .add(ReLU)
            .add(BatchNorm::new_2d(3)?)
            .add(Tanh)
            .add(ReLU)
            .add(BatchNorm::new_2d(3)?))
    };
    let (folded, plain) = (stack()?, stack()?);
    let mut rng = Prng::new(5);
    // The same non-trivial parameters in both.
    for (a, b) in folded.parameters().iter().zip(plain.parameters()) {
        let v = NDArray::from_vec(uniform(&mut rng, a.numel(), 0.5, 1.5), a.shape())?;
        a.array().assign(&v.astype(DType::F32).unwrap())?;
        b.array().assign(&v.astype(DType::F32).unwrap())?;
    }
    let xv = NDArray::from_vec(uniform(&mut rng, 4 * 3 * 5 * 5, -2.0, 2.0), &[4, 3, 5, 5])?
        .astype(DType::F32)
        .unwrap();
    for training in [true, false] {
        folded.set_training(training);
        plain.set_training(training);
        let x = Tensor::from_array(xv.clone(), true)?;
        let y = folded.forward(&x)?;
        let mut h = x.clone();
        let mut names = Vec::new();
        for l in &plain.layers {
            h = l.forward(&h)?;
            names.push(h.grad_fn_name());
        }
        assert_eq!(vals(y.array()), vals(h.array()), "training {training}");
        let loss = |t: &Tensor| t.square().and_then(|s| s.sum(None, false));
        let mut ins = vec![x.clone()];
        ins.extend(folded.parameters());
        let g1 = grad(&loss(&y)?, &ins, None, BackwardOptions::default())?;
        let mut ins2 = vec![x.clone()];
        ins2.extend(plain.parameters());
        let g2 = grad(&loss(&h)?, &ins2, None, BackwardOptions::default())?;
        for (k, (a, b)) in g1.iter().zip(&g2).enumerate() {
            assert_eq!(
                vals(a.array()),
                vals(b.array()),
                "training {training} grad {k}"
            );
        }
        for (a, b) in folded.named_buffers().iter().zip(plain.named_buffers()) {
            assert_eq!(vals(a.1.array()), vals(b.1.array()), "{}", a.0);
        }
        // Layer by layer, the ReLU is its own op.
        assert_eq!(names[1], Some("UnaryBackward"));
        // The fused form exists only while training, and is one op.
        let bn = BatchNorm::new_2d(3)?;
        bn.set_training(training);
        let fused = bn.forward_relu(&x);
        assert_eq!(fused.is_some(), training);
        if let Some(r) = fused {
            assert_eq!(r?.grad_fn_name(), Some("BatchNormBackward"));
        }
    }
    // A stack ending in BatchNorm + ReLU ends in the fused op while training.
    let pair = Sequential::new().add(BatchNorm::new_2d(3)?).add(ReLU);
    let x = Tensor::from_array(xv, true)?;
    assert_eq!(pair.forward(&x)?.grad_fn_name(), Some("BatchNormBackward"));
    pair.eval();
    assert_eq!(pair.forward(&x)?.grad_fn_name(), Some("UnaryBackward"));
    // Only ReLU says it is one.
    assert!(ReLU.is_relu() && !Tanh.is_relu());
    assert!(!BatchNorm::new_2d(3)?.is_relu());
    Ok(())
}
