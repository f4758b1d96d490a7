//! The buffer plumbing of the fused optimizer updates: it brings a parameter, its gradient and
//! its state buffers to contiguous buffers of one compute dtype on one device, then hands
//! them to the backend's fused `update` (one pass per step; the rules themselves are
//! quill-core's `Update` values, run by each backend).

use crate::backend::Storage;
use crate::NDArray;
use quill_core::{DType, Error, Result, Update};

/// The dtype a parameter of dtype `dtype` is updated in (and its state is kept in).
pub(crate) fn compute_dtype(op: &'static str, dtype: DType) -> Result<DType> {
    match dtype {
        DType::F64 => Ok(DType::F64),
        DType::F32 | DType::F16 | DType::BF16 => Ok(DType::F32),
        other => Err(Error::invalid(
            op,
            format!("only floating-point parameters can be optimized, got a {other} parameter"),
        )),
    }
}

/// A zero-filled state buffer for `param` (contiguous, of the compute dtype).
pub(crate) fn zeros_for(op: &'static str, param: &NDArray) -> Result<NDArray> {
    NDArray::zeros(param.shape(), compute_dtype(op, param.dtype())?)?.to_device(param.device())
}

/// A private contiguous copy of `src` in the compute dtype of `param` (for state that must not
/// alias anything the caller holds).
pub(crate) fn copy_for(op: &'static str, param: &NDArray, src: &NDArray) -> Result<NDArray> {
    Ok(src.astype(compute_dtype(op, param.dtype())?))
}

/// Applies `rule` to `param` (written in place) given `grad` and the param's `state` buffers,
/// which must be contiguous arrays of the compute dtype with the param's shape, on its device,
/// owned by the optimizer. A param that is already contiguous in its compute dtype is updated
/// directly in its buffer (the model sees the change through the shared buffer); any other
/// param is updated in a compact copy that is then written back.
pub(crate) fn apply(
    op: &'static str,
    rule: &Update,
    param: &NDArray,
    grad: &NDArray,
    state: &[&NDArray],
) -> Result<()> {
    if grad.shape() != param.shape() {
        return Err(Error::ShapeMismatch {
            op,
            lhs: param.shape().into(),
            rhs: grad.shape().into(),
            hint: " (parameter vs its gradient)".into(),
        });
    }
    let cd = compute_dtype(op, param.dtype())?;
    let dev = param.device();
    let n = param.numel();
    for s in state {
        let ok = s.dtype() == cd
            && s.is_contiguous()
            && s.numel() == n
            && s.device() == dev
            && !s.shares_storage_with(param);
        if !ok {
            return Err(Error::invalid(
                op,
                format!(
                    "internal: a state buffer is not a private contiguous {cd} array of {n} \
                     elements on {dev}"
                ),
            ));
        }
    }
    let direct = param.dtype() == cd && param.is_contiguous();
    let work = if direct {
        param.clone()
    } else {
        param.astype(cd)
    };
    // A gradient that is strided (a broadcast view, say), of another dtype or device, or that
    // shares the param's buffer (which the pass writes while reading the gradient) is copied.
    let grad = if grad.dtype() == cd
        && grad.is_contiguous()
        && grad.device() == dev
        && !grad.shares_storage_with(&work)
    {
        grad.clone()
    } else {
        grad.to_device(dev)?.astype(cd)
    };
    {
        let g = grad.read();
        let mut p = work.write();
        let mut guards: Vec<_> = state.iter().map(|s| s.write()).collect();
        let mut st: Vec<(&mut Storage, usize)> = guards
            .iter_mut()
            .zip(state)
            .map(|(g, s)| (&mut **g, s.offset()))
            .collect();
        Storage::update(
            rule,
            (&mut p, work.offset()),
            (&g, grad.offset()),
            &mut st,
            n,
        )?;
    }
    if !direct {
        param.assign(&work)?;
    }
    Ok(())
}
