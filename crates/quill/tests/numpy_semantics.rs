//! NumPy 2 value semantics of NDArray (issue 48): `floor_divide` / `remainder` on integers
//! against a table NumPy 2.4.6 produced (`x // 0`, `MIN // -1`), its dtype rules with weak
//! scalars, integer powers with negative exponents refused, numbers a dtype cannot hold refused
//! by `assign_scalar`, and broadcast views read-only through every view of them.

use quill::{s, BinaryOp, DType, Error, NDArray, Scalar};

/// (a, b, a // b, a % b) in int64.
#[allow(clippy::unreadable_literal)]
const INT: &[(i64, i64, i64, i64)] = &[
    (0, 0, 0, 0),
    (0, 1, 0, 0),
    (0, -1, 0, 0),
    (0, 7, 0, 0),
    (0, -7, 0, 0),
    (0, 3, 0, 0),
    (0, -3, 0, 0),
    (0, 9223372036854775807, 0, 0),
    (0, -9223372036854775808, 0, 0),
    (0, 10, 0, 0),
    (0, -10, 0, 0),
    (1, 0, 0, 0),
    (1, 1, 1, 0),
    (1, -1, -1, 0),
    (1, 7, 0, 1),
    (1, -7, -1, -6),
    (1, 3, 0, 1),
    (1, -3, -1, -2),
    (1, 9223372036854775807, 0, 1),
    (1, -9223372036854775808, -1, -9223372036854775807),
    (1, 10, 0, 1),
    (1, -10, -1, -9),
    (-1, 0, 0, 0),
    (-1, 1, -1, 0),
    (-1, -1, 1, 0),
    (-1, 7, -1, 6),
    (-1, -7, 0, -1),
    (-1, 3, -1, 2),
    (-1, -3, 0, -1),
    (-1, 9223372036854775807, -1, 9223372036854775806),
    (-1, -9223372036854775808, 0, -1),
    (-1, 10, -1, 9),
    (-1, -10, 0, -1),
    (7, 0, 0, 0),
    (7, 1, 7, 0),
    (7, -1, -7, 0),
    (7, 7, 1, 0),
    (7, -7, -1, 0),
    (7, 3, 2, 1),
    (7, -3, -3, -2),
    (7, 9223372036854775807, 0, 7),
    (7, -9223372036854775808, -1, -9223372036854775801),
    (7, 10, 0, 7),
    (7, -10, -1, -3),
    (-7, 0, 0, 0),
    (-7, 1, -7, 0),
    (-7, -1, 7, 0),
    (-7, 7, -1, 0),
    (-7, -7, 1, 0),
    (-7, 3, -3, 2),
    (-7, -3, 2, -1),
    (-7, 9223372036854775807, -1, 9223372036854775800),
    (-7, -9223372036854775808, 0, -7),
    (-7, 10, -1, 3),
    (-7, -10, 0, -7),
    (3, 0, 0, 0),
    (3, 1, 3, 0),
    (3, -1, -3, 0),
    (3, 7, 0, 3),
    (3, -7, -1, -4),
    (3, 3, 1, 0),
    (3, -3, -1, 0),
    (3, 9223372036854775807, 0, 3),
    (3, -9223372036854775808, -1, -9223372036854775805),
    (3, 10, 0, 3),
    (3, -10, -1, -7),
    (-3, 0, 0, 0),
    (-3, 1, -3, 0),
    (-3, -1, 3, 0),
    (-3, 7, -1, 4),
    (-3, -7, 0, -3),
    (-3, 3, -1, 0),
    (-3, -3, 1, 0),
    (-3, 9223372036854775807, -1, 9223372036854775804),
    (-3, -9223372036854775808, 0, -3),
    (-3, 10, -1, 7),
    (-3, -10, 0, -3),
    (9223372036854775807, 0, 0, 0),
    (9223372036854775807, 1, 9223372036854775807, 0),
    (9223372036854775807, -1, -9223372036854775807, 0),
    (9223372036854775807, 7, 1317624576693539401, 0),
    (9223372036854775807, -7, -1317624576693539401, 0),
    (9223372036854775807, 3, 3074457345618258602, 1),
    (9223372036854775807, -3, -3074457345618258603, -2),
    (9223372036854775807, 9223372036854775807, 1, 0),
    (9223372036854775807, -9223372036854775808, -1, -1),
    (9223372036854775807, 10, 922337203685477580, 7),
    (9223372036854775807, -10, -922337203685477581, -3),
    (-9223372036854775808, 0, 0, 0),
    (-9223372036854775808, 1, -9223372036854775808, 0),
    (-9223372036854775808, -1, -9223372036854775808, 0),
    (-9223372036854775808, 7, -1317624576693539402, 6),
    (-9223372036854775808, -7, 1317624576693539401, -1),
    (-9223372036854775808, 3, -3074457345618258603, 1),
    (-9223372036854775808, -3, 3074457345618258602, -2),
    (
        -9223372036854775808,
        9223372036854775807,
        -2,
        9223372036854775806,
    ),
    (-9223372036854775808, -9223372036854775808, 1, 0),
    (-9223372036854775808, 10, -922337203685477581, 2),
    (-9223372036854775808, -10, 922337203685477580, -8),
    (10, 0, 0, 0),
    (10, 1, 10, 0),
    (10, -1, -10, 0),
    (10, 7, 1, 3),
    (10, -7, -2, -4),
    (10, 3, 3, 1),
    (10, -3, -4, -2),
    (10, 9223372036854775807, 0, 10),
    (10, -9223372036854775808, -1, -9223372036854775798),
    (10, 10, 1, 0),
    (10, -10, -1, 0),
    (-10, 0, 0, 0),
    (-10, 1, -10, 0),
    (-10, -1, 10, 0),
    (-10, 7, -2, 4),
    (-10, -7, 1, -3),
    (-10, 3, -4, 2),
    (-10, -3, 3, -1),
    (-10, 9223372036854775807, -1, 9223372036854775797),
    (-10, -9223372036854775808, 0, -10),
    (-10, 10, -1, 0),
    (-10, -10, 1, 0),
];

fn column(v: Vec<i64>) -> NDArray {
    let n = v.len();
    NDArray::from_vec(v, &[n]).unwrap()
}

#[test]
fn int_floor_divide_and_remainder_match_numpy() {
    let a = column(INT.iter().map(|r| r.0).collect());
    let b = column(INT.iter().map(|r| r.1).collect());
    let q = a.binary(BinaryOp::FloorDiv, &b).unwrap();
    let r = a.binary(BinaryOp::Remainder, &b).unwrap();
    assert_eq!(q.dtype(), DType::I64);
    let (q, r) = (q.to_vec::<i64>().unwrap(), r.to_vec::<i64>().unwrap());
    for (i, &(x, y, wq, wr)) in INT.iter().enumerate() {
        assert_eq!((q[i], r[i]), (wq, wr), "{x} // {y} and {x} % {y}");
    }
    // The same rules in int32 and uint8, on the values that fit them (NumPy's identities).
    for dt in [DType::I32, DType::U8] {
        let (lo, hi) = if dt == DType::U8 {
            (0, 255)
        } else {
            (i32::MIN as i64, i32::MAX as i64)
        };
        let fits: Vec<_> = INT
            .iter()
            .filter(|r| (lo..=hi).contains(&r.0) && (lo..=hi).contains(&r.1))
            .collect();
        let a = column(fits.iter().map(|r| r.0).collect())
            .astype(dt)
            .unwrap();
        let b = column(fits.iter().map(|r| r.1).collect())
            .astype(dt)
            .unwrap();
        let q = a
            .binary(BinaryOp::FloorDiv, &b)
            .unwrap()
            .astype(DType::I64)
            .unwrap();
        let q = q.to_vec::<i64>().unwrap();
        for (i, r) in fits.iter().enumerate() {
            assert_eq!(q[i], r.2, "{dt}: {} // {}", r.0, r.1);
        }
    }
    // i32's own MIN // -1 wraps to MIN, as NumPy's.
    let m = NDArray::from_vec(vec![i32::MIN], &[1]).unwrap();
    let got = m.binary_scalar(BinaryOp::FloorDiv, -1, false).unwrap();
    assert_eq!(got.to_vec::<i32>().unwrap(), vec![i32::MIN]);
}

#[test]
fn floor_divide_dtypes_follow_nep50() {
    let b = NDArray::from_vec(vec![true, false], &[2]).unwrap();
    let i = NDArray::from_vec(vec![3i32, -7], &[2]).unwrap();
    // bool // 0.5 -> float64 [2, 0]; bool // -1 -> int64 [-1, 0]; int32 // 0.5 -> float64.
    let r = b.binary_scalar(BinaryOp::FloorDiv, 0.5, false).unwrap();
    assert_eq!(
        (r.dtype(), r.to_vec::<f64>().unwrap()),
        (DType::F64, vec![2.0, 0.0])
    );
    let r = b.binary_scalar(BinaryOp::FloorDiv, -1, false).unwrap();
    assert_eq!(
        (r.dtype(), r.to_vec::<i64>().unwrap()),
        (DType::I64, vec![-1, 0])
    );
    let r = i.binary_scalar(BinaryOp::FloorDiv, 0.5, false).unwrap();
    assert_eq!(
        (r.dtype(), r.to_vec::<f64>().unwrap()),
        (DType::F64, vec![6.0, -14.0])
    );
    // 1 // [inf, -inf] is [0, -1] and [inf, -inf] // 1 is NaN, as npy_divmod.
    let inf = NDArray::from_vec(vec![f64::INFINITY, f64::NEG_INFINITY], &[2]).unwrap();
    let r = inf.binary_scalar(BinaryOp::FloorDiv, 1.0, true).unwrap();
    assert_eq!(r.to_vec::<f64>().unwrap(), vec![0.0, -1.0]);
    let r = inf.binary_scalar(BinaryOp::FloorDiv, 1.0, false).unwrap();
    assert!(r.to_vec::<f64>().unwrap().iter().all(|v| v.is_nan()));
    // bool // bool has no bool loop: NumPy runs its int8 one.
    let r = b.binary(BinaryOp::FloorDiv, &b).unwrap();
    assert_eq!(
        (r.dtype(), r.to_vec::<i8>().unwrap()),
        (DType::I8, vec![1, 0])
    );
}

#[test]
fn integer_powers_refuse_negative_integer_exponents() {
    let base = NDArray::from_vec(vec![0i64, 2], &[2]).unwrap();
    let exps = NDArray::from_vec(vec![-1i64, 2], &[2]).unwrap();
    for r in [
        base.binary(BinaryOp::Pow, &exps),
        base.binary_scalar(BinaryOp::Pow, -1, false),
        exps.binary_scalar(BinaryOp::Pow, 0, true), // 0 ** [-1, 2]
        base.astype(DType::U8)
            .unwrap()
            .binary(BinaryOp::Pow, &exps.astype(DType::I32).unwrap()),
    ] {
        let e = r.unwrap_err().to_string();
        assert!(
            e.contains("negative integer powers") && e.contains("pow"),
            "{e}"
        );
    }
    let e = base.binary_scalar_assign(BinaryOp::Pow, -2).unwrap_err();
    assert!(e.to_string().contains("negative integer powers"), "{e}");
    // Non-negative exponents, unsigned exponents and float exponents are fine.
    let r = base.binary(
        BinaryOp::Pow,
        &exps.binary_scalar(BinaryOp::Maximum, 0, false).unwrap(),
    );
    assert_eq!(r.unwrap().to_vec::<i64>().unwrap(), vec![1, 4]);
    let r = base.binary_scalar(BinaryOp::Pow, -1.0, false).unwrap();
    assert_eq!(r.dtype(), DType::F64);
    assert_eq!(r.to_vec::<f64>().unwrap(), vec![f64::INFINITY, 0.5]);
}

#[test]
fn assign_scalar_refuses_numbers_the_dtype_cannot_hold() {
    let cases: &[(DType, Scalar, &str)] = &[
        (
            DType::U8,
            Scalar::I(-1),
            "Python integer -1 out of bounds for u8",
        ),
        (DType::U8, Scalar::I(256), "out of bounds for u8"),
        (
            DType::I32,
            Scalar::I(1 << 40),
            "Python integer 1099511627776 out of bounds for i32",
        ),
        (
            DType::I32,
            Scalar::F(f64::NAN),
            "cannot convert float NaN to integer",
        ),
        (
            DType::I64,
            Scalar::F(f64::INFINITY),
            "out of bounds for i64",
        ),
        (DType::I32, Scalar::F(1e20), "out of bounds for i32"),
        (DType::U8, Scalar::F(-1.0), "out of bounds for u8"),
    ];
    for &(dt, v, want) in cases {
        let a = NDArray::zeros(&[3], dt).unwrap();
        let e = a.assign_scalar(v).unwrap_err().to_string();
        assert!(
            e.contains(want) && e.contains("assign_scalar"),
            "{dt} {v:?}: {e}"
        );
        let e = a.set_scalar(&s![1..], v).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
        assert_eq!(
            a.astype(DType::F64).unwrap().to_vec::<f64>().unwrap(),
            vec![0.0; 3],
            "untouched"
        );
    }
    // What fits is written: truncated floats, the range's ends, any number into floats / bool.
    let a = NDArray::zeros(&[2], DType::U8).unwrap();
    a.assign_scalar(255).unwrap();
    assert_eq!(a.to_vec::<u8>().unwrap(), vec![255, 255]);
    a.assign_scalar(3.9).unwrap();
    assert_eq!(a.to_vec::<u8>().unwrap(), vec![3, 3]);
    let a = NDArray::zeros(&[1], DType::I32).unwrap();
    a.assign_scalar(i32::MIN as i64).unwrap();
    assert_eq!(a.to_vec::<i32>().unwrap(), vec![i32::MIN]);
    let f = NDArray::zeros(&[1], DType::F32).unwrap();
    f.assign_scalar(f64::NAN).unwrap();
    assert!(f.to_vec::<f32>().unwrap()[0].is_nan());
    let b = NDArray::zeros(&[1], DType::Bool).unwrap();
    b.assign_scalar(1i64 << 40).unwrap();
    assert_eq!(b.to_vec::<bool>().unwrap(), vec![true]);
}

#[test]
fn views_of_a_broadcast_view_stay_read_only() {
    let a = NDArray::from_vec((0..4i64).collect(), &[4]).unwrap();
    let b = a.broadcast_to(&[3, 4]).unwrap();
    assert!(b.is_readonly() && !a.is_readonly());
    // b[1] has no stride-0 dim left, but its elements are still every row's.
    let row = b.slice(&s![1]).unwrap();
    assert!(row.is_readonly());
    let one = NDArray::scalar(1i64);
    let errors = [
        row.assign_scalar(1).unwrap_err(),
        row.assign(&one).unwrap_err(),
        row.binary_scalar_assign(BinaryOp::Add, 1).unwrap_err(),
        row.binary_assign(BinaryOp::Add, &one).unwrap_err(),
        b.slice(&s![.., 2]).unwrap().assign_scalar(9).unwrap_err(),
        b.permute(&[1, 0])
            .unwrap()
            .slice(&s![0])
            .unwrap()
            .assign_scalar(9)
            .unwrap_err(),
        b.reshape(&[3, 2, 2])
            .unwrap()
            .slice(&s![0, 1])
            .unwrap()
            .assign_scalar(9)
            .unwrap_err(),
    ];
    for e in errors {
        let msg = e.to_string();
        assert!(
            matches!(e, Error::ReadOnlyView { .. }) || msg.contains("read-only"),
            "{msg}"
        );
    }
    assert_eq!(
        a.to_vec::<i64>().unwrap(),
        vec![0, 1, 2, 3],
        "nothing written"
    );
    // Copies are writable, and the source array itself stays writable.
    let c = row.compact().unwrap();
    assert!(!c.is_readonly());
    c.assign_scalar(7).unwrap();
    assert_eq!(a.to_vec::<i64>().unwrap(), vec![0, 1, 2, 3]);
    let d = b.astype(DType::F64).unwrap();
    d.slice(&s![1]).unwrap().assign_scalar(1).unwrap();
    a.assign_scalar(5).unwrap();
    assert_eq!(b.to_vec::<i64>().unwrap(), vec![5; 12]);
    // Broadcasting that repeats nothing (a size-1 dim, or no change) stays writable.
    let same = a.broadcast_to(&[1, 4]).unwrap();
    same.assign_scalar(2).unwrap();
    assert_eq!(a.to_vec::<i64>().unwrap(), vec![2; 4]);
}
