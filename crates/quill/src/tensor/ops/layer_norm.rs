//! Layer normalisation over the last dim as one op. On the CPU in f32 / f64 the forward and
//! the backward are each one pass over the rows (layer_norm_kernels); the composite it
//! replaced (mean, sub, square, mean, add, sqrt, div, mul, add and their backwards) took about
//! ten. Other dtypes and devices run the same formulas as NDArray ops. When the backward is
//! itself recorded (`create_graph`) it is written in Tensor ops, with the mean and 1/std
//! recomputed from `x`, so that gradients of gradients see their dependence on `x`.

use super::layer_norm_kernels::{self as kernels, Float};
use crate::tensor::{is_grad_enabled, Backward, Tensor};
use crate::{Device, NDArray};
use quill_core::{DType, Error, Result};

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
        if !is_grad_enabled() && host_dtype(&[x, w, b]).is_some() && g.dtype() == x.dtype() {
            return match x.dtype() {
                DType::F32 => self.host_backward::<f32>(g, x, w, b),
                _ => self.host_backward::<f64>(g, x, w, b),
            };
        }
        self.composite_backward(g, x, w, b)
    }
}

impl LayerNormOp {
    fn host_backward<R: Float>(
        &self,
        g: &Tensor,
        x: &Tensor,
        w: &Tensor,
        b: &Tensor,
    ) -> Result<Vec<Option<Tensor>>> {
        let (wv, mean, rstd) = (
            w.to_vec::<R>()?,
            self.mean.to_vec::<R>()?,
            self.rstd.to_vec::<R>()?,
        );
        // A pooled buffer that the kernel overwrites: no zeroing, no fresh pages. The kernel
        // computes x's gradient on the way to w's and b's, so it needs the buffer either way.
        let mut gx = quill_cpu::pool::take::<R>("layer_norm_backward", x.numel())?;
        // Read in place (no copies) when x and g are contiguous.
        let (gw, gb) = x.array().with_host_slice(|xv: &[R]| {
            g.array()
                .with_host_slice(|gv: &[R]| kernels::backward(xv, gv, &wv, &mean, &rstd, &mut gx))
        })??;
        let d = wv.len();
        let gx = if x.requires_grad() {
            Some(Tensor::new(NDArray::from_vec(gx, x.shape())?))
        } else {
            quill_cpu::pool::give(gx);
            None
        };
        let gw = w
            .requires_grad()
            .then(|| NDArray::from_vec(gw, &[d]).map(Tensor::new))
            .transpose()?;
        let gb = b
            .requires_grad()
            .then(|| NDArray::from_vec(gb, &[d]).map(Tensor::new))
            .transpose()?;
        Ok(vec![gx, gw, gb])
    }

    /// The backward in Tensor ops: differentiable again when recorded.
    fn composite_backward(
        &self,
        g: &Tensor,
        x: &Tensor,
        w: &Tensor,
        b: &Tensor,
    ) -> Result<Vec<Option<Tensor>>> {
        let (xc, rstd) = if is_grad_enabled() {
            let xc = x.sub(&x.mean(Some(&[-1]), true)?)?;
            let var = xc.square()?.mean(Some(&[-1]), true)?;
            (xc, var.add_scalar(self.eps)?.rsqrt()?)
        } else {
            let mean = Tensor::new(self.mean.clone());
            (x.sub(&mean)?, Tensor::new(self.rstd.clone()))
        };
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

/// The dtype of the host kernels when every tensor is f32 (or every one f64) on the CPU.
fn host_dtype(ts: &[&Tensor]) -> Option<DType> {
    let dt = ts[0].dtype();
    let ok = matches!(dt, DType::F32 | DType::F64)
        && ts
            .iter()
            .all(|t| t.dtype() == dt && t.device() == Device::Cpu);
    ok.then_some(dt)
}

fn host_forward<R: Float>(
    x: &NDArray,
    w: &NDArray,
    b: &NDArray,
    eps: f64,
) -> Result<(NDArray, NDArray, NDArray)> {
    let d = w.numel();
    let rows = x.numel().checked_div(d).unwrap_or(0);
    let (wv, bv) = (w.to_vec::<R>()?, b.to_vec::<R>()?);
    let mut y = quill_cpu::pool::take::<R>("layer_norm", x.numel())?;
    let (mut mean, mut rstd) = (vec![R::default(); rows], vec![R::default(); rows]);
    x.with_host_slice(|xs: &[R]| {
        kernels::forward(xs, &wv, &bv, eps, &mut y, &mut mean, &mut rstd)
    })?;
    let mut rshape = x.shape().to_vec();
    *rshape.last_mut().expect("rank >= 1") = 1;
    Ok((
        NDArray::from_vec(y, x.shape())?,
        NDArray::from_vec(mean, &rshape)?,
        NDArray::from_vec(rstd, &rshape)?,
    ))
}

impl Tensor {
    /// Layer normalisation over the last dim: `(x - mean) / sqrt(var + eps) * weight + bias`
    /// with each row's mean and biased variance; `weight` and `bias` have shape (D,) for x
    /// (..., D). PyTorch's `layer_norm` with `normalized_shape = [D]`.
    pub fn layer_norm(&self, weight: &Tensor, bias: &Tensor, eps: f64) -> Result<Tensor> {
        const OP: &str = "layer_norm";
        let d = weight.shape().first().copied().unwrap_or(0);
        if self.ndim() == 0
            || self.shape()[self.ndim() - 1] != d
            || weight.shape() != [d]
            || bias.shape() != [d]
        {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: self.shape().into(),
                rhs: weight.shape().into(),
                hint: format!(
                    " (x must be (..., D) with D = weight's and bias's length; bias is {:?})",
                    bias.shape()
                ),
            });
        }
        let (x, w, b) = (self.array(), weight.array(), bias.array());
        let (out, mean, rstd) = match host_dtype(&[self, weight, bias]) {
            Some(DType::F32) => host_forward::<f32>(x, w, b, eps)?,
            Some(_) => host_forward::<f64>(x, w, b, eps)?,
            None => {
                let mean = x.mean(Some(&[-1]), true)?;
                let centred = x.sub(&mean)?;
                let var = centred.square()?.mean(Some(&[-1]), true)?;
                let rstd = var.add_scalar(eps)?.rsqrt()?;
                let out = centred.mul(&rstd)?.mul(w)?.add(b)?;
                (out, mean, rstd)
            }
        };
        let op = LayerNormOp { eps, mean, rstd };
        Ok(Tensor::make(out, &[self, weight, bias], op))
    }
}
