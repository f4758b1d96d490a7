//! `Tensor::max_pool2d` (the fused kernels behind `MaxPool2d`): output and input gradient
//! against per-window loops over `Vec<f64>` (ties sharing the gradient), tiling, cropped,
//! overlapping and gapped windows, the threaded path, strided inputs, f32; central
//! differences; second order through `create_graph` against the composite layer; bad inputs.

use quill::nn::MaxPool2d;
use quill::tensor::{grad, gradcheck, set_grad_enabled, BackwardOptions, GradcheckOptions, Tensor};
use quill::{s, DType, Error, NDArray};
use quill_test_support::{assert_close_values, f64s};

type Pair = (usize, usize);

/// Window maxima and the gradient of `sum(y * gy)`: each window's `gy` split between the
/// elements equal to its maximum.
fn naive(x: &[f64], xs: [usize; 4], k: Pair, st: Pair, gy: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let [n, c, h, w] = xs;
    let (ho, wo) = ((h - k.0) / st.0 + 1, (w - k.1) / st.1 + 1);
    let mut y = Vec::new();
    let mut dx = vec![0.0; x.len()];
    for p in 0..n * c {
        for a in 0..ho {
            for b in 0..wo {
                let idx = |i: usize, j: usize| (p * h + a * st.0 + i) * w + b * st.1 + j;
                let mut m = f64::NEG_INFINITY;
                for i in 0..k.0 {
                    for j in 0..k.1 {
                        m = m.max(x[idx(i, j)]);
                    }
                }
                let g = gy[y.len()];
                let ties = (0..k.0)
                    .flat_map(|i| (0..k.1).map(move |j| (i, j)))
                    .filter(|&(i, j)| x[idx(i, j)] == m)
                    .count();
                for i in 0..k.0 {
                    for j in 0..k.1 {
                        if x[idx(i, j)] == m {
                            dx[idx(i, j)] += g / ties as f64;
                        }
                    }
                }
                y.push(m);
            }
        }
    }
    (y, dx)
}

/// Values rounded to a coarse grid so that windows hold ties.
fn tied(shape: &[usize], seed: u64) -> NDArray {
    let r = NDArray::randn(shape, seed, DType::F64).unwrap();
    let v: Vec<f64> = f64s(&r).iter().map(|x| (x * 2.0).round()).collect();
    NDArray::from_vec(v, shape).unwrap()
}

fn check(xs: [usize; 4], k: Pair, st: Pair, x: NDArray, dtype: DType, ctx: &str) {
    let (h, w) = (xs[2], xs[3]);
    let ys = [xs[0], xs[1], (h - k.0) / st.0 + 1, (w - k.1) / st.1 + 1];
    let gv = NDArray::randn(&ys, 9, DType::F64).unwrap();
    let (y_ref, dx_ref) = naive(&f64s(&x), xs, k, st, &f64s(&gv));
    let xt = Tensor::from_array(x.astype(dtype).unwrap(), true).unwrap();
    let y = xt.max_pool2d(k, st).unwrap();
    assert_eq!(y.shape(), &ys, "{ctx}");
    assert_eq!(y.dtype(), dtype, "{ctx}");
    y.backward_with(&Tensor::new(gv.astype(dtype).unwrap()))
        .unwrap();
    let tol = if dtype == DType::F64 { 1e-12 } else { 1e-5 };
    assert_close_values(&f64s(y.array()), &y_ref, tol, &format!("{ctx}: y"));
    let gx = xt.grad().unwrap();
    assert_close_values(&f64s(gx.array()), &dx_ref, tol, &format!("{ctx}: dx"));
}

#[test]
fn matches_window_loops_with_ties() {
    let cases: &[(Pair, Pair, usize, usize)] = &[
        ((2, 2), (2, 2), 8, 6),
        ((2, 2), (2, 2), 7, 9),
        ((3, 3), (2, 2), 7, 8),
        ((3, 2), (1, 2), 6, 7),
        ((2, 2), (3, 3), 8, 8),
        ((3, 3), (3, 3), 9, 11),
        ((2, 3), (2, 3), 7, 8),
        ((1, 1), (1, 1), 1, 1),
        ((1, 3), (1, 1), 1, 5),
        // 2x2 rows of 1, 16, 35 (16 + 16 + 3) and 32 outputs, odd heights and widths.
        ((2, 2), (2, 2), 2, 2),
        ((2, 2), (2, 2), 5, 33),
        ((2, 2), (2, 2), 3, 70),
        ((2, 2), (2, 2), 4, 65),
    ];
    for (i, &(k, st, h, w)) in cases.iter().enumerate() {
        let xs = [2, 3, h, w];
        let x = tied(&xs, 10 + i as u64);
        for dtype in [DType::F64, DType::F32] {
            check(
                xs,
                k,
                st,
                x.clone(),
                dtype,
                &format!("{k:?} {st:?} {h}x{w} {dtype}"),
            );
        }
    }
    // Large enough to split the planes across threads.
    let xs = [16, 32, 28, 28];
    check(xs, (2, 2), (2, 2), tied(&xs, 3), DType::F32, "threaded");
}

/// A NaN in a window wins the forward (as `max` does) and the window passes no gradient back
/// (no element equals NaN), in the tiling (2x2 and 3x3) and the overlapping paths; the other
/// windows are untouched by it.
#[test]
fn nan_windows() {
    for (k, st) in [((2, 2), (2, 2)), ((3, 3), (3, 3)), ((3, 3), (1, 1))] {
        for dtype in [DType::F32, DType::F64] {
            let xs = [1, 2, 6, 6];
            let base = tied(&xs, 31);
            let mut v = f64s(&base);
            // Channel 0, input (1, 1): in window (0, 0) of every case.
            v[6 + 1] = f64::NAN;
            let x = Tensor::from_array(
                NDArray::from_vec(v.clone(), &xs)
                    .unwrap()
                    .astype(dtype)
                    .unwrap(),
                true,
            )
            .unwrap();
            let y = x.max_pool2d(k, st).unwrap();
            let ys = y.shape().to_vec();
            let gy = NDArray::randn(&ys, 7, DType::F64).unwrap();
            y.backward_with(&Tensor::new(gy.astype(dtype).unwrap()))
                .unwrap();
            let (yv, gx) = (f64s(y.array()), f64s(x.grad().unwrap().array()));
            assert!(yv[0].is_nan(), "{k:?} {dtype}: window (0, 0) is NaN");
            assert!(
                gx[7] == 0.0 && gx[0] == 0.0,
                "{k:?} {dtype}: no gradient from the NaN window"
            );
            // Channel 1 has no NaN: it matches the loops exactly.
            let plane = 36;
            let x1 = v[plane..].to_vec();
            let g1 = f64s(&gy)[ys[2] * ys[3]..].to_vec();
            let (y_ref, dx_ref) = naive(&x1, [1, 1, 6, 6], k, st, &g1);
            let tol = if dtype == DType::F64 { 1e-12 } else { 1e-5 };
            assert_close_values(&yv[ys[2] * ys[3]..], &y_ref, tol, "channel 1 y");
            assert_close_values(&gx[plane..], &dx_ref, tol, "channel 1 dx");
        }
    }
}

#[test]
fn strided_inputs() {
    let base = tied(&[2, 6, 3, 14], 21);
    // (N, H, C, 2W) permuted and stepped; a negative-step view; an offset window.
    let views = [
        base.permute(&[0, 2, 1, 3])
            .unwrap()
            .slice(&s![.., .., .., ..;2])
            .unwrap(),
        base.slice(&s![.., .., .., ..;-1]).unwrap(),
        base.slice(&s![1.., 2..5, .., 3..12]).unwrap(),
    ];
    for (i, v) in views.iter().enumerate() {
        assert!(!v.is_contiguous());
        let xs = [v.shape()[0], v.shape()[1], v.shape()[2], v.shape()[3]];
        check(
            xs,
            (2, 2),
            (1, 2),
            v.clone(),
            DType::F64,
            &format!("view {i}"),
        );
    }
}

#[test]
fn gradcheck_and_second_order() {
    // Distinct values: central differences see no ties.
    let x =
        Tensor::from_array(NDArray::randn(&[2, 2, 5, 6], 4, DType::F64).unwrap(), true).unwrap();
    let rep = gradcheck(
        |v| v[0].max_pool2d((2, 3), (1, 2)),
        std::slice::from_ref(&x),
        GradcheckOptions::default(),
    )
    .unwrap();
    assert!(rep.passed, "{rep}");
    // d/dx <d(sum(pool(x)^2 * r))/dx, s>: through the fused and the composite layers.
    let r = Tensor::new(NDArray::randn(&[2, 2, 4, 2], 5, DType::F64).unwrap());
    let s_ = Tensor::new(NDArray::randn(&[2, 2, 5, 6], 6, DType::F64).unwrap());
    let second = |f: &dyn Fn(&Tensor) -> quill::Result<Tensor>| {
        let _m = set_grad_enabled(true);
        let y = f(&x).unwrap();
        let l = y
            .mul(&y)
            .unwrap()
            .mul(&r)
            .unwrap()
            .sum(None, false)
            .unwrap();
        let opts = BackwardOptions {
            retain_graph: true,
            create_graph: true,
            overwrite_grad: false,
        };
        let g = grad(&l, std::slice::from_ref(&x), None, opts).unwrap();
        let h = g[0].mul(&s_).unwrap().sum(None, false).unwrap();
        let gg = grad(
            &h,
            std::slice::from_ref(&x),
            None,
            BackwardOptions::default(),
        )
        .unwrap();
        f64s(gg[0].array())
    };
    let fast = second(&|x| x.max_pool2d((2, 3), (1, 2)));
    let composite = second(&|x| MaxPool2d::functional_composite(x, (2, 3), (1, 2)));
    assert!(fast.iter().any(|v| v.abs() > 1e-6), "the check can fail");
    assert_close_values(&fast, &composite, 1e-12, "second order");
}

#[test]
fn bad_inputs_are_typed_errors() {
    let x = Tensor::zeros(&[1, 2, 4, 4], DType::F32).unwrap();
    assert!(matches!(
        x.max_pool2d((0, 2), (2, 2)).unwrap_err(),
        Error::InvalidArgument {
            op: "max_pool2d",
            ..
        }
    ));
    assert!(x.max_pool2d((2, 2), (2, 0)).is_err());
    let e = x.max_pool2d((5, 2), (1, 1)).unwrap_err();
    assert!(e.to_string().contains("[1, 2, 4, 4]"), "{e}");
    assert!(Tensor::zeros(&[2, 4, 4], DType::F32)
        .unwrap()
        .max_pool2d((2, 2), (2, 2))
        .is_err());
    let e = Tensor::zeros(&[1, 2, 4, 4], DType::I64)
        .unwrap()
        .max_pool2d((2, 2), (2, 2))
        .unwrap_err();
    assert!(e.to_string().contains("floating-point"), "{e}");
    // The backward kernel checks the shapes it is given.
    let xa = NDArray::zeros(&[1, 2, 4, 4], DType::F32).unwrap();
    let y = NDArray::zeros(&[1, 2, 2, 2], DType::F32).unwrap();
    let bad = NDArray::zeros(&[1, 2, 3, 2], DType::F32).unwrap();
    let e = xa
        .max_pool2d_backward(&y, &bad, (2, 2), (2, 2))
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                op: "max_pool2d_backward",
                ..
            }
        ),
        "{e:?}"
    );
    // The layer names itself.
    let e = MaxPool2d::functional(&x, 5, 1).unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidArgument {
                op: "MaxPool2d",
                ..
            }
        ),
        "{e:?}"
    );
}
