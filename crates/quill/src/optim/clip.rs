//! Gradient clipping by the global L2 norm (`torch.nn.utils.clip_grad_norm_`).

use crate::Tensor;
use quill_core::{Error, Result};

/// The L2 norm of all the gradients of `params` together, computed in f64 (parameters without
/// a gradient count as zero). When `max_norm / (norm + 1e-6) < 1` every gradient is scaled by
/// that factor, as PyTorch does, and the norm before clipping is returned.
///
/// The scaled gradients are new arrays given to `set_grad`, not writes into the old ones: a
/// gradient array may be shared (the same array reaches both inputs of an `add`, or is the
/// seed the caller passed to `backward_with`), and scaling it in place would scale it twice or
/// change the caller's array. A non-finite norm is returned with the gradients untouched
/// (PyTorch would turn them into NaN), so the caller can skip the step.
pub fn clip_grad_norm(params: &[Tensor], max_norm: f64) -> Result<f64> {
    const OP: &str = "clip_grad_norm";
    if max_norm.is_nan() || max_norm < 0.0 {
        return Err(Error::invalid(
            OP,
            format!("max_norm must be >= 0, got {max_norm}"),
        ));
    }
    let grads: Vec<(&Tensor, Tensor)> = params
        .iter()
        .filter_map(|p| p.grad().map(|g| (p, g)))
        .collect();
    let mut total = 0.0;
    for (_, g) in &grads {
        if !g.dtype().is_float() {
            return Err(Error::invalid(
                OP,
                format!("gradients must be floating point, got {}", g.dtype()),
            ));
        }
        // quill-array's fused op: one pass on the CPU, the composite on other devices.
        total += g.array().sum_squares()?;
    }
    let norm = total.sqrt();
    let coef = max_norm / (norm + 1e-6);
    if norm.is_finite() && coef < 1.0 {
        for (p, g) in grads {
            p.set_grad(Some(Tensor::new(g.array().mul_scalar(coef)?)))?;
        }
    }
    Ok(norm)
}
