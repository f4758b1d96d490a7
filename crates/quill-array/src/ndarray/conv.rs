//! The dtype rules the window fused ops share (`quill_array::fused`'s conv, pooling, batch
//! norm): the compute dtype of a pair of operands, and an operand made contiguous in it.

use super::NDArray;
use quill_core::{DType, Error, Result};

/// The dtype the kernels compute in for operands of `a`'s and `b`'s dtypes.
pub(crate) fn compute_dtype(op: &'static str, a: &NDArray, b: &NDArray) -> Result<DType> {
    if a.dtype() != b.dtype() {
        return Err(Error::DTypeMismatch {
            op,
            expected: a.dtype(),
            got: b.dtype(),
        });
    }
    match a.dtype() {
        d if d.is_float() => Ok(crate::fused::compute_of(d)),
        d => Err(Error::invalid(
            op,
            format!("needs floating-point operands, got {d}"),
        )),
    }
}

/// `x` contiguous in `dtype`.
pub(crate) fn prepared(x: &NDArray, dtype: DType) -> Result<NDArray> {
    if x.dtype() == dtype {
        x.compact()
    } else {
        x.astype(dtype)
    }
}
