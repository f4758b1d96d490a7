//! RMS normalisation over the last dim as one op: the forward and, when the backward is not
//! itself recorded, the backward are quill-array's fused ops (`NDArray::rms_norm`: the
//! device's kernel or the composite). When the backward is recorded (`create_graph`) it is
//! written in Tensor ops with `1 / rms` recomputed from `x`, so that gradients of gradients
//! see their dependence on `x`.

use crate::tensor::{autocast, is_grad_enabled, Backward, Tensor};
use crate::NDArray;
use quill_core::Result;

struct RmsNormOp {
    eps: f64,
    /// Per row (the input's shape with the last dim 1): 1 / sqrt(mean(x^2) + eps).
    rstd: NDArray,
}

impl Backward for RmsNormOp {
    fn name(&self) -> &'static str {
        "RmsNormBackward"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (x, w) = (&inputs[0], &inputs[1]);
        if is_grad_enabled() {
            return self.composite_backward(g, x, w);
        }
        let needs = [x.requires_grad(), w.requires_grad()];
        let grads = x
            .array()
            .rms_norm_backward(g.array(), w.array(), &self.rstd, needs)?;
        Ok(grads.into_iter().map(|t| t.map(Tensor::new)).collect())
    }
}

impl RmsNormOp {
    /// The backward in Tensor ops (1/rms recomputed from `x`): differentiable again.
    fn composite_backward(
        &self,
        g: &Tensor,
        x: &Tensor,
        w: &Tensor,
    ) -> Result<Vec<Option<Tensor>>> {
        let rstd = x
            .square()?
            .mean(Some(&[-1]), true)?
            .add_scalar(self.eps)?
            .rsqrt()?;
        let xhat = x.mul(&rstd)?;
        let gx = x
            .requires_grad()
            .then(|| -> Result<Tensor> {
                let gy = g.mul(w)?;
                let c = gy.mul(&xhat)?.mean(Some(&[-1]), true)?;
                gy.sub(&xhat.mul(&c)?)?.mul(&rstd)?.astype(x.dtype())
            })
            .transpose()?;
        let gw = w
            .requires_grad()
            .then(|| -> Result<Tensor> {
                let lead: Vec<isize> = (0..x.ndim() as isize - 1).collect();
                let gxh = g.mul(&xhat)?;
                let summed = if lead.is_empty() {
                    gxh
                } else {
                    gxh.sum(Some(&lead), false)?
                };
                summed.reshape(&[w.numel() as isize])?.astype(w.dtype())
            })
            .transpose()?;
        Ok(vec![gx, gw])
    }
}

impl Tensor {
    /// RMS normalisation over the last dim: `x / sqrt(mean(x^2) + eps) * weight`, `weight`
    /// (D) for `self` (..., D) (PyTorch's `rms_norm` with `normalized_shape = [D]`).
    /// Differentiable in both, to any order.
    ///
    /// ```
    /// use quill::Tensor;
    /// let x = Tensor::from_vec(vec![3.0f32, 4.0], &[1, 2])?;
    /// let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
    /// // rms = sqrt((9 + 16) / 2); eps 0.
    /// let y = x.rms_norm(&w, 0.0)?.to_vec::<f32>()?;
    /// let rms = 12.5f32.sqrt();
    /// assert!((y[0] - 3.0 / rms).abs() < 1e-6 && (y[1] - 8.0 / rms).abs() < 1e-6);
    /// # Ok::<(), quill::Error>(())
    /// ```
    pub fn rms_norm(&self, weight: &Tensor, eps: f64) -> Result<Tensor> {
        if let Some([x, w]) = autocast::widened([self, weight])? {
            return x.rms_norm(&w, eps);
        }
        let (out, rstd) = self.array().rms_norm(weight.array(), eps)?;
        Ok(Tensor::make(out, &[self, weight], RmsNormOp { eps, rstd }))
    }
}
