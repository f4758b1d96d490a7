//! Layer normalisation over the last dim as one op: the forward and, when the backward is
//! not itself recorded, the backward are quill-array's fused ops (`NDArray::layer_norm`, which
//! pick the device's kernel or the composite). When the backward is recorded (`create_graph`)
//! it is written in Tensor ops, with the mean and 1/std recomputed from `x`, so that
//! gradients of gradients see their dependence on `x`.

use crate::tensor::{autocast, is_grad_enabled, Backward, Tensor};
use crate::NDArray;
use quill_core::Result;

struct LayerNormOp {
    eps: f64,
    /// Per row (the input's shape with the last dim 1): the mean and 1 / sqrt(var + eps).
    mean: NDArray,
    rstd: NDArray,
}

impl Backward for LayerNormOp {
    fn name(&self) -> &'static str {
        "LayerNormBackward"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (x, w, b) = (&inputs[0], &inputs[1], &inputs[2]);
        if is_grad_enabled() {
            return self.composite_backward(g, x, w, b);
        }
        let needs = [x.requires_grad(), w.requires_grad(), b.requires_grad()];
        let grads =
            x.array()
                .layer_norm_backward(g.array(), w.array(), &self.mean, &self.rstd, needs)?;
        // b's dtype may differ from w's (the fused op returns w's).
        let dtypes = [x.dtype(), w.dtype(), b.dtype()];
        grads
            .into_iter()
            .zip(dtypes)
            .map(|(t, d)| {
                t.map(|t| {
                    let t = if t.dtype() == d { t } else { t.astype(d)? };
                    Ok(Tensor::new(t))
                })
                .transpose()
            })
            .collect()
    }
}

impl LayerNormOp {
    /// The backward in Tensor ops (mean and 1/std recomputed from `x`): differentiable again.
    fn composite_backward(
        &self,
        g: &Tensor,
        x: &Tensor,
        w: &Tensor,
        b: &Tensor,
    ) -> Result<Vec<Option<Tensor>>> {
        let xc = x.sub(&x.mean(Some(&[-1]), true)?)?;
        let var = xc.square()?.mean(Some(&[-1]), true)?;
        let rstd = var.add_scalar(self.eps)?.rsqrt()?;
        let xhat = xc.mul(&rstd)?;
        let d = w.shape()[0] as isize;
        let lead: Vec<isize> = (0..x.ndim() as isize - 1).collect();
        let over_rows = |t: Tensor| -> Result<Tensor> {
            if lead.is_empty() {
                Ok(t)
            } else {
                t.sum(Some(&lead), false)?.reshape(&[d])
            }
        };
        let gw = w
            .requires_grad()
            .then(|| over_rows(g.mul(&xhat)?)?.astype(w.dtype()))
            .transpose()?;
        let gb = b
            .requires_grad()
            .then(|| over_rows(g.clone())?.astype(b.dtype()))
            .transpose()?;
        let gx = x
            .requires_grad()
            .then(|| -> Result<Tensor> {
                let gy = g.mul(w)?;
                let a = gy.mean(Some(&[-1]), true)?;
                let c = gy.mul(&xhat)?.mean(Some(&[-1]), true)?;
                gy.sub(&a)?
                    .sub(&xhat.mul(&c)?)?
                    .mul(&rstd)?
                    .astype(x.dtype())
            })
            .transpose()?;
        Ok(vec![gx, gw, gb])
    }
}

impl Tensor {
    /// Layer normalisation over the last dim: `(x - mean) / sqrt(var + eps) * weight + bias`
    /// with each row's mean and biased variance; `weight` and `bias` have shape (D,) for x
    /// (..., D). PyTorch's `layer_norm` with `normalized_shape = [D]`.
    ///
    /// Under [`autocast`](crate::autocast()) bf16 / f16 operands are widened and the result is
    /// f32 (a norm's statistics need f32).
    pub fn layer_norm(&self, weight: &Tensor, bias: &Tensor, eps: f64) -> Result<Tensor> {
        if let Some([x, w, b]) = autocast::widened([self, weight, bias])? {
            return x.layer_norm(&w, &b, eps);
        }
        let (out, mean, rstd) = self.array().layer_norm(weight.array(), bias.array(), eps)?;
        let op = LayerNormOp { eps, mean, rstd };
        Ok(Tensor::make(out, &[self, weight, bias], op))
    }
}
