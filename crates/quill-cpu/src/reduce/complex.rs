//! Reductions of complex arrays: sum, prod and mean in the element's own precision (NumPy's
//! pairwise-free complex loops), any / all by truthiness (either part non-zero). The orderings
//! (max, min, arg*) are refused: complex numbers have none. Runs on the same plan and blocked
//! executor as the real reductions.

use super::kernels::FoldK;
use super::plan::ReducePlan;
use super::run;
use crate::{CpuElement, CpuStorage};
use num_complex::Complex;
use quill_core::{DType, Error, Layout, ReduceOp, Result};

/// The error of a reduction complex numbers do not have.
pub(super) fn refused(op: &'static str, dtype: DType) -> Error {
    Error::invalid(
        op,
        format!("not defined for complex dtype {dtype} (it needs an order); reduce abs() or .real"),
    )
}

/// The error of a reduction that has a complex form quill does not compute yet.
pub(super) fn not_yet(op: &'static str, dtype: DType) -> Error {
    Error::invalid(
        op,
        format!("not defined for complex dtype {dtype} in quill yet; reduce .real and .imag"),
    )
}

/// A complex element whose parts are `F`.
pub(super) trait Cx:
    CpuElement + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self>
{
    /// `self / n`.
    fn div_n(self, n: usize) -> Self;
    /// Either part non-zero.
    fn truthy(self) -> bool;
}

macro_rules! cx {
    ($f:ty) => {
        impl Cx for Complex<$f> {
            fn div_n(self, n: usize) -> Self {
                Complex::new(self.re / n as $f, self.im / n as $f)
            }
            fn truthy(self) -> bool {
                self.re != 0.0 || self.im != 0.0
            }
        }
    };
}
cx!(f32);
cx!(f64);

pub(super) fn reduce<T: Cx>(
    op: ReduceOp,
    s: &[T],
    l: &Layout,
    axes: &[usize],
) -> Result<CpuStorage> {
    use ReduceOp::*;
    let p = ReducePlan::new(l, axes, false);
    match op {
        Sum => run(
            &p,
            s,
            &FoldK::new(T::zero(), |x: T, _| x, |a, b| a + b, |a, _| a),
        ),
        Prod => run(
            &p,
            s,
            &FoldK::new(T::one(), |x: T, _| x, |a, b| a * b, |a, _| a),
        ),
        Any => run(
            &p,
            s,
            &FoldK::new(false, |x: T, _| x.truthy(), |a, b| a | b, |a, _| a),
        ),
        All => run(
            &p,
            s,
            &FoldK::new(true, |x: T, _| x.truthy(), |a, b| a & b, |a, _| a),
        ),
        Max | Min | ArgMax | ArgMin => Err(refused(op.name(), T::DTYPE)),
    }
}

pub(super) fn mean<T: Cx>(s: &[T], l: &Layout, axes: &[usize]) -> Result<CpuStorage> {
    let p = ReducePlan::new(l, axes, false);
    let n = p.n_red;
    run(
        &p,
        s,
        &FoldK::new(
            T::zero(),
            |x: T, _| x,
            |a, b| a + b,
            move |a: T, _| a.div_n(n),
        ),
    )
}
