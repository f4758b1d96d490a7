//! How a result on a device is judged. On the CPU against a naive reference computed here
//! element by element in f64 (so the CPU run of every case is a real test); on any other device
//! against the CPU's own result for the same inputs (the CPU having passed the naive check).
//! Errors must be of the same kind on every device.

use quill::{DType, Device, Element, NDArray, Result};
use quill_test_support::{assert_close, f64s, with_dtype};

/// `v` converted to `dtype` and back, as NumPy converts a value into an array of that dtype.
pub fn round_to(v: f64, dtype: DType) -> f64 {
    // An integral value into an integer dtype wraps, as integer arithmetic does (a float cast
    // would not: x86's -3e9 -> u32 is 2^31, where -3e9 wrapped is 1294967296).
    if dtype.is_int() && v.fract() == 0.0 && v.abs() < 1e30 {
        return with_dtype!(dtype, T => T::from_scalar(quill::Scalar::I(v as i128)).to_f64());
    }
    with_dtype!(dtype, T => T::from_f64(v).to_f64())
}

/// Relative tolerance of a CPU result in `dtype` against the exact value rounded to it: a few
/// ulps of the dtype, since the CPU computes f16 / bf16 in f32 and rounds once.
pub fn naive_rtol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-13,
        DType::F32 => 1e-6,
        DType::F16 => 2e-3,
        DType::BF16 => 1.6e-2,
        _ => 0.0,
    }
}

/// Tolerance of another device against the CPU, as `tol * (1 + |cpu|)`: GPU math functions
/// differ from the CPU's by a few ulps (f32, f64), which may move an f16 / bf16 result by one
/// ulp of its own; near zero the bound is absolute, where a formula evaluated differently (GELU
/// through erf rather than erfc) loses relative accuracy but no absolute accuracy.
pub fn device_tol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 1e-5,
        DType::F16 => 2e-3,
        DType::BF16 => 2e-2,
        _ => 0.0,
    }
}

/// Asserts `got[i]` within `rtol * |want[i]|` (NaN matching NaN, infinities equal); the bound
/// never drops below `rtol` times the dtype's tiniest normal scale, so subnormals compare too.
#[track_caller]
pub fn assert_rel(got: &[f64], want: &[f64], dtype: DType, scale: f64, ctx: &str) {
    assert_eq!(got.len(), want.len(), "{ctx}: length");
    let rtol = naive_rtol(dtype) * scale;
    let floor = if dtype == DType::F64 { 1e-300 } else { 1e-30 };
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= rtol * w.abs().max(floor);
        assert!(ok, "{ctx}: element {i}: got {g}, want {w}");
    }
}

/// Judges `got`, the result on `dev`: its device, dtype and shape, then its values against
/// `naive()` on the CPU (relative tolerance `scale * naive_rtol`) or against `on_cpu()`, the
/// same op on the CPU inputs, elsewhere (tolerance `device_tol`; `exact` asks for equality).
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn judge(
    dev: Device,
    got: &NDArray,
    dtype: DType,
    shape: &[usize],
    naive: impl FnOnce() -> Vec<f64>,
    on_cpu: impl FnOnce() -> NDArray,
    scale: f64,
    exact: bool,
    ctx: &str,
) {
    assert_eq!(got.device(), dev, "{ctx}: result device");
    assert_eq!(got.dtype(), dtype, "{ctx}: dtype");
    assert_eq!(got.shape(), shape, "{ctx}: shape");
    if dev == Device::Cpu {
        let s = if exact { 0.0 } else { scale };
        assert_rel(&f64s(got), &naive(), dtype, s, ctx);
    } else {
        let tol = if exact { 0.0 } else { device_tol(dtype) };
        assert_close(got, &on_cpu(), tol, ctx);
    }
}

/// A call that must fail with `want`'s kind on every device: compared with the vocabulary's own
/// error (`want`) and, off the CPU, with the CPU's error for the same call.
#[track_caller]
pub fn judge_error(
    got: Result<NDArray>,
    want: &quill::Error,
    on_cpu: impl FnOnce() -> Result<NDArray>,
    must_mention: &[&str],
    ctx: &str,
) {
    let e = got.expect_err(ctx);
    assert_eq!(
        std::mem::discriminant(&e),
        std::mem::discriminant(want),
        "{ctx}: {e} is not of the kind of {want}"
    );
    let cpu = on_cpu().expect_err(ctx);
    assert_eq!(
        std::mem::discriminant(&e),
        std::mem::discriminant(&cpu),
        "{ctx}: {e} differs in kind from the CPU's {cpu}"
    );
    let text = e.to_string();
    for m in must_mention {
        assert!(text.contains(m), "{ctx}: '{text}' should mention {m}");
    }
}
