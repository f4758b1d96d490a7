//! Batch normalisation with batch statistics as one op over quill-array's fused op
//! (`NDArray::batch_norm_train` and its backward: the device's kernel, on the CPU two passes
//! each way, or the composite in array ops). Only the per-channel mean and variance are kept
//! for the backward. When the backward is itself recorded (`create_graph`) it is the closed
//! form `gx = w * invstd * (g - mean(g) - xhat * mean(g * xhat))` in Tensor ops, with the
//! centred input and `invstd` recomputed from `x`, so that gradients of gradients see their
//! dependence on `x`. `batch_norm_relu_train` is the same op with a ReLU on its output: the
//! kernels clamp and gate inside their passes; the Tensor-op form masks the gradient by
//! `output > 0` first.

use super::{mul_mask, to_isize};
use crate::tensor::{autocast, is_grad_enabled, Backward, Tensor};
use crate::NDArray;
use quill_core::{Error, Result};

struct BatchNormTrain {
    /// Every axis but the channel axis 1.
    axes: Vec<isize>,
    eps: f64,
    /// The batch mean and biased variance, shape (1, C, 1, ...).
    mean: NDArray,
    var: NDArray,
    /// The output, when a ReLU is fused in (`batch_norm_relu_train`): it gates the gradient.
    relu_out: Option<NDArray>,
}

impl BatchNormTrain {
    /// `(x - mean, invstd)` recomputed in Tensor ops, for the recorded backward.
    fn stats(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        let xc = x.sub(&x.mean(Some(&self.axes), true)?)?;
        let var = xc.square()?.mean(Some(&self.axes), true)?;
        let invstd = var.add_scalar(self.eps)?.rsqrt()?;
        Ok((xc, invstd))
    }
}

impl Backward for BatchNormTrain {
    fn name(&self) -> &'static str {
        "BatchNormBackward"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (x, w, b) = (&inputs[0], &inputs[1], &inputs[2]);
        let c = w.shape()[0] as isize;
        if !is_grad_enabled() {
            // quill-array's fused op: the device's kernel or the closed form in array ops.
            let (xa, ga, wa) = (x.array(), g.array(), w.array());
            let var = self.var.reshape(&[c])?;
            let (gx, gw, gb) = match &self.relu_out {
                Some(y) => xa.batch_norm_relu_backward(y, ga, wa, &var, self.eps)?,
                None => xa.batch_norm_backward(ga, wa, &var, self.eps)?,
            };
            let keep = |t: NDArray, of: &Tensor| -> Result<Option<Tensor>> {
                if !of.requires_grad() {
                    return Ok(None);
                }
                let t = if t.dtype() == of.dtype() {
                    t
                } else {
                    t.astype(of.dtype())?
                };
                Ok(Some(Tensor::new(t)))
            };
            return Ok(vec![keep(gx, x)?, keep(gw, w)?, keep(gb, b)?]);
        }
        let gated;
        let g = match &self.relu_out {
            Some(y) => {
                gated = mul_mask(g, &y.gt_scalar(0.0)?)?;
                &gated
            }
            None => g,
        };
        let axes = Some(&self.axes[..]);
        let pshape = self.mean.shape().to_vec();
        let (xc, invstd) = self.stats(x)?;
        let n = (x.numel() / (c.max(1) as usize)).max(1) as f64;
        let sum_g = g.sum(axes, true)?;
        let sum_gxc = g.mul(&xc)?.sum(axes, true)?;
        let gw = w
            .requires_grad()
            .then(|| sum_gxc.mul(&invstd)?.reshape(&[c])?.astype(w.dtype()))
            .transpose()?;
        let gb = b
            .requires_grad()
            .then(|| sum_g.reshape(&[c])?.astype(b.dtype()))
            .transpose()?;
        let gx = x
            .requires_grad()
            .then(|| -> Result<Tensor> {
                // gx = k1 * g - k2 * xc - k1 * mean(g), per-channel k1 = w * invstd and
                // k2 = k1 * invstd^2 * mean(g * xc).
                let k1 = w.reshape(&to_isize(&pshape))?.mul(&invstd)?;
                let k2 = k1
                    .mul(&invstd.square()?)?
                    .mul(&sum_gxc)?
                    .mul_scalar(1.0 / n)?;
                let k0 = k1.mul(&sum_g)?.mul_scalar(-1.0 / n)?;
                g.mul(&k1)?.sub(&xc.mul(&k2)?)?.add(&k0)?.astype(x.dtype())
            })
            .transpose()?;
        Ok(vec![gx, gw, gb])
    }
}

impl Tensor {
    /// Batch normalisation of `x` (N, C, ...) with the batch's own statistics over every dim
    /// but dim 1: `(x - mean) / sqrt(var + eps) * weight + bias` with the biased variance.
    /// Returns the output and the batch mean and biased variance (shape (C,)), for the
    /// caller's running statistics. `weight` and `bias` have shape (C,).
    pub fn batch_norm_train(
        &self,
        weight: &Tensor,
        bias: &Tensor,
        eps: f64,
    ) -> Result<(Tensor, NDArray, NDArray)> {
        self.batch_norm_impl(weight, bias, eps, false)
    }

    /// `batch_norm_train` followed by `relu`, as one op: on the CPU it costs the passes of
    /// the batch norm alone each way (no ReLU pass forward, no mask backward). Same results
    /// and gradients as the two ops.
    pub fn batch_norm_relu_train(
        &self,
        weight: &Tensor,
        bias: &Tensor,
        eps: f64,
    ) -> Result<(Tensor, NDArray, NDArray)> {
        self.batch_norm_impl(weight, bias, eps, true)
    }

    fn batch_norm_impl(
        &self,
        weight: &Tensor,
        bias: &Tensor,
        eps: f64,
        relu: bool,
    ) -> Result<(Tensor, NDArray, NDArray)> {
        const OP: &str = "batch_norm";
        // A norm runs in f32 under autocast: bf16 statistics would round the running ones.
        if let Some([x, w, b]) = autocast::widened([self, weight, bias])? {
            return x.batch_norm_impl(&w, &b, eps, relu);
        }
        let c = weight.shape().first().copied().unwrap_or(0);
        if self.ndim() < 2 || self.shape()[1] != c || weight.shape() != [c] || bias.shape() != [c] {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: self.shape().into(),
                rhs: weight.shape().into(),
                hint: format!(
                    " (x must be (N, C, ...) with C = weight's and bias's length; bias is {:?})",
                    bias.shape()
                ),
            });
        }
        if self.numel() == 0 {
            return Err(Error::invalid(
                OP,
                format!(
                    "needs at least one value per channel, got shape {:?}",
                    self.shape()
                ),
            ));
        }
        let axes: Vec<isize> = (0..self.ndim() as isize).filter(|&a| a != 1).collect();
        let mut pshape = vec![1isize; self.ndim()];
        pshape[1] = c as isize;
        // quill-array's fused op: the device's kernel or the composite in array ops.
        let (x, w, b) = (self.array(), weight.array(), bias.array());
        let (out, m, v) = if relu {
            x.batch_norm_relu_train(w, b, eps)?
        } else {
            x.batch_norm_train(w, b, eps)?
        };
        let op = BatchNormTrain {
            axes,
            eps,
            mean: m.reshape(&pshape)?,
            var: v.reshape(&pshape)?,
            relu_out: relu.then(|| out.clone()),
        };
        Ok((Tensor::make(out, &[self, weight, bias], op), m, v))
    }
}
