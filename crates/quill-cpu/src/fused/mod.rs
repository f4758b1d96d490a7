//! The host kernels of quill's fused ops (`quill_array::fused` defines each op: its checks,
//! its composite and which kernels it has). Each file here is one op's loops over contiguous
//! host slices; the op's definition hands them the slices and wraps the results.

pub mod layer_norm;
pub mod recurrent;
pub mod rms_norm;
pub mod sum_squares;

use std::ops::{Add, Div, Mul, Sub};

/// f32 and f64: the arithmetic the loops need.
pub trait Float:
    crate::CpuElement
    + Copy
    + Default
    + Send
    + Sync
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
{
    /// `v` rounded to this type.
    fn of(v: f64) -> Self;
    /// `1 / sqrt(self)`.
    fn rsqrt(self) -> Self;
}

impl Float for f32 {
    fn of(v: f64) -> f32 {
        v as f32
    }
    fn rsqrt(self) -> f32 {
        1.0 / self.sqrt()
    }
}

impl Float for f64 {
    fn of(v: f64) -> f64 {
        v
    }
    fn rsqrt(self) -> f64 {
        1.0 / self.sqrt()
    }
}

#[inline(always)]
pub(crate) fn sum<R: Float>(v: &[R]) -> R {
    sum_by(v, v, |x, _| x)
}

/// `sum(f(a_i, b_i))` in 8 lanes.
#[inline(always)]
pub(crate) fn sum_by<R: Float>(a: &[R], b: &[R], f: impl Fn(R, R) -> R) -> R {
    let mut acc = [R::default(); 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for j in 0..8 {
            acc[j] = acc[j] + f(x[j], y[j]);
        }
    }
    let mut s = R::default();
    for (&x, &y) in ra.iter().zip(rb) {
        s = s + f(x, y);
    }
    s + fold8(acc)
}

/// `sum(f(a_i, b_i, c_i))` in 8 lanes.
#[inline(always)]
pub(crate) fn sum3<R: Float>(a: &[R], b: &[R], c: &[R], f: impl Fn(R, R, R) -> R) -> R {
    let mut acc = [R::default(); 8];
    let (ca, cb, cc) = (a.chunks_exact(8), b.chunks_exact(8), c.chunks_exact(8));
    let (ra, rb, rc) = (ca.remainder(), cb.remainder(), cc.remainder());
    for ((x, y), z) in ca.zip(cb).zip(cc) {
        for j in 0..8 {
            acc[j] = acc[j] + f(x[j], y[j], z[j]);
        }
    }
    let mut s = R::default();
    for ((&x, &y), &z) in ra.iter().zip(rb).zip(rc) {
        s = s + f(x, y, z);
    }
    s + fold8(acc)
}

#[inline(always)]
fn fold8<R: Float>(acc: [R; 8]) -> R {
    let pairs = [
        acc[0] + acc[4],
        acc[1] + acc[5],
        acc[2] + acc[6],
        acc[3] + acc[7],
    ];
    (pairs[0] + pairs[2]) + (pairs[1] + pairs[3])
}
