//! The sum of squares of every element, in f64, as a fused op: gradient clipping's global
//! L2 norm (`clip_grad_norm`) sums it over every gradient. The CPU kernel (f32 / f64) is one
//! pass with no temporary (`quill_cpu::fused::sum_squares`); the composite casts to f64,
//! squares and sums (three passes and two temporaries) on any device.

use super::{f32_f64, none, run, FusedKind, FusedOp};
use crate::NDArray;
use quill_core::{DType, Error, Result};
use quill_cpu::fused::sum_squares::fold;

/// The registry entry.
pub(crate) const FORWARD: FusedKind = FusedKind {
    name: "sum_squares",
    cpu: f32_f64,
    cuda: none,
    composite: &["astype", "mul", "sum"],
};

struct SumSquares;

impl FusedOp for SumSquares {
    type Output = f64;
    fn kind(&self) -> &'static FusedKind {
        &FORWARD
    }
    fn check(&self, i: &[&NDArray]) -> Result<()> {
        if !i[0].dtype().is_float() {
            return Err(Error::invalid(
                FORWARD.name,
                format!("needs a floating-point array, got {}", i[0].dtype()),
            ));
        }
        Ok(())
    }
    fn composite(&self, i: &[&NDArray]) -> Result<f64> {
        let w = i[0].astype_if(DType::F64)?;
        w.mul(&w)?.sum(None, false)?.item::<f64>()
    }
    fn cpu(&self, i: &[&NDArray]) -> Result<f64> {
        match i[0].dtype() {
            DType::F32 => i[0].with_host_slice(fold::<f32>),
            _ => i[0].with_host_slice(fold::<f64>),
        }
    }
}

impl NDArray {
    /// The sum of the squares of every element, in f64 (0 for an empty array): the square of
    /// the L2 norm. Floating-point arrays only. One fused op (see `quill_array::fused`).
    pub fn sum_squares(&self) -> Result<f64> {
        run(&SumSquares, &[self])
    }
}
