//! needle hw4's tensor ops: `pad`, `dilate` / `undilate` and `conv` (NHWC, (kh, kw, Cin,
//! Cout) weight) against naive per-element loops over plain `Vec<f64>`, gradients against
//! central differences (first order, and second order for pad, dilate and conv) on
//! non-contiguous inputs, agreement of `conv` with `nn::Conv2d::functional`, and bad inputs.
//! (stack, split, flip, tanh, sigmoid, relu and logsumexp are gradchecked in autograd_ops.rs.)

#![allow(clippy::cloned_ref_to_slice_refs)]

use quill::nn::Conv2d;
use quill::tensor::{grad, gradcheck, BackwardOptions, GradcheckOptions, Tensor};
use quill::{s, DType, Error, NDArray, Result};
use quill_test_support::grads::gradcheck_two_orders;
use quill_test_support::{strided_from, Prng};

/// The elements in C order as f64 (the shared test helper).
fn values(a: &NDArray) -> Vec<f64> {
    quill_test_support::f64s(a)
}

fn uniform(rng: &mut Prng, n: usize) -> Vec<f64> {
    (0..n).map(|_| 2.0 * rng.unit() - 1.0).collect()
}

/// A leaf requiring grad with uniform values and a random non-contiguous layout (permuted,
/// gapped, reversed, offset), plus the C-order values it holds.
fn strided_leaf(rng: &mut Prng, shape: &[usize]) -> (Tensor, Vec<f64>) {
    let n: usize = shape.iter().product();
    let vals = uniform(rng, n);
    let a = strided_from(rng, &vals, shape, f64::NAN);
    (Tensor::from_array(a, true).unwrap(), vals)
}

/// Three hand-made views of `shape` (rank 4): a permuted one, a negative-step slice, and an
/// offset view with gaps.
fn named_views(shape: [usize; 4], seed: u64) -> Vec<(&'static str, NDArray)> {
    let [a, b, c, d] = shape;
    let p = NDArray::randn(&[d, b, a, c], seed, DType::F64)
        .unwrap()
        .permute(&[2, 1, 3, 0])
        .unwrap();
    let r = NDArray::randn(&[a, b, c, 2 * d], seed + 1, DType::F64)
        .unwrap()
        .slice(&s![.., ..;-1, .., ..;-2])
        .unwrap();
    let o = NDArray::randn(&[a + 1, b + 2, c, d + 1], seed + 2, DType::F64)
        .unwrap()
        .slice(&s![1.., 2.., .., 1..])
        .unwrap();
    for (_, v) in [("", &p), ("", &r), ("", &o)] {
        assert_eq!(v.shape(), &shape);
    }
    assert!(!p.is_contiguous() && !r.is_contiguous() && !o.is_contiguous());
    vec![("permuted", p), ("negative step", r), ("offset", o)]
}

fn strides_of(shape: &[usize]) -> Vec<usize> {
    let mut st = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        st[i] = st[i + 1] * shape[i + 1];
    }
    st
}

/// The multi-index of C-order position `k`.
fn unravel(shape: &[usize], mut k: usize) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for i in (0..shape.len()).rev() {
        idx[i] = k % shape[i];
        k /= shape[i];
    }
    idx
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

#[track_caller]
fn check(what: &str, f: impl Fn(&[Tensor]) -> Result<Tensor>, inputs: &[Tensor]) {
    let rep = gradcheck(f, inputs, GradcheckOptions::default()).unwrap();
    assert!(rep.passed, "{what}: {rep}");
    assert!(rep.checked > 0, "{what}: nothing checked");
}

/// Second order: `first`'s gradients contracted with fixed random tensors, checked again
/// against central differences (right only when the backward is differentiable).
#[track_caller]
fn check_second(
    what: &str,
    seed: u64,
    first: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
) {
    let (_, rep) = gradcheck_two_orders(first, inputs, &mut Prng::new(seed)).unwrap();
    assert!(rep.passed, "{what} (second order): {rep}");
    assert!(rep.checked > 0, "{what} (second order): nothing checked");
}

// ---------------------------------------------------------------- pad

fn naive_pad(x: &[f64], shape: &[usize], pads: &[(usize, usize)]) -> (Vec<f64>, Vec<usize>) {
    let out_shape: Vec<usize> = shape
        .iter()
        .zip(pads)
        .map(|(&d, &(b, a))| d + b + a)
        .collect();
    let n: usize = out_shape.iter().product();
    let st = strides_of(shape);
    let mut out = vec![0.0; n];
    for (k, o) in out.iter_mut().enumerate() {
        let idx = unravel(&out_shape, k);
        let mut src = 0;
        let mut inside = true;
        for (i, &j) in idx.iter().enumerate() {
            let (b, _) = pads[i];
            if j < b || j >= b + shape[i] {
                inside = false;
                break;
            }
            src += (j - b) * st[i];
        }
        if inside {
            *o = x[src];
        }
    }
    (out, out_shape)
}

#[test]
fn pad_forward_matches_loops_and_gradchecks() {
    let mut rng = Prng::new(1);
    type Pads<'a> = &'a [(usize, usize)];
    let cases: &[(&[usize], Pads)] = &[
        (&[3, 4], &[(1, 2), (0, 3)]),
        (&[2, 1, 3], &[(0, 0), (2, 1), (1, 0)]),
        (&[1, 3, 2, 2], &[(0, 1), (1, 1), (2, 2), (0, 0)]),
        (&[5], &[(0, 0)]),
        (&[], &[]),
    ];
    for &(shape, pads) in cases {
        let (x, vals) = strided_leaf(&mut rng, shape);
        let y = x.pad(pads).unwrap();
        let (want, want_shape) = naive_pad(&vals, shape, pads);
        assert_eq!(y.shape(), want_shape.as_slice(), "pad {shape:?} {pads:?}");
        assert_eq!(values(y.array()), want, "pad {shape:?} {pads:?}");
        // The NDArray method gives the same.
        assert_eq!(values(&x.array().pad(pads).unwrap()), want);
        check(&format!("pad {shape:?} {pads:?}"), |t| t[0].pad(pads), &[x]);
    }
    // Second order: the pad's backward (a slice) is itself differentiated.
    let (x, _) = strided_leaf(&mut rng, &[2, 3, 2]);
    let r = Tensor::new(NDArray::randn(&[4, 3, 5], 9, DType::F64).unwrap());
    check_second(
        "pad",
        10,
        |t| {
            t[0].pad(&[(1, 1), (0, 0), (0, 3)])?
                .square()?
                .mul(&r)?
                .sum(None, false)
        },
        &[x],
    );
}

#[test]
fn pad_errors() {
    let x = Tensor::new(NDArray::zeros(&[2, 3], DType::F32).unwrap());
    let e = x.pad(&[(1, 1)]).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(e, Error::InvalidArgument { op: "pad", .. }),
        "{e:?}"
    );
    assert!(
        msg.contains("[2, 3]") && msg.contains("one pair per axis"),
        "{msg}"
    );
    assert!(x.pad(&[(0, 0), (0, 0), (1, 1)]).is_err());
    let e = x.pad(&[(usize::MAX, 0), (0, 0)]).unwrap_err();
    assert!(matches!(e, Error::Overflow { op: "pad", .. }), "{e:?}");
}

// ---------------------------------------------------------------- dilate / undilate

fn naive_dilate(x: &[f64], shape: &[usize], axes: &[usize], d: usize) -> (Vec<f64>, Vec<usize>) {
    let out_shape: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(i, &n)| if axes.contains(&i) { n * (d + 1) } else { n })
        .collect();
    let st = strides_of(shape);
    let mut out = vec![0.0; out_shape.iter().product()];
    for (k, o) in out.iter_mut().enumerate() {
        let idx = unravel(&out_shape, k);
        let mut src = 0;
        let mut hit = true;
        for (i, &j) in idx.iter().enumerate() {
            let j = if axes.contains(&i) {
                if j % (d + 1) != 0 {
                    hit = false;
                    break;
                }
                j / (d + 1)
            } else {
                j
            };
            src += j * st[i];
        }
        if hit {
            *o = x[src];
        }
    }
    (out, out_shape)
}

fn naive_undilate(x: &[f64], shape: &[usize], axes: &[usize], d: usize) -> (Vec<f64>, Vec<usize>) {
    let out_shape: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            if axes.contains(&i) {
                n.div_ceil(d + 1)
            } else {
                n
            }
        })
        .collect();
    let st = strides_of(shape);
    let out = (0..out_shape.iter().product())
        .map(|k| {
            let idx = unravel(&out_shape, k);
            let src: usize = idx
                .iter()
                .enumerate()
                .map(|(i, &j)| if axes.contains(&i) { j * (d + 1) } else { j } * st[i])
                .sum();
            x[src]
        })
        .collect();
    (out, out_shape)
}

#[test]
fn dilate_undilate_forward_and_gradients() {
    let mut rng = Prng::new(2);
    let cases: &[(&[usize], &[isize], usize)] = &[
        (&[3, 4], &[0], 1),
        (&[3, 4], &[-1, 0], 2),
        (&[2, 3, 2, 1], &[1, 2], 1),
        (&[2, 3, 2, 1], &[3], 3),
        (&[4], &[0], 0),
        (&[2, 2], &[], 1),
        (&[1, 5, 3], &[1], 2),
    ];
    for &(shape, axes, d) in cases {
        let ctx = format!("{shape:?} axes {axes:?} dilation {d}");
        let norm: Vec<usize> = axes
            .iter()
            .map(|&a| if a < 0 { a + shape.len() as isize } else { a } as usize)
            .collect();
        let (x, vals) = strided_leaf(&mut rng, shape);
        let y = x.dilate(axes, d).unwrap();
        let (want, want_shape) = naive_dilate(&vals, shape, &norm, d);
        assert_eq!(y.shape(), want_shape.as_slice(), "dilate {ctx}");
        assert_eq!(values(y.array()), want, "dilate {ctx}");
        // undilate inverts dilate exactly.
        let back = y.undilate(axes, d).unwrap();
        assert_eq!(values(back.array()), vals, "undilate(dilate) {ctx}");
        check(
            &format!("dilate {ctx}"),
            |t| t[0].dilate(axes, d),
            &[x.clone()],
        );

        // undilate of a strided input whose dims need not divide by d + 1.
        let (z, zv) = strided_leaf(&mut rng, shape);
        let u = z.undilate(axes, d).unwrap();
        let (want, want_shape) = naive_undilate(&zv, shape, &norm, d);
        assert_eq!(u.shape(), want_shape.as_slice(), "undilate {ctx}");
        assert_eq!(values(u.array()), want, "undilate {ctx}");
        check(&format!("undilate {ctx}"), |t| t[0].undilate(axes, d), &[z]);
    }
    // A size 5 dim undilated by 2 keeps positions 0 and 3; the gradient is cut back to 5.
    let (x, _) = strided_leaf(&mut rng, &[5, 2]);
    let u = x.undilate(&[0], 2).unwrap();
    assert_eq!(u.shape(), &[2, 2]);
    u.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(
        values(x.grad().unwrap().array()),
        vec![1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    );
    // Second order through dilate and undilate.
    let (x, _) = strided_leaf(&mut rng, &[3, 2]);
    check_second(
        "dilate",
        11,
        |t| {
            let y = t[0].dilate(&[0, 1], 1)?;
            y.square()?
                .mul(&y.exp()?)?
                .undilate(&[1], 1)?
                .sum(None, false)
        },
        &[x],
    );
}

#[test]
fn dilate_errors() {
    let x = Tensor::new(NDArray::zeros(&[2, 3], DType::F64).unwrap());
    for e in [
        x.dilate(&[2], 1).unwrap_err(),
        x.undilate(&[-3], 1).unwrap_err(),
    ] {
        assert!(matches!(e, Error::AxisOutOfRange { ndim: 2, .. }), "{e:?}");
    }
    let e = x.dilate(&[0, -2], 1).unwrap_err();
    assert!(
        matches!(e, Error::DuplicateAxis { op: "dilate", .. }),
        "{e:?}"
    );
    let e = x.undilate(&[1, 1], 1).unwrap_err();
    assert!(
        matches!(e, Error::DuplicateAxis { op: "undilate", .. }),
        "{e:?}"
    );
    let e = x.dilate(&[1], usize::MAX / 4).unwrap_err();
    assert!(matches!(e, Error::Overflow { op: "dilate", .. }), "{e:?}");
    for e in [
        x.dilate(&[0], usize::MAX).unwrap_err(),
        x.undilate(&[0], usize::MAX).unwrap_err(),
    ] {
        assert!(e.to_string().contains("too large"), "{e}");
    }
}

// ---------------------------------------------------------------- conv

/// Direct convolution in NHWC / (kh, kw, Cin, Cout): seven loops.
fn naive_conv(
    x: &[f64],
    [n, h, wd, c]: [usize; 4],
    w: &[f64],
    [kh, kw, _, o]: [usize; 4],
    stride: usize,
    pad: usize,
) -> (Vec<f64>, [usize; 4]) {
    let ho = (h + 2 * pad - kh) / stride + 1;
    let wo = (wd + 2 * pad - kw) / stride + 1;
    let mut out = vec![0.0; n * ho * wo * o];
    for ni in 0..n {
        for y in 0..ho {
            for z in 0..wo {
                for oi in 0..o {
                    let mut acc = 0.0;
                    for i in 0..kh {
                        for j in 0..kw {
                            for ci in 0..c {
                                let r = (y * stride + i) as isize - pad as isize;
                                let q = (z * stride + j) as isize - pad as isize;
                                if r < 0 || q < 0 || r >= h as isize || q >= wd as isize {
                                    continue;
                                }
                                let (r, q) = (r as usize, q as usize);
                                acc += x[((ni * h + r) * wd + q) * c + ci]
                                    * w[((i * kw + j) * c + ci) * o + oi];
                            }
                        }
                    }
                    out[((ni * ho + y) * wo + z) * o + oi] = acc;
                }
            }
        }
    }
    (out, [n, ho, wo, o])
}

/// (x shape, w shape, stride, padding): strides 1/2/3, paddings 0/1/2, kh != kw, batch 1,
/// size-1 dims, a 1x1 kernel, a kernel as big as the padded input.
const CONV_CASES: &[([usize; 4], [usize; 4], usize, usize)] = &[
    ([2, 5, 6, 3], [3, 3, 3, 4], 1, 0),
    ([2, 5, 6, 3], [3, 3, 3, 4], 1, 1),
    ([1, 6, 5, 2], [3, 2, 2, 3], 2, 1),
    ([1, 7, 7, 2], [2, 3, 2, 2], 3, 2),
    ([2, 4, 4, 1], [1, 1, 1, 3], 2, 0),
    ([1, 1, 5, 2], [1, 3, 2, 1], 1, 0),
    ([1, 3, 3, 2], [5, 5, 2, 2], 1, 1),
    ([2, 5, 5, 3], [3, 3, 3, 2], 2, 2),
    ([1, 2, 3, 1], [4, 4, 1, 2], 3, 2),
];

#[test]
fn conv_forward_matches_seven_loops() {
    let mut rng = Prng::new(3);
    for &(xs, ws, stride, pad) in CONV_CASES {
        let ctx = format!("x {xs:?} w {ws:?} stride {stride} pad {pad}");
        let (x, xv) = strided_leaf(&mut rng, &xs);
        let (w, wv) = strided_leaf(&mut rng, &ws);
        let y = x.conv(&w, stride, pad).unwrap();
        let (want, want_shape) = naive_conv(&xv, xs, &wv, ws, stride, pad);
        assert_eq!(y.shape(), &want_shape, "{ctx}");
        assert_close(&values(y.array()), &want, 1e-12, &ctx);
        // f32 agrees too, to f32 rounding.
        let y32 = Tensor::new(x.array().astype(DType::F32).unwrap())
            .conv(
                &Tensor::new(w.array().astype(DType::F32).unwrap()),
                stride,
                pad,
            )
            .unwrap();
        assert_eq!(y32.dtype(), DType::F32);
        assert_close(&values(y32.array()), &want, 1e-5, &format!("f32 {ctx}"));
    }
    // The hand-made views: permuted, negative step, offset.
    for (name, xa) in named_views([2, 5, 4, 3], 20) {
        for (wname, wa) in named_views([3, 2, 3, 2], 30) {
            let (xv, wv) = (values(&xa), values(&wa));
            let y = Tensor::new(xa.clone())
                .conv(&Tensor::new(wa.clone()), 2, 1)
                .unwrap();
            let (want, _) = naive_conv(&xv, [2, 5, 4, 3], &wv, [3, 2, 3, 2], 2, 1);
            assert_close(
                &values(y.array()),
                &want,
                1e-12,
                &format!("{name} x {wname} w"),
            );
        }
    }
}

#[test]
fn conv_gradchecks_for_every_case() {
    let mut rng = Prng::new(4);
    for &(xs, ws, stride, pad) in CONV_CASES {
        let ctx = format!("x {xs:?} w {ws:?} stride {stride} pad {pad}");
        let (x, _) = strided_leaf(&mut rng, &xs);
        let (w, _) = strided_leaf(&mut rng, &ws);
        check(&ctx, |t| t[0].conv(&t[1], stride, pad), &[x, w]);
    }
    for (name, xa) in named_views([1, 4, 5, 2], 40) {
        let wa = &named_views([2, 3, 2, 2], 50)[0].1;
        let x = Tensor::from_array(xa, true).unwrap();
        let w = Tensor::from_array(wa.clone(), true).unwrap();
        check(name, |t| t[0].conv(&t[1], 2, 1), &[x, w]);
    }
    // Only one operand requiring grad.
    let (x, _) = strided_leaf(&mut rng, &[1, 4, 4, 2]);
    let w = Tensor::new(NDArray::randn(&[3, 3, 2, 2], 5, DType::F64).unwrap());
    check("x only", |t| t[0].conv(&w, 1, 1), &[x.clone()]);
    let xc = Tensor::new(x.array().clone());
    let (w, _) = strided_leaf(&mut rng, &[3, 3, 2, 2]);
    check("w only", |t| xc.conv(&t[0], 2, 0), &[w]);
}

/// An empty batch: the output is empty and the gradients are zeros of the operands' shapes
/// (the weight's: no sample contributes), through the kernel backward.
#[test]
fn conv_empty_batch_gradients() {
    let x = Tensor::from_array(NDArray::zeros(&[0, 5, 5, 2], DType::F64).unwrap(), true).unwrap();
    let w =
        Tensor::from_array(NDArray::randn(&[3, 3, 2, 4], 1, DType::F64).unwrap(), true).unwrap();
    let y = x.conv(&w, 2, 1).unwrap();
    assert_eq!(y.shape(), &[0, 3, 3, 4]);
    y.sum(None, false).unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().shape(), &[0, 5, 5, 2]);
    let gw = x.grad().map(|_| w.grad().unwrap()).unwrap();
    assert_eq!(gw.shape(), &[3, 3, 2, 4]);
    assert!(values(gw.array()).iter().all(|&v| v == 0.0));
}

#[test]
fn conv_second_order() {
    let mut rng = Prng::new(5);
    for &(xs, ws, stride, pad) in &[
        ([1, 4, 5, 2], [3, 2, 2, 2], 2, 1),
        ([2, 3, 3, 1], [2, 2, 1, 2], 1, 0),
        ([1, 5, 4, 1], [2, 3, 1, 1], 3, 2),
    ] {
        let ctx = format!("x {xs:?} w {ws:?} stride {stride} pad {pad}");
        let (x, _) = strided_leaf(&mut rng, &xs);
        let (w, _) = strided_leaf(&mut rng, &ws);
        let y0 = x.conv(&w, stride, pad).unwrap();
        let r = Tensor::new(NDArray::randn(y0.shape(), 7, DType::F64).unwrap());
        // The square makes the output gradient depend on x and w, so the second pass goes
        // through the dilation of that gradient as well as through both convolutions.
        check_second(
            &ctx,
            12,
            |t| {
                t[0].conv(&t[1], stride, pad)?
                    .square()?
                    .mul(&r)?
                    .sum(None, false)
            },
            &[x, w],
        );
    }
}

#[test]
fn conv_agrees_with_conv2d_functional() {
    let mut rng = Prng::new(6);
    for &(xs, ws, stride, pad) in CONV_CASES {
        let (x, _) = strided_leaf(&mut rng, &xs);
        let (w, _) = strided_leaf(&mut rng, &ws);
        let ours = x.conv(&w, stride, pad).unwrap();
        let theirs = Conv2d::functional(
            &x.permute(&[0, 3, 1, 2]).unwrap(),
            &w.permute(&[3, 2, 0, 1]).unwrap(),
            None,
            stride,
            pad,
            1,
        )
        .unwrap()
        .permute(&[0, 2, 3, 1])
        .unwrap();
        assert_close(
            &values(ours.array()),
            &values(theirs.array()),
            1e-12,
            &format!("{xs:?} {ws:?}"),
        );
        // Gradients agree as well.
        let r = Tensor::new(NDArray::randn(ours.shape(), 8, DType::F64).unwrap());
        let opts = BackwardOptions::default();
        let a = grad(
            &ours.mul(&r).unwrap().sum(None, false).unwrap(),
            &[x.clone(), w.clone()],
            None,
            opts,
        )
        .unwrap();
        let b = grad(
            &theirs.mul(&r).unwrap().sum(None, false).unwrap(),
            &[x, w],
            None,
            opts,
        )
        .unwrap();
        for (ga, gb) in a.iter().zip(&b) {
            assert_close(&values(ga.array()), &values(gb.array()), 1e-12, "grad");
        }
    }
}

#[test]
fn conv_errors() {
    let t = |shape: &[usize]| Tensor::new(NDArray::zeros(shape, DType::F32).unwrap());
    let x = t(&[2, 5, 5, 3]);
    // Channel mismatch names both shapes.
    let e = x.conv(&t(&[3, 3, 4, 2]), 1, 0).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(e, Error::ShapeMismatch { op: "conv", .. }),
        "{e:?}"
    );
    assert!(
        msg.contains("[2, 5, 5, 3]") && msg.contains("[3, 3, 4, 2]") && msg.contains("Cin"),
        "{msg}"
    );
    // Wrong ranks.
    let e = t(&[5, 5, 3]).conv(&t(&[3, 3, 3, 2]), 1, 0).unwrap_err();
    assert!(
        e.to_string().contains("rank 4 (N, H, W, Cin), got rank 3"),
        "{e}"
    );
    let e = x.conv(&t(&[3, 3, 3]), 1, 0).unwrap_err();
    assert!(
        e.to_string().contains("(kh, kw, Cin, Cout), got rank 3"),
        "{e}"
    );
    // Kernel bigger than the padded input.
    let e = x.conv(&t(&[8, 3, 3, 2]), 1, 1).unwrap_err();
    assert!(
        matches!(e, Error::InvalidArgument { op: "conv", .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("bigger than the input"), "{e}");
    assert!(x.conv(&t(&[7, 3, 3, 2]), 1, 1).is_ok());
    // Stride 0, an empty kernel, mixed dtypes.
    let e = x.conv(&t(&[3, 3, 3, 2]), 0, 0).unwrap_err();
    assert!(e.to_string().contains("stride must be at least 1"), "{e}");
    assert!(x.conv(&t(&[0, 3, 3, 2]), 1, 0).is_err());
    let e = x.conv(&t(&[3, 3, 3, 2]), 1, usize::MAX).unwrap_err();
    assert!(e.to_string().contains("padding"), "{e}");
    let w64 = Tensor::new(NDArray::zeros(&[3, 3, 3, 2], DType::F64).unwrap());
    let e = x.conv(&w64, 1, 0).unwrap_err();
    assert!(
        matches!(e, Error::DTypeMismatch { op: "conv", .. }),
        "{e:?}"
    );
}
