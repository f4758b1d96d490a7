//! The fused optimizer step on arrays: brings a parameter, its gradient and its state buffers
//! to contiguous buffers of one compute dtype on one device and hands them to the backend's
//! `update` (one pass per step; the rules are quill-core's `Update` values).

use super::NDArray;
use crate::backend::Storage;
use quill_core::{Error, Result, Update};

impl NDArray {
    /// Applies `rule` to this parameter (written in place) given `grad` and the param's `state` buffers,
    /// which must be contiguous arrays of the compute dtype with the param's shape, on its device,
    /// owned by the optimizer. A param that is already contiguous in its compute dtype is updated
    /// directly in its buffer (the model sees the change through the shared buffer); any other
    /// param is updated in a compact copy that is then written back.
    pub fn fused_update(
        &self,
        op: &'static str,
        rule: &Update,
        grad: &NDArray,
        state: &[&NDArray],
    ) -> Result<()> {
        let param = self;
        if grad.shape() != param.shape() {
            return Err(Error::ShapeMismatch {
                op,
                lhs: param.shape().into(),
                rhs: grad.shape().into(),
                hint: " (parameter vs its gradient)".into(),
            });
        }
        let cd = Update::compute_dtype(op, param.dtype())?;
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
            param.astype(cd)?
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
            grad.to_device(dev)?.astype(cd)?
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
}
