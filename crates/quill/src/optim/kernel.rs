//! What the optimizers share about their state: the compute dtype of a parameter's update,
//! fresh and copied state buffers, and the step itself (`NDArray::fused_update`, which runs
//! the rule on the parameter's device in one pass).

use crate::NDArray;
use quill_core::{DType, Result, Update};

/// The dtype a parameter of dtype `dtype` is updated in (and its state is kept in).
pub(crate) fn compute_dtype(op: &'static str, dtype: DType) -> Result<DType> {
    Update::compute_dtype(op, dtype)
}

/// Applies `rule` to `param` (written in place) given `grad` and its `state` buffers.
pub(crate) fn apply(
    op: &'static str,
    rule: &Update,
    param: &NDArray,
    grad: &NDArray,
    state: &[&NDArray],
) -> Result<()> {
    param.fused_update(op, rule, grad, state)
}

/// A zero-filled state buffer for `param` (contiguous, of the compute dtype).
pub(crate) fn zeros_for(op: &'static str, param: &NDArray) -> Result<NDArray> {
    NDArray::zeros(param.shape(), compute_dtype(op, param.dtype())?)?.to_device(param.device())
}

/// A private contiguous copy of `src` in the compute dtype of `param` (for state that must not
/// alias anything the caller holds).
pub(crate) fn copy_for(op: &'static str, param: &NDArray, src: &NDArray) -> Result<NDArray> {
    src.astype(compute_dtype(op, param.dtype())?)
}
