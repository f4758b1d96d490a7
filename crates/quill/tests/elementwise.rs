//! Elementwise ops against a naive per-element reference (`UnaryOp::eval_f64` /
//! `BinaryOp::eval_f64` on values converted as NumPy converts them), on random shapes of rank 0
//! to 8 with random non-contiguous layouts (permuted, gapped, reversed, offset), broadcast
//! (stride 0) operands, size-0 and size-1 dims, every dtype pair; plus promotion, weak scalars,
//! special values, in-place forms, operators, `where_` and `clip`.

use quill::{s, BinaryOp, DType, Element, NDArray, Scalar, UnaryOp};
use quill_test_support::{naive_offsets, random_shape, strided_from, Prng};

/// Test values of `dtype` as f64: small integers for integer types (so that wrapping never
/// differs from the reference), a spread of floats with specials for float types.
fn values(rng: &mut Prng, dtype: DType, n: usize, small: bool) -> Vec<f64> {
    (0..n)
        .map(|_| match dtype {
            DType::Bool => rng.below(2) as f64,
            DType::U8 => rng.below(if small { 4 } else { 256 }) as f64,
            d if d.is_unsigned_int() => rng.below(if small { 4 } else { 1000 }) as f64,
            d if d.is_signed_int() => {
                rng.int(if small { 0 } else { -1000 }, if small { 3 } else { 1000 }) as f64
            }
            _ if small => rng.int(-3, 3) as f64 * 0.5,
            _ => match rng.below(40) {
                0 => f64::NAN,
                1 => f64::INFINITY,
                2 => f64::NEG_INFINITY,
                3 => -0.0,
                4 => 0.0,
                _ => (rng.unit() - 0.5) * 8.0,
            },
        })
        .collect()
}

/// An array of `dtype` with these C-order values (cast from f64) and a random strided layout.
fn strided(rng: &mut Prng, vals: &[f64], shape: &[usize], dtype: DType) -> NDArray {
    let a = NDArray::from_vec(vals.to_vec(), shape)
        .unwrap()
        .astype(dtype)
        .unwrap();
    let flat = a.reshape(&[-1]).unwrap();
    let b = quill_test_support::with_dtype!(dtype, T => {
        strided_from(rng, &flat.to_vec::<T>().unwrap(), shape, T::default())
    });
    assert_eq!(b.dtype(), dtype);
    b
}

/// The elements in C order as f64 (through the array's own `astype`, checked elsewhere).
fn as_f64(a: &NDArray) -> Vec<f64> {
    a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap()
}

/// `v` converted to `dtype` and back, as NumPy converts a value into an array of that dtype.
fn round_to(v: f64, dtype: DType) -> f64 {
    // An integral value into an integer dtype wraps, as integer arithmetic does (a float cast
    // would not: x86's -3e9 -> u32 is 2^31, where -3e9 wrapped is 1294967296).
    if dtype.is_int() && v.fract() == 0.0 && v.abs() < 1e30 {
        return quill_test_support::with_dtype!(dtype, T => T::from_scalar(Scalar::I(v as i128)).to_f64());
    }
    NDArray::full(&[], v, dtype)
        .unwrap()
        .astype(DType::F64)
        .unwrap()
        .item::<f64>()
        .unwrap()
}

/// Relative tolerance of a result computed in `dtype` against the exact value rounded to it.
fn tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-13,
        DType::F32 => 1e-6,
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        _ => 0.0,
    }
}

#[track_caller]
fn check_close(got: &[f64], want: &[f64], dtype: DType, ctx: &str) {
    check_close_scaled(got, want, dtype, 1.0, ctx)
}

#[track_caller]
fn check_close_scaled(got: &[f64], want: &[f64], dtype: DType, scale: f64, ctx: &str) {
    assert_eq!(got.len(), want.len(), "{ctx}: length");
    let tol = tolerance(dtype) * scale;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan())
            || g == w
            || (g - w).abs()
                <= tol
                    * w.abs()
                        .max(if dtype == DType::F64 { 1e-300 } else { 1e-30 });
        assert!(ok, "{ctx}: element {i}: got {g}, want {w}");
    }
}

#[test]
fn unary_ops_match_reference_on_strided_inputs() {
    let mut rng = Prng::new(1);
    for op in UnaryOp::ALL {
        for dtype in DType::ALL {
            let Ok(result) = op.result_dtype(dtype) else {
                let a = NDArray::zeros(&[2], dtype).unwrap();
                let e = a.unary(op).unwrap_err().to_string();
                assert!(e.contains(op.name()), "{e}");
                continue;
            };
            for _ in 0..6 {
                let shape = random_shape(&mut rng, 8, 4, 300);
                let n = shape.iter().product();
                let vals = values(&mut rng, dtype, n, false);
                let a = strided(&mut rng, &vals, &shape, dtype);
                let got = a.unary(op).unwrap();
                assert_eq!(got.dtype(), result, "{op:?} {dtype}");
                assert_eq!(got.shape(), &shape[..]);
                let compute = op.compute_dtype(dtype).unwrap();
                let want: Vec<f64> = as_f64(&a)
                    .iter()
                    .map(|&x| round_to(op.eval_f64(round_to(x, compute)), result))
                    .collect();
                // GELU in its far left tail (x near -10, reached by i16 inputs, which compute in
                // f32): the tanh form is x * sigmoid(2u), whose relative error is the absolute
                // error of 2u, a few ulps of |2u|; the exact form is x * erfc(z) / 2, where
                // rounding z = -x / sqrt 2 to f32 moves the result by 2 z^2 half-ulps. Both go
                // beyond the default 1e-6 in f32.
                let scale = if matches!(op, UnaryOp::Gelu | UnaryOp::GeluTanh) {
                    8.0
                } else {
                    1.0
                };
                check_close_scaled(
                    &as_f64(&got),
                    &want,
                    result,
                    scale,
                    &format!("{op:?} on {dtype} {shape:?}"),
                );
            }
        }
    }
}

/// A shape that broadcasts to `out`: some leading dims dropped, some dims set to 1.
fn broadcastable(rng: &mut Prng, out: &[usize]) -> Vec<usize> {
    let drop = rng.below(out.len() + 1);
    out[drop..]
        .iter()
        .map(|&d| if rng.chance(0.3) { 1 } else { d })
        .collect()
}

/// `op(x, y)` as NumPy computes it in `compute`: `eval_f64`, except where NumPy's integers
/// differ from the f64 reference: `x % 0` and `x // 0` are 0, and a shift is by the compute
/// type's own width (by the width or more, or negative, only the sign is left).
fn naive_binary(op: BinaryOp, compute: DType, result: DType, x: f64, y: f64) -> f64 {
    let (x, y) = (round_to(x, compute), round_to(y, compute));
    if matches!(op, BinaryOp::Remainder | BinaryOp::FloorDiv) && !compute.is_float() && y == 0.0 {
        return 0.0;
    }
    if matches!(op, BinaryOp::Shl | BinaryOp::Shr) {
        let bits = 8.0 * compute.size_in_bytes() as f64;
        if !(0.0..bits).contains(&y) {
            return if op == BinaryOp::Shr && x < 0.0 {
                -1.0
            } else {
                0.0
            };
        }
        // round_to wraps an integral value to the width.
        return round_to(op.eval_f64(x, y) as i64 as f64, compute);
    }
    round_to(op.eval_f64(x, y), result)
}

#[test]
fn binary_ops_match_reference_for_every_dtype_pair() {
    let mut rng = Prng::new(2);
    for op in BinaryOp::ALL {
        for da in DType::ALL {
            for db in DType::ALL {
                let Ok(result) = op.result_dtype(da, db) else {
                    let (a, b) = (
                        NDArray::zeros(&[2], da).unwrap(),
                        NDArray::zeros(&[2], db).unwrap(),
                    );
                    let e = a.binary(op, &b).unwrap_err().to_string();
                    assert!(e.contains(op.name()) && e.contains(da.name()), "{e}");
                    continue;
                };
                let compute = op.compute_dtype(da, db).unwrap();
                for _ in 0..3 {
                    let out = random_shape(&mut rng, 6, 4, 200);
                    let (sa, sb) = (broadcastable(&mut rng, &out), broadcastable(&mut rng, &out));
                    let small = op == BinaryOp::Pow;
                    let va = values(&mut rng, da, sa.iter().product(), small);
                    let vb = values(&mut rng, db, sb.iter().product(), small);
                    let a = strided(&mut rng, &va, &sa, da);
                    let b = strided(&mut rng, &vb, &sb, db);
                    let got = a.binary(op, &b).unwrap();
                    assert_eq!(got.dtype(), result, "{op:?} {da} {db}");
                    let full = got.shape().to_vec();
                    let xa = as_f64(&a.broadcast_to(&full).unwrap());
                    let xb = as_f64(&b.broadcast_to(&full).unwrap());
                    let want: Vec<f64> = xa
                        .iter()
                        .zip(&xb)
                        .map(|(&x, &y)| naive_binary(op, compute, result, x, y))
                        .collect();
                    let ctx = format!("{op:?} {da}{sa:?} {db}{sb:?}");
                    check_close(&as_f64(&got), &want, result, &ctx);
                }
            }
        }
    }
}

#[test]
fn broadcast_operands_and_large_threaded_inputs() {
    // Row and column broadcast, a stride-0 view, a negative-step view, and sizes past the
    // threading grain so that runs start mid-row in each chunk.
    let a = NDArray::arange(0.0, 300.0 * 701.0, 1.0, DType::F32)
        .unwrap()
        .reshape(&[300, 701])
        .unwrap();
    let row = NDArray::arange(0.0, 701.0, 1.0, DType::F32).unwrap();
    let col = NDArray::arange(0.0, 300.0, 1.0, DType::F32)
        .unwrap()
        .reshape(&[300, 1])
        .unwrap();
    let rev = a.slice(&s![..;-1, ..]).unwrap();
    let t = NDArray::arange(0.0, 701.0 * 300.0, 1.0, DType::F32)
        .unwrap()
        .reshape(&[701, 300])
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    let cases: Vec<(NDArray, NDArray)> = vec![
        (a.clone(), row.clone()),
        (a.clone(), col.clone()),
        (col.clone(), row.clone()),
        (rev.clone(), t.clone()),
        (t.clone(), row.broadcast_to(&[300, 701]).unwrap()),
    ];
    for (x, y) in cases {
        let got = x.add(&y).unwrap().mul(&y).unwrap();
        let shape = got.shape().to_vec();
        let (vx, vy) = (
            as_f64(&x.broadcast_to(&shape).unwrap()),
            as_f64(&y.broadcast_to(&shape).unwrap()),
        );
        let want: Vec<f64> = vx
            .iter()
            .zip(&vy)
            .map(|(p, q)| ((p + q) as f32 * *q as f32) as f64)
            .collect();
        assert_eq!(as_f64(&got), want, "{:?} + {:?}", x.shape(), y.shape());
    }
}

#[test]
fn numpy_promotion_table() {
    use DType::*;
    // From NumPy 2.4 `np.result_type`; bf16 rows follow ml_dtypes.
    let table = [
        (Bool, U8, U8),
        (U8, I32, I32),
        (U8, I64, I64),
        (I32, I64, I64),
        (U8, F16, F16),
        (I32, F16, F64),
        (I32, F32, F64),
        (I64, F32, F64),
        (U8, F32, F32),
        (F16, F32, F32),
        (F32, F64, F64),
        (I64, F64, F64),
        (Bool, F16, F16),
        (F16, BF16, F32),
        (U8, BF16, BF16),
        (BF16, F32, F32),
        (I32, BF16, F64),
    ];
    for (a, b, want) in table {
        let x = NDArray::ones(&[2], a).unwrap();
        let y = NDArray::ones(&[2], b).unwrap();
        assert_eq!(x.add(&y).unwrap().dtype(), want, "{a} + {b}");
        assert_eq!(y.add(&x).unwrap().dtype(), want, "{b} + {a}");
    }
    let i = NDArray::ones(&[2], I32).unwrap();
    assert_eq!(i.div(&i).unwrap().dtype(), F64, "true division of ints");
    assert_eq!(i.lt(&i).unwrap().dtype(), Bool);
    let h = NDArray::ones(&[2], F16).unwrap();
    assert_eq!(h.div(&h).unwrap().dtype(), F16);
    assert_eq!(i.exp().unwrap().dtype(), F64);
    assert_eq!(i.abs().unwrap().dtype(), I32);
}

#[test]
fn weak_scalars_follow_nep50() {
    let f = NDArray::ones(&[3], DType::F32).unwrap();
    assert_eq!(f.mul_scalar(2.0).unwrap().dtype(), DType::F32);
    assert_eq!(f.add_scalar(2i64).unwrap().dtype(), DType::F32);
    let u = NDArray::full(&[3], 250, DType::U8).unwrap();
    let v = u.add_scalar(10).unwrap();
    assert_eq!(v.dtype(), DType::U8);
    assert_eq!(v.to_vec::<u8>().unwrap(), vec![4; 3], "u8 wraps");
    let e = u.add_scalar(300).unwrap_err().to_string();
    assert!(e.contains("300") && e.contains("u8"), "{e}");
    assert_eq!(
        u.lt_scalar(300).unwrap().to_vec::<bool>().unwrap(),
        vec![true; 3]
    );
    let i = NDArray::ones(&[3], DType::I32).unwrap();
    assert_eq!(i.add_scalar(1.5).unwrap().dtype(), DType::F64);
    let b = NDArray::ones(&[3], DType::Bool).unwrap();
    assert_eq!(b.add_scalar(1).unwrap().dtype(), DType::I64);
    assert_eq!(b.add_scalar(true).unwrap().dtype(), DType::Bool);
    let r = f.rsub_scalar(10.0).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), vec![9.0; 3]);
    let p = f.mul_scalar(3.0).unwrap().rpow_scalar(2.0).unwrap();
    assert_eq!(p.to_vec::<f32>().unwrap(), vec![8.0; 3]);
}

#[test]
fn special_values() {
    let a = NDArray::from_vec(vec![f64::NAN, 1.0, -0.0, 0.0, f64::INFINITY], &[5]).unwrap();
    let b = NDArray::from_vec(vec![1.0, f64::NAN, 0.0, -0.0, 1.0], &[5]).unwrap();
    let mx = a.maximum(&b).unwrap().to_vec::<f64>().unwrap();
    assert!(mx[0].is_nan() && mx[1].is_nan(), "NaN propagates: {mx:?}");
    assert_eq!(mx[4], f64::INFINITY);
    assert_eq!(
        a.eq(&b).unwrap().to_vec::<bool>().unwrap(),
        vec![false, false, true, true, false]
    );
    let x = NDArray::from_vec(vec![-7.0, 7.0, 7.5, -7.5, 6.0], &[5]).unwrap();
    let y = NDArray::from_vec(vec![3.0, -3.0, -2.0, 2.0, -3.0], &[5]).unwrap();
    let r = x.remainder(&y).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(&r[..4], &[2.0, -2.0, -0.5, 0.5]);
    assert!(
        r[4] == 0.0 && r[4].is_sign_negative(),
        "zero takes the divisor's sign"
    );
    let xi = x.astype(DType::I64).unwrap();
    let yi = y.astype(DType::I64).unwrap();
    assert_eq!(
        xi.remainder(&yi).unwrap().to_vec::<i64>().unwrap(),
        vec![2, -2, -1, 1, 0]
    );
    let zero = NDArray::zeros(&[5], DType::I64).unwrap();
    assert_eq!(
        xi.remainder(&zero).unwrap().to_vec::<i64>().unwrap(),
        vec![0; 5]
    );
    let m = NDArray::from_vec(vec![i32::MIN, -3, 3], &[3]).unwrap();
    assert_eq!(
        m.abs().unwrap().to_vec::<i32>().unwrap(),
        vec![i32::MIN, 3, 3],
        "wraps as NumPy"
    );
    let h = NDArray::from_vec(vec![0.5f32, 1.5, 2.5, -0.5], &[4]).unwrap();
    assert_eq!(
        h.round().unwrap().to_vec::<f32>().unwrap(),
        vec![0.0, 2.0, 2.0, -0.0]
    );
    let e = NDArray::from_vec(vec![-1.0f32, 0.0], &[2])
        .unwrap()
        .log()
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert!(e[0].is_nan() && e[1] == f32::NEG_INFINITY);
}

/// `log10` against NumPy's `np.log10` (float64 values printed by NumPy 2), on a transposed and
/// reversed view, in f64, f32 and from i64 (which gives f64, as NumPy).
#[test]
#[allow(clippy::approx_constant)] // NumPy's values as it prints them (log10(2) among them)
fn log10_matches_numpy_on_strided_views() {
    let x = [
        1000.0,
        0.01,
        1.0,
        0.0,
        -1.0,
        f64::INFINITY,
        2.0,
        5e-324,
        1e300,
        3.0,
        0.5,
        7.0,
    ];
    // np.log10(x).tolist()
    let numpy = [
        3.0,
        -2.0,
        0.0,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::INFINITY,
        0.3010299956639812,
        -323.3062153431158,
        300.0,
        0.47712125471966244,
        -0.3010299956639812,
        0.8450980400142568,
    ];
    // A (3, 4) array seen as its transpose with both axes reversed: element [i, j] of the view
    // is x[(2 - j) * 4 + (3 - i)].
    let order: Vec<usize> = (0..4)
        .flat_map(|i| (0..3).map(move |j| (2 - j) * 4 + (3 - i)))
        .collect();
    for dtype in [DType::F64, DType::F32] {
        let a = NDArray::from_vec(x.to_vec(), &[3, 4])
            .unwrap()
            .astype(dtype)
            .unwrap();
        let v = a
            .permute(&[1, 0])
            .unwrap()
            .slice(&s![..;-1, ..;-1])
            .unwrap();
        assert!(!v.is_contiguous());
        let got = v.log10().unwrap();
        assert_eq!((got.dtype(), got.shape()), (dtype, &[4, 3][..]));
        // f64: NumPy's values. f32: the exact log10 of the f32 input, rounded to f32 (NumPy's
        // float32 log10 is within an ulp of it; 5e-324 is 0 and 1e300 inf in f32).
        let want: Vec<f64> = order
            .iter()
            .map(|&k| match dtype {
                DType::F64 => numpy[k],
                _ => round_to(round_to(x[k], dtype).log10(), dtype),
            })
            .collect();
        check_close(&as_f64(&got), &want, dtype, &format!("log10 {dtype}"));
    }
    let i = NDArray::from_vec(vec![1i64, 10, 100, 7, 1000, 0], &[2, 3])
        .unwrap()
        .permute(&[1, 0])
        .unwrap();
    let got = i.log10().unwrap();
    assert_eq!(got.dtype(), DType::F64);
    assert_eq!(
        got.to_vec::<f64>().unwrap(),
        vec![0.0, 0.8450980400142568, 1.0, 3.0, 2.0, f64::NEG_INFINITY]
    );
}

#[test]
fn in_place_forms() {
    let mut rng = Prng::new(3);
    let base = NDArray::arange(0.0, 24.0, 1.0, DType::F32)
        .unwrap()
        .reshape(&[4, 6])
        .unwrap();
    let other = NDArray::arange(0.0, 6.0, 1.0, DType::F32).unwrap();
    // Contiguous destination: the direct kernel.
    let a = base.deep_copy().unwrap();
    a.add_assign(&other).unwrap();
    assert_eq!(as_f64(&a), as_f64(&base.add(&other).unwrap()));
    // A reversed, stepped view of a larger buffer: only the view changes.
    let big = base.deep_copy().unwrap();
    let v = big.slice(&s![..;-2, 1..;2]).unwrap();
    let before = as_f64(&big);
    let expect = as_f64(&v.mul_scalar(3.0).unwrap());
    v.mul_scalar_assign(3.0).unwrap();
    assert_eq!(as_f64(&v), expect);
    let after = as_f64(&big);
    let touched: Vec<usize> = naive_offsets(v.shape(), v.strides(), v.offset());
    for (i, (&x, &y)) in before.iter().zip(&after).enumerate() {
        if !touched.contains(&i) {
            assert_eq!(x, y, "element {i} outside the view changed");
        }
    }
    // Aliasing: a += a.T gives NumPy's (buffered) result.
    let sq = NDArray::from_vec(values(&mut rng, DType::F64, 25, false), &[5, 5]).unwrap();
    let want = as_f64(&sq.add(&sq.transpose(0, 1).unwrap()).unwrap());
    sq.add_assign(&sq.transpose(0, 1).unwrap()).unwrap();
    check_close(&as_f64(&sq), &want, DType::F64, "a += a.T");
    // f16 destination with an f32 operand: computed in f32, stored as f16.
    let h = NDArray::ones(&[3], DType::F16).unwrap();
    h.add_assign(&NDArray::full(&[3], 0.5, DType::F32).unwrap())
        .unwrap();
    assert_eq!(as_f64(&h), vec![1.5; 3]);
    // Errors: int destination with a float result, broadcast destination, shape growth.
    let i = NDArray::ones(&[3], DType::I32).unwrap();
    let e = i.add_scalar_assign(0.5).unwrap_err().to_string();
    assert!(e.contains("same_kind") && e.contains("i32"), "{e}");
    let e = i.div_assign(&i).unwrap_err().to_string();
    assert!(e.contains("f64"), "{e}");
    let bc = other.broadcast_to(&[4, 6]).unwrap();
    assert!(bc
        .add_assign(&base)
        .unwrap_err()
        .to_string()
        .contains("read-only"));
    let e = other.add_assign(&base).unwrap_err().to_string();
    assert!(e.contains("[6]") && e.contains("[4, 6]"), "{e}");
}

#[test]
fn operators_match_methods() {
    let a = NDArray::arange(1.0, 7.0, 1.0, DType::F32)
        .unwrap()
        .reshape(&[2, 3])
        .unwrap();
    let b = NDArray::arange(1.0, 4.0, 1.0, DType::F32).unwrap();
    assert_eq!(as_f64(&(&a + &b).unwrap()), as_f64(&a.add(&b).unwrap()));
    assert_eq!(as_f64(&(&a - &b).unwrap()), as_f64(&a.sub(&b).unwrap()));
    assert_eq!(
        as_f64(&(&a * 2.0).unwrap()),
        as_f64(&a.mul_scalar(2.0).unwrap())
    );
    assert_eq!(
        as_f64(&(2.0 / &a).unwrap()),
        as_f64(&a.rdiv_scalar(2.0).unwrap())
    );
    assert_eq!(
        as_f64(&(&a % 4.0).unwrap()),
        as_f64(&a.remainder_scalar(4.0).unwrap())
    );
    assert_eq!(as_f64(&(-&a).unwrap()), as_f64(&a.neg().unwrap()));
    // An operator's error is a value, not a panic.
    let bad = NDArray::zeros(&[4], DType::F32).unwrap();
    let e = (&a + &bad).unwrap_err().to_string();
    assert!(e.contains("[2, 3]") && e.contains("[4]"), "{e}");
    assert!(
        (-&t_bool()).is_err(),
        "negating bool is an error, as NumPy's TypeError"
    );
    let t = NDArray::from_vec(vec![true, false], &[2]).unwrap();
    assert_eq!((!&t).unwrap().to_vec::<bool>().unwrap(), vec![false, true]);
}

fn t_bool() -> NDArray {
    NDArray::from_vec(vec![true, false], &[2]).unwrap()
}

#[test]
fn operator_errors_with_the_method_message() {
    let a = NDArray::zeros(&[2, 3], DType::F32).unwrap();
    let b = NDArray::zeros(&[2], DType::F32).unwrap();
    let e = (&a + &b).unwrap_err().to_string();
    assert!(e.starts_with("add: shape mismatch: [2, 3] vs [2]"), "{e}");
}

#[test]
fn shape_mismatch_names_both_shapes() {
    let a = NDArray::zeros(&[3, 4], DType::F32).unwrap();
    let b = NDArray::zeros(&[3, 5], DType::F32).unwrap();
    let e = a.mul(&b).unwrap_err().to_string();
    assert!(
        e.starts_with("mul:") && e.contains("[3, 4]") && e.contains("[3, 5]"),
        "{e}"
    );
}

#[test]
fn where_and_clip() {
    let mut rng = Prng::new(4);
    for _ in 0..20 {
        let out = random_shape(&mut rng, 5, 4, 200);
        let (sc, sa, sb) = (
            broadcastable(&mut rng, &out),
            broadcastable(&mut rng, &out),
            broadcastable(&mut rng, &out),
        );
        let vc = values(&mut rng, DType::Bool, sc.iter().product(), false);
        let c = strided(&mut rng, &vc, &sc, DType::Bool);
        let va = values(&mut rng, DType::I32, sa.iter().product(), false);
        let a = strided(&mut rng, &va, &sa, DType::I32);
        let vb = values(&mut rng, DType::F32, sb.iter().product(), false);
        let b = strided(&mut rng, &vb, &sb, DType::F32);
        let got = NDArray::where_(&c, &a, &b).unwrap();
        assert_eq!(got.dtype(), DType::F64);
        let shape = got.shape().to_vec();
        let (vc, va, vb) = (
            as_f64(&c.broadcast_to(&shape).unwrap()),
            as_f64(&a.broadcast_to(&shape).unwrap()),
            as_f64(&b.broadcast_to(&shape).unwrap()),
        );
        let want: Vec<f64> = (0..vc.len())
            .map(|i| if vc[i] != 0.0 { va[i] } else { vb[i] })
            .collect();
        check_close(&as_f64(&got), &want, DType::F64, "where");
        let clipped = b.clip(-1.0, 2.0).unwrap();
        let want: Vec<f64> = as_f64(&b)
            .iter()
            .map(|&x| if x.is_nan() { x } else { x.clamp(-1.0, 2.0) })
            .collect();
        check_close(&as_f64(&clipped), &want, DType::F32, "clip");
    }
    let e = NDArray::where_(
        &NDArray::ones(&[2], DType::Bool).unwrap(),
        &NDArray::ones(&[3], DType::F32).unwrap(),
        &NDArray::ones(&[1], DType::F32).unwrap(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("where") && e.contains("[2]") && e.contains("[3]"),
        "{e}"
    );
}

#[test]
fn scalar_forms_accept_every_rust_scalar() {
    let a = NDArray::ones(&[2], DType::I64).unwrap();
    for s in [
        Scalar::from(2u8),
        Scalar::from(2i32),
        Scalar::from(2i64),
        Scalar::from(true),
    ] {
        assert_eq!(a.add_scalar(s).unwrap().dtype(), DType::I64);
    }
    assert_eq!(
        a.add_scalar(2.0f32).unwrap().to_vec::<f64>().unwrap(),
        vec![3.0; 2]
    );
    assert!(f32::from_f64(1.0) == 1.0);
}

/// The unit-stride and stride-0 runs of `where_` (each of `a`, `b` contiguous or a broadcast
/// scalar, with offsets into larger buffers), in every dtype, against a per-element reference.
#[test]
fn where_contiguous_and_broadcast_runs() {
    let mut rng = Prng::new(9);
    for dtype in [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::I64,
        DType::U8,
        DType::Bool,
    ] {
        for n in [1usize, 7, 64, 1000, 70_000] {
            let vc = values(&mut rng, DType::Bool, n + 3, false);
            // Offset views: the condition starts 3 elements into its buffer.
            let c = NDArray::from_vec(vc.iter().map(|&v| v != 0.0).collect::<Vec<_>>(), &[n + 3])
                .unwrap()
                .slice(&s![3..])
                .unwrap();
            let va = values(&mut rng, dtype, n + 1, false);
            let vb = values(&mut rng, dtype, n + 2, false);
            let full = |v: &[f64], skip: usize| {
                NDArray::from_vec(v.to_vec(), &[v.len()])
                    .unwrap()
                    .astype(dtype)
                    .unwrap()
                    .slice(&s![skip as isize..])
                    .unwrap()
            };
            let scalar = |v: &[f64]| {
                NDArray::from_vec(vec![v[0]], &[])
                    .unwrap()
                    .astype(dtype)
                    .unwrap()
                    .broadcast_to(&[n])
                    .unwrap()
            };
            let cases = [
                ("run, run", full(&va, 1), full(&vb, 2)),
                ("run, scalar", full(&va, 1), scalar(&vb)),
                ("scalar, run", scalar(&va), full(&vb, 2)),
                ("scalar, scalar", scalar(&va), scalar(&vb)),
            ];
            for (name, a, b) in cases {
                let got = NDArray::where_(&c, &a, &b).unwrap();
                assert_eq!(got.dtype(), dtype);
                let (ca, cb, cc) = (as_f64(&a), as_f64(&b), as_f64(&c));
                let want: Vec<f64> = (0..n)
                    .map(|i| if cc[i] != 0.0 { ca[i] } else { cb[i] })
                    .collect();
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&as_f64(&got)), bits(&want), "{dtype} n={n} {name}");
            }
        }
    }
}

/// The one-run path of `binary` (same shape, same dtype, both contiguous, offsets into larger
/// buffers, aliasing) against the general broadcasting path on the same values.
#[test]
fn binary_flat_path_matches_the_general_path() {
    let mut rng = Prng::new(21);
    for dtype in [
        DType::F32,
        DType::F64,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::Bool,
    ] {
        for n in [0usize, 1, 7, 100, 5000] {
            let va = values(&mut rng, dtype, n + 3, true);
            let vb = values(&mut rng, dtype, n + 5, true);
            let mk = |v: &[f64], skip: usize| {
                NDArray::from_vec(v.to_vec(), &[v.len()])
                    .unwrap()
                    .astype(dtype)
                    .unwrap()
                    .slice(&s![skip as isize..])
                    .unwrap()
            };
            let (a, b) = (mk(&va, 3), mk(&vb, 5));
            for op in BinaryOp::ALL {
                let (Ok(got), Ok(alias)) = (a.binary(op, &b), a.binary(op, &a)) else {
                    continue; // ops a dtype does not define error on both paths alike
                };
                let row = b.reshape(&[1, n as isize]).unwrap();
                let want = a.binary(op, &row).unwrap().reshape(&[n as isize]).unwrap();
                let bits = |x: &NDArray| as_f64(x).iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(got.dtype(), want.dtype(), "{dtype} {op:?}");
                assert_eq!(bits(&got), bits(&want), "{dtype} n={n} {op:?}");
                let a2 = a.reshape(&[1, n as isize]).unwrap();
                let want = a.binary(op, &a2).unwrap().reshape(&[n as isize]).unwrap();
                assert_eq!(bits(&alias), bits(&want), "{dtype} n={n} {op:?} aliased");
            }
        }
    }
}
