//! Reductions against a naive reference: each output's elements are gathered by walking the
//! input's multi-indices in C order, and the op is evaluated in f64 (then rounded once to the
//! result dtype). Inputs: contiguous, permuted, stepped, reversed, broadcast, offset, random
//! strided layouts, empty, rank 0 to 8, every dtype; plus special values, dtype rules, errors,
//! and the accuracy of long f32 sums.

use quill::{s, DType, Element, Error, NDArray, Scalar};
use quill_test_support::{
    random_shape, random_values, strided_from, unravel, with_dtype, Prng, ALL_DTYPES,
};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Sum,
    Prod,
    Max,
    Min,
    Any,
    All,
    Mean,
    Var(usize),
    Std(usize),
    Lse,
    ArgMax,
    ArgMin,
}

const OPS: [Op; 13] = [
    Op::Sum,
    Op::Prod,
    Op::Max,
    Op::Min,
    Op::Any,
    Op::All,
    Op::Mean,
    Op::Var(0),
    Op::Var(1),
    Op::Std(0),
    Op::Lse,
    Op::ArgMax,
    Op::ArgMin,
];

fn float_or_f64(d: DType) -> DType {
    if d.is_float() {
        d
    } else {
        DType::F64
    }
}

fn result_dtype(op: Op, d: DType) -> DType {
    match op {
        // NumPy on 64-bit Linux: unsigned sums are uint64, bool and signed ones int64.
        Op::Sum | Op::Prod if d.is_unsigned_int() => DType::U64,
        Op::Sum | Op::Prod if !d.is_float() => DType::I64,
        Op::Sum | Op::Prod | Op::Max | Op::Min => d,
        Op::Any | Op::All => DType::Bool,
        Op::ArgMax | Op::ArgMin => DType::I64,
        _ => float_or_f64(d),
    }
}

fn apply(a: &NDArray, op: Op, axes: Option<&[isize]>, keep: bool) -> quill::Result<NDArray> {
    let one = |axes: Option<&[isize]>| axes.map(|x| x[0]);
    match op {
        Op::Sum => a.sum(axes, keep),
        Op::Prod => a.prod(axes, keep),
        Op::Max => a.max(axes, keep),
        Op::Min => a.min(axes, keep),
        Op::Any => a.any(axes, keep),
        Op::All => a.all(axes, keep),
        Op::Mean => a.mean(axes, keep),
        Op::Var(d) => a.var(axes, d, keep),
        Op::Std(d) => a.std(axes, d, keep),
        Op::Lse => a.logsumexp(axes, keep),
        Op::ArgMax => a.argmax(one(axes), keep),
        Op::ArgMin => a.argmin(one(axes), keep),
    }
}

/// The op over one output's elements (in C order of the reduced axes).
fn naive(op: Op, xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let nan = xs.iter().position(|x| x.is_nan());
    let mean = xs.iter().sum::<f64>() / n;
    let max = nan.map_or(xs.iter().copied().fold(f64::NEG_INFINITY, f64::max), |_| {
        f64::NAN
    });
    let min = nan.map_or(xs.iter().copied().fold(f64::INFINITY, f64::min), |_| {
        f64::NAN
    });
    let arg = |best: f64| nan.unwrap_or_else(|| xs.iter().position(|&x| x == best).unwrap());
    match op {
        Op::Sum => xs.iter().sum(),
        Op::Prod => xs.iter().product(),
        Op::Max => max,
        Op::Min => min,
        Op::Any => xs.iter().any(|&x| x != 0.0) as u8 as f64,
        Op::All => xs.iter().all(|&x| x != 0.0) as u8 as f64,
        Op::Mean => mean,
        Op::Var(d) | Op::Std(d) => {
            let v =
                xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - d as f64).max(0.0);
            if matches!(op, Op::Std(_)) {
                v.sqrt()
            } else {
                v
            }
        }
        Op::Lse if !max.is_finite() => max,
        Op::Lse => max + xs.iter().map(|x| (x - max).exp()).sum::<f64>().ln(),
        Op::ArgMax => arg(max) as f64,
        Op::ArgMin => arg(min) as f64,
    }
}

/// Output shape (without keepdims) and, per output, its elements in order.
fn groups(shape: &[usize], vals: &[f64], axes: &[usize]) -> (Vec<usize>, Vec<Vec<f64>>) {
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
    let out_shape: Vec<usize> = kept.iter().map(|&d| shape[d]).collect();
    let mut g = vec![Vec::new(); out_shape.iter().product()];
    for (k, &v) in vals.iter().enumerate() {
        let idx = unravel(shape, k);
        let o = kept.iter().fold(0, |acc, &d| acc * shape[d] + idx[d]);
        g[o].push(v);
    }
    (out_shape, g)
}

fn as_f64(a: &NDArray) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

fn tol(op: Op, d: DType) -> f64 {
    let exact = matches!(
        op,
        Op::Sum | Op::Prod | Op::Max | Op::Min | Op::Any | Op::All | Op::ArgMax | Op::ArgMin
    );
    match float_or_f64(d) {
        _ if exact => 0.0,
        DType::F32 => 1e-5,
        DType::F16 => 4e-3,
        DType::BF16 => 2e-2,
        _ => 1e-12,
    }
}

fn close(got: f64, want: f64, tol: f64) -> bool {
    (got.is_nan() && want.is_nan()) || got == want || (got - want).abs() <= tol * (1.0 + want.abs())
}

/// Checks `op` over `axes` (None = all) of `a`, whose C-order values are `vals`.
fn check(a: &NDArray, vals: &[f64], op: Op, axes: Option<&[isize]>, keep: bool, ctx: &str) {
    let ctx = format!(
        "{ctx}: {op:?} axes {axes:?} keepdims {keep} of {:?} {:?} strides {:?}",
        a.dtype(),
        a.shape(),
        a.strides()
    );
    let nd = a.ndim();
    let ax: Vec<usize> = match axes {
        None => (0..nd).collect(),
        Some(x) => x
            .iter()
            .map(|&i| {
                if i < 0 {
                    (i + nd as isize) as usize
                } else {
                    i as usize
                }
            })
            .collect(),
    };
    let (out_shape, g) = groups(a.shape(), vals, &ax);
    let no_identity = matches!(op, Op::Max | Op::Min | Op::ArgMax | Op::ArgMin);
    let res = apply(a, op, axes, keep);
    if no_identity && ax.iter().any(|&d| a.shape()[d] == 0) {
        let e = res.expect_err(&ctx).to_string();
        assert!(
            e.contains("zero-size") && e.contains(&format!("{:?}", a.shape())),
            "{ctx}: {e}"
        );
        return;
    }
    let r = res.unwrap_or_else(|e| panic!("{ctx}: {e}"));
    let rd = result_dtype(op, a.dtype());
    assert_eq!(r.dtype(), rd, "{ctx}: dtype");
    let want_shape: Vec<usize> = if keep {
        (0..nd)
            .map(|d| if ax.contains(&d) { 1 } else { a.shape()[d] })
            .collect()
    } else {
        out_shape
    };
    assert_eq!(r.shape(), want_shape.as_slice(), "{ctx}: shape");
    let got = as_f64(&r);
    let t = tol(op, a.dtype());
    for (o, (xs, &gv)) in g.iter().zip(&got).enumerate() {
        let w = naive(op, xs);
        let w = with_dtype!(rd, T => T::from_f64(w).to_f64());
        assert!(
            close(gv, w, t),
            "{ctx}: output {o}: got {gv}, want {w} (elements {xs:?})"
        );
    }
}

/// Values on which every op is exact or well-conditioned: `small` keeps products in range.
fn data<T: Element>(rng: &mut Prng, n: usize, small: bool) -> Vec<T> {
    if !small {
        return random_values::<T>(rng, n);
    }
    (0..n)
        .map(|_| match T::DTYPE {
            DType::Bool => T::from_scalar(Scalar::B(rng.chance(0.7))),
            d if d.is_unsigned_int() => T::from_scalar(Scalar::I(rng.below(3) as i128)),
            d if d.is_float() => T::from_f64([-2.0, -1.0, -0.5, 0.5, 1.0, 1.5, 2.0][rng.below(7)]),
            _ => T::from_scalar(Scalar::I(rng.int(-2, 2) as i128)),
        })
        .collect()
}

fn all_subsets(nd: usize) -> Vec<Vec<isize>> {
    (0..1usize << nd)
        .map(|m| (0..nd as isize).filter(|&d| m & (1 << d) != 0).collect())
        .collect()
}

/// Every op, every axis subset (and None, and a negative form), keepdims on and off.
fn check_everything(a: &NDArray, vals: &[f64], small: bool, ctx: &str) {
    let subsets = all_subsets(a.ndim());
    for op in OPS {
        if matches!(op, Op::Prod) != small && !matches!(op, Op::Sum) {
            continue;
        }
        for keep in [false, true] {
            if matches!(op, Op::ArgMax | Op::ArgMin) {
                check(a, vals, op, None, keep, ctx);
                for d in 0..a.ndim() as isize {
                    check(a, vals, op, Some(&[d]), keep, ctx);
                    check(a, vals, op, Some(&[d - a.ndim() as isize]), keep, ctx);
                }
                continue;
            }
            check(a, vals, op, None, keep, ctx);
            for sub in &subsets {
                check(a, vals, op, Some(sub), keep, ctx);
                let neg: Vec<isize> = sub.iter().rev().map(|&d| d - a.ndim() as isize).collect();
                check(a, vals, op, Some(&neg), keep, ctx);
            }
        }
    }
}

#[test]
fn every_axis_subset_every_dtype_rank4() {
    let mut rng = Prng::new(1);
    let shape = [3, 1, 4, 5];
    for dt in ALL_DTYPES {
        for small in [false, true] {
            with_dtype!(dt, T => {
                let v: Vec<T> = data(&mut rng, 60, small);
                let vals: Vec<f64> = v.iter().map(|x| x.to_f64()).collect();
                let a = NDArray::from_vec(v.clone(), &shape).unwrap();
                check_everything(&a, &vals, small, "contiguous");
                let b = strided_from(&mut rng, &v, &shape, T::zero());
                check_everything(&b, &vals, small, "strided");
            });
        }
    }
}

#[test]
fn named_views() {
    let mut rng = Prng::new(2);
    let v: Vec<f32> = data(&mut rng, 6 * 7 * 8, false);
    let base = NDArray::from_vec(v, &[6, 7, 8]).unwrap();
    let views = [
        ("permuted", base.permute(&[2, 0, 1]).unwrap()),
        ("stepped", base.slice(&s![..;2, 1..;3, ..]).unwrap()),
        ("negative step", base.slice(&s![..;-1, .., ..;-3]).unwrap()),
        ("offset", base.slice(&s![1.., 2..5, 3..]).unwrap()),
        (
            "flipped permuted",
            base.flip(&[1]).unwrap().permute(&[1, 2, 0]).unwrap(),
        ),
        (
            "broadcast",
            base.slice(&s![.., 0..1, ..])
                .unwrap()
                .broadcast_to(&[6, 5, 8])
                .unwrap(),
        ),
        (
            "broadcast inner",
            base.slice(&s![.., .., 2..3])
                .unwrap()
                .broadcast_to(&[6, 7, 9])
                .unwrap(),
        ),
        ("empty", base.slice(&s![.., 3..3, ..]).unwrap()),
    ];
    for (name, a) in views {
        let vals = as_f64(&a);
        check_everything(&a, &vals, false, name);
    }
    // Rank 0 and rank 8.
    let r0 = NDArray::scalar(2.5f64);
    check_everything(&r0, &[2.5], true, "rank 0");
    let v: Vec<i32> = data(&mut rng, 64, true);
    let vals: Vec<f64> = v.iter().map(|&x| x as f64).collect();
    let r8 = NDArray::from_vec(v.clone(), &[2, 1, 2, 2, 1, 2, 2, 2]).unwrap();
    check_everything(&r8, &vals, true, "rank 8");
    let r8s = strided_from(&mut rng, &v, &[2, 1, 2, 2, 1, 2, 2, 2], 0);
    check_everything(&r8s, &vals, true, "rank 8 strided");
}

#[test]
fn random_shapes_and_layouts() {
    let mut rng = Prng::new(3);
    for it in 0..120 {
        let shape = random_shape(&mut rng, 6, 5, 300);
        let dt = [DType::F32, DType::F64, DType::I32, DType::BF16, DType::Bool][it % 5];
        with_dtype!(dt, T => {
            let small = rng.chance(0.3);
            let v: Vec<T> = data(&mut rng, shape.iter().product(), small);
            let vals: Vec<f64> = v.iter().map(|x| x.to_f64()).collect();
            let a = strided_from(&mut rng, &v, &shape, T::zero());
            let nd = shape.len();
            let sub: Vec<isize> = (0..nd as isize).filter(|_| rng.chance(0.5)).collect();
            for op in OPS {
                if op == Op::Prod && !small {
                    continue;
                }
                let keep = rng.chance(0.5);
                if matches!(op, Op::ArgMax | Op::ArgMin) {
                    let ax = (nd > 0 && rng.chance(0.7)).then(|| vec![rng.below(nd) as isize]);
                    check(&a, &vals, op, ax.as_deref(), keep, &format!("random {it}"));
                } else {
                    check(&a, &vals, op, Some(&sub), keep, &format!("random {it}"));
                }
            }
        });
    }
}

/// Sizes past the grain and the block lengths, so every loop shape runs threaded: inner runs
/// (last axis), outer rows (first axis, several column chunks), split ranges (few outputs),
/// and the transposed forms.
#[test]
fn large_threaded_loops() {
    let mut rng = Prng::new(4);
    let (m, n) = (300, 2500);
    let v: Vec<f32> = data(&mut rng, m * n, false);
    let vals: Vec<f64> = v.iter().map(|&x| x as f64).collect();
    let a = NDArray::from_vec(v.clone(), &[m, n]).unwrap();
    for op in [Op::Sum, Op::Max, Op::Mean, Op::Var(1), Op::ArgMin, Op::Lse] {
        for ax in [None, Some(&[0isize][..]), Some(&[1][..])] {
            check(&a, &vals, op, ax, false, "large");
        }
    }
    let t = a.transpose(0, 1).unwrap();
    let tvals = as_f64(&t);
    for op in [Op::Sum, Op::ArgMax, Op::Min] {
        for ax in [Some(&[0isize][..]), Some(&[1][..])] {
            check(&t, &tvals, op, ax, false, "large transposed");
        }
    }
    // Few outputs over long rows: the reduced range is split into chunks.
    let w = NDArray::from_vec(v, &[3, m * n / 3]).unwrap();
    for op in [Op::Sum, Op::Max, Op::ArgMax] {
        check(&w, &vals, op, Some(&[1]), false, "wide");
    }
}

#[test]
fn f32_sum_of_ten_million_is_accurate() {
    let n = 10_000_000;
    let mut rng = Prng::new(5);
    let v: Vec<f32> = (0..n).map(|_| rng.unit() as f32).collect();
    let exact: f64 = v.iter().map(|&x| x as f64).sum();
    let a = NDArray::from_vec(v, &[n]).unwrap();
    let got = a.sum(None, false).unwrap().item::<f32>().unwrap() as f64;
    let rel = ((got - exact) / exact).abs();
    assert!(rel < 1e-6, "rel error {rel:e}: got {got}, want {exact}");
    // 0.1 everywhere, and down the rows of a tall matrix (the outer loop's accumulators).
    let tenth = NDArray::full(&[n], 0.1, DType::F32).unwrap();
    let want = n as f64 * 0.1f32 as f64;
    let got = tenth.sum(None, false).unwrap().item::<f64>().unwrap();
    assert!(((got - want) / want).abs() < 1e-6, "0.1 x 1e7: got {got}");
    let tall = tenth.reshape(&[n as isize / 16, 16]).unwrap();
    let cols = as_f64(&tall.sum(Some(&[0]), false).unwrap());
    let want = (n / 16) as f64 * 0.1f32 as f64;
    for c in cols {
        assert!(((c - want) / want).abs() < 1e-6, "column sum {c} vs {want}");
    }
}

#[test]
fn special_values() {
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    let a = NDArray::from_vec(vec![1.0, nan, 3.0, nan, 5.0, 5.0, -inf, 2.0], &[2, 4]).unwrap();
    let f = |r: quill::Result<NDArray>| as_f64(&r.unwrap());
    let m = f(a.max(Some(&[1]), false));
    assert!(m[0].is_nan() && m[1] == 5.0, "{m:?}");
    assert_eq!(f(a.max(Some(&[0]), false))[0], 5.0);
    assert!(f(a.min(Some(&[0]), false))[1].is_nan());
    assert_eq!(f(a.argmax(Some(1), false)), vec![1.0, 0.0]);
    assert_eq!(f(a.argmin(Some(1), false)), vec![1.0, 2.0]);
    assert_eq!(f(a.argmax(None, false)), vec![1.0]);
    assert!(f(a.sum(None, false))[0].is_nan());
    // Ties go to the first index, along any axis and flattened, also reversed.
    let t = NDArray::from_vec(vec![1i32, 7, 7, 0, 7, 0], &[2, 3]).unwrap();
    assert_eq!(f(t.argmax(None, false)), vec![1.0]);
    assert_eq!(f(t.argmax(Some(0), false)), vec![0.0, 0.0, 0.0]);
    assert_eq!(f(t.argmin(Some(1), false)), vec![0.0, 0.0]);
    let rev = t.flip(&[1]).unwrap();
    assert_eq!(f(rev.argmax(Some(1), false)), vec![0.0, 1.0]);
    // logsumexp: stable for large values, -inf and +inf and nan slices.
    let l = NDArray::from_vec(
        vec![1000.0f64, 1000.0, -inf as f64, -inf as f64, inf as f64, 0.0],
        &[3, 2],
    )
    .unwrap();
    let r = f(l.logsumexp(Some(&[1]), false));
    assert!((r[0] - (1000.0 + 2f64.ln())).abs() < 1e-9);
    assert_eq!(r[1], f64::NEG_INFINITY);
    assert_eq!(r[2], f64::INFINITY);
    let ln = NDArray::from_vec(vec![nan, 1.0], &[2]).unwrap();
    assert!(f(ln.logsumexp(None, false))[0].is_nan());
    // Signed zeros: a sum of -0.0 is -0.0; an empty sum is +0.0; any(-0.0) is false.
    let z = NDArray::from_vec(vec![-0.0f32, -0.0], &[2]).unwrap();
    assert!(z
        .sum(None, false)
        .unwrap()
        .item::<f32>()
        .unwrap()
        .is_sign_negative());
    let e = NDArray::zeros(&[0, 3], DType::F32).unwrap();
    let es = e.sum(None, false).unwrap().item::<f32>().unwrap();
    assert!(es == 0.0 && es.is_sign_positive());
    assert!(!z.any(None, false).unwrap().item::<bool>().unwrap());
    assert!(
        ln.all(None, false).unwrap().item::<bool>().unwrap(),
        "NaN is truthy"
    );
    // Empty reductions with an identity.
    assert_eq!(f(e.prod(Some(&[0]), false)), vec![1.0; 3]);
    assert_eq!(f(e.all(Some(&[0]), false)), vec![1.0; 3]);
    assert_eq!(f(e.any(None, false)), vec![0.0]);
    assert!(f(e.mean(Some(&[0]), false)).iter().all(|x| x.is_nan()));
    assert_eq!(
        f(e.logsumexp(Some(&[0]), false)),
        vec![f64::NEG_INFINITY; 3]
    );
    assert_eq!(
        f(e.max(Some(&[1]), false)),
        Vec::<f64>::new(),
        "nothing reduced is empty"
    );
    // ddof >= n: inf for a positive sum of squares, nan for zero.
    let v = NDArray::from_vec(vec![1.0f64, 2.0], &[2]).unwrap();
    assert_eq!(f(v.var(None, 2, false)), vec![f64::INFINITY]);
    assert_eq!(f(v.var(None, 5, false)), vec![f64::INFINITY]);
    let c = NDArray::from_vec(vec![3.0f64], &[1]).unwrap();
    assert!(f(c.var(None, 1, false))[0].is_nan());
}

#[test]
fn dtype_rules() {
    for dt in ALL_DTYPES {
        let a = NDArray::ones(&[2, 3], dt).unwrap();
        for op in OPS {
            assert_eq!(
                apply(&a, op, None, false).unwrap().dtype(),
                result_dtype(op, dt),
                "{op:?} {dt:?}"
            );
        }
    }
    // Integer sums widen (no i32 overflow) and wrap in i64, as NumPy.
    let big = NDArray::full(&[4], i32::MAX, DType::I32).unwrap();
    assert_eq!(
        big.sum(None, false).unwrap().item::<i64>().unwrap(),
        4 * i32::MAX as i64
    );
    let u = NDArray::full(&[300], 255u8, DType::U8).unwrap();
    assert_eq!(
        u.sum(None, false).unwrap().item::<i64>().unwrap(),
        300 * 255
    );
    // f16 accumulates in f32: 4096 ones sum to 4096, which f16 holds, though 2049 + 1 = 2048 in f16.
    let h = NDArray::ones(&[4096], DType::F16).unwrap();
    assert_eq!(h.sum(None, false).unwrap().item::<f64>().unwrap(), 4096.0);
    assert_eq!(h.mean(None, false).unwrap().item::<f64>().unwrap(), 1.0);
}

#[test]
fn errors_name_op_axis_and_shape() {
    let a = NDArray::zeros(&[2, 3], DType::F32).unwrap();
    let e = a.sum(Some(&[2]), false).unwrap_err();
    assert!(
        matches!(
            e,
            Error::AxisOutOfRange {
                op: "sum",
                axis: 2,
                ndim: 2,
                ..
            }
        ),
        "{e}"
    );
    let e = a.mean(Some(&[-3]), false).unwrap_err();
    assert!(
        matches!(
            e,
            Error::AxisOutOfRange {
                op: "mean",
                axis: -3,
                ..
            }
        ),
        "{e}"
    );
    let e = a.max(Some(&[0, -2]), false).unwrap_err();
    assert!(matches!(e, Error::DuplicateAxis { op: "max", .. }), "{e}");
    let e = a.argmax(Some(5), false).unwrap_err();
    assert!(
        matches!(
            e,
            Error::AxisOutOfRange {
                op: "argmax",
                axis: 5,
                ..
            }
        ),
        "{e}"
    );
    assert!(NDArray::scalar(1.0f32).argmin(Some(0), false).is_err());
    let empty = NDArray::zeros(&[0, 0], DType::F32).unwrap();
    for (op, r) in [
        ("max", empty.max(Some(&[0]), false)),
        ("min", empty.min(None, false)),
        ("argmax", empty.argmax(None, false)),
        ("argmin", empty.argmin(Some(1), false)),
    ] {
        let msg = r.unwrap_err().to_string();
        assert!(msg.starts_with(op) && msg.contains("[0, 0]"), "{msg}");
    }
}
