//! Comparing elements: exact equality (NaN equal to NaN, -0.0 different from 0.0), and for
//! results computed in floating point, closeness within `tol * (1 + |want|)` (relative for
//! large values, absolute near zero, so a few-ulp difference in a tiny result passes while a
//! wrong formula does not).

use quill::{DType, Device, Element, NDArray, Scalar};

/// Exact equality: floats by value, with NaN equal to NaN and -0.0 different from 0.0.
pub fn same<T: Element>(a: T, b: T) -> bool {
    match (a.to_scalar(), b.to_scalar()) {
        (Scalar::F(x), Scalar::F(y)) => (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits(),
        (x, y) => x == y,
    }
}

/// Asserts `got` and `want` have the same length and are element-wise `same`; the panic names
/// `ctx` and the first differing index.
#[track_caller]
pub fn assert_same<T: Element>(got: &[T], want: &[T], ctx: &str) {
    assert_eq!(got.len(), want.len(), "{ctx}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(same(g, w), "{ctx}: element {i}: got {g:?}, want {w:?}");
    }
}

/// The elements in C order as f64, wherever the array lives (copied to the host first).
pub fn f64s(a: &NDArray) -> Vec<f64> {
    a.to_device(Device::Cpu)
        .unwrap()
        .astype(DType::F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
}

/// True when `got` is within `tol * (1 + |want|)` of `want`, or both are NaN, or equal
/// (infinities included). `tol = 0` asks for equality.
pub fn close_to(got: f64, want: f64, tol: f64) -> bool {
    (got.is_nan() && want.is_nan()) || got == want || (got - want).abs() <= tol * (1.0 + want.abs())
}

/// Element-wise `close_to` over two value lists of equal length.
#[track_caller]
pub fn assert_close_values(got: &[f64], want: &[f64], tol: f64, ctx: &str) {
    assert_eq!(got.len(), want.len(), "{ctx}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            close_to(g, w, tol),
            "{ctx}: element {i}: got {g}, want {w} (tol {tol})"
        );
    }
}

/// `got` against `want`: the same shape and dtype, and every element within `tol` (see
/// `close_to`). The arrays may live on different devices.
#[track_caller]
pub fn assert_close(got: &NDArray, want: &NDArray, tol: f64, ctx: &str) {
    assert_eq!(got.shape(), want.shape(), "{ctx}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{ctx}: dtype");
    assert_close_values(&f64s(got), &f64s(want), tol, ctx);
}
