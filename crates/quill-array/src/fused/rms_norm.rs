//! RMS normalisation over the last dim (Zhang & Sennrich 2019; PyTorch's `rms_norm`), forward
//! and backward, as fused ops: `x / sqrt(mean(x^2) + eps) * weight`. The CPU kernel (f32 /
//! f64) is one pass over the rows each way (`quill_cpu::fused::rms_norm`); the forward has a
//! CUDA kernel too (`quill-cuda/kernels/norm.cu`, one block per row), the backward runs its
//! composite on a GPU. The composite takes five passes forward and about eight backward. The saved statistic is each row's
//! `1 / sqrt(mean(x^2) + eps)`, shape (..., 1).

use super::{f32_f64, none, row_shape, run, FusedKind, FusedOp};
use crate::NDArray;
use quill_core::{DType, Error, Result};
use quill_cpu::fused::{rms_norm as kernel, Float};
use quill_cpu::pool;

/// The forward's registry entry.
pub(crate) const FORWARD: FusedKind = FusedKind {
    name: "rms_norm",
    cpu: f32_f64,
    cuda: if cfg!(feature = "cuda") {
        f32_f64
    } else {
        none
    },
    composite: &["square", "mean", "add", "rsqrt", "mul"],
};

/// The backward's registry entry.
pub(crate) const BACKWARD: FusedKind = FusedKind {
    name: "rms_norm_backward",
    cpu: f32_f64,
    cuda: none,
    composite: &["mul", "mean", "sub", "sum", "astype"],
};

/// `x` (..., D) and `w` (D); returns D.
fn check(op: &'static str, x: &NDArray, w: &NDArray) -> Result<usize> {
    let d = w.shape().first().copied().unwrap_or(0);
    if x.ndim() == 0 || x.shape()[x.ndim() - 1] != d || w.ndim() != 1 {
        return Err(Error::ShapeMismatch {
            op,
            lhs: x.shape().into(),
            rhs: w.shape().into(),
            hint: " (x must be (..., D) and weight (D))".into(),
        });
    }
    if !x.dtype().is_float() {
        return Err(Error::invalid(
            op,
            format!("needs a floating-point x, got {}", x.dtype()),
        ));
    }
    Ok(d)
}

struct Forward {
    eps: f64,
}

impl FusedOp for Forward {
    type Output = (NDArray, NDArray);
    fn kind(&self) -> &'static FusedKind {
        &FORWARD
    }
    fn check(&self, i: &[&NDArray]) -> Result<()> {
        check(FORWARD.name, i[0], i[1]).map(|_| ())
    }
    fn composite(&self, i: &[&NDArray]) -> Result<Self::Output> {
        let (x, w) = (i[0], i[1]);
        let rstd = x
            .square()?
            .mean(Some(&[-1]), true)?
            .add_scalar(self.eps)?
            .rsqrt()?;
        Ok((x.mul(&rstd)?.mul(w)?, rstd))
    }
    fn cpu(&self, i: &[&NDArray]) -> Result<Self::Output> {
        match i[0].dtype() {
            DType::F32 => self.host::<f32>(i),
            _ => self.host::<f64>(i),
        }
    }
    #[cfg(feature = "cuda")]
    fn cuda(&self, i: &[&NDArray]) -> Result<Self::Output> {
        use crate::backend::Storage;
        use crate::ndarray::Reads;
        // The kernel reads from element 0 of contiguous buffers.
        let fresh = |a: &NDArray| -> Result<NDArray> {
            if a.is_contiguous() && a.offset() == 0 {
                Ok(a.clone())
            } else {
                a.deep_copy()
            }
        };
        let (x, w) = (fresh(i[0])?, fresh(i[1])?);
        let cols = w.numel();
        let rows = x.numel().checked_div(cols).unwrap_or(0);
        let (y, rstd) = {
            let g = Reads::new([&x, &w]);
            let (xs, ws) = (
                g.get(0).try_cuda(FORWARD.name)?,
                g.get(1).try_cuda(FORWARD.name)?,
            );
            quill_cuda::ops::rms_norm(xs, ws, rows, cols, self.eps)?
        };
        Ok((
            NDArray::fresh(Storage::Cuda(y), x.shape())?,
            NDArray::fresh(Storage::Cuda(rstd), &row_shape(&x))?,
        ))
    }
}

impl Forward {
    fn host<R: Float>(&self, i: &[&NDArray]) -> Result<(NDArray, NDArray)> {
        let (x, w) = (i[0], i[1]);
        let rows = x.numel().checked_div(w.numel()).unwrap_or(0);
        let wv = w.to_vec::<R>()?;
        let mut y = pool::take::<R>(FORWARD.name, x.numel())?;
        let mut rstd = vec![R::default(); rows];
        x.with_host_slice(|xs: &[R]| kernel::forward(xs, &wv, self.eps, &mut y, &mut rstd))?;
        Ok((
            NDArray::from_vec(y, x.shape())?,
            NDArray::from_vec(rstd, &row_shape(x))?,
        ))
    }
}

struct Backward {
    /// Which of (gx, gw) to return.
    needs: [bool; 2],
}

impl FusedOp for Backward {
    type Output = [Option<NDArray>; 2];
    fn kind(&self) -> &'static FusedKind {
        &BACKWARD
    }
    /// `g`, `x` (..., D), `w` (D), `rstd` (..., 1).
    fn check(&self, i: &[&NDArray]) -> Result<()> {
        let (g, x, w, rstd) = (i[0], i[1], i[2], i[3]);
        check(BACKWARD.name, x, w)?;
        let rs = row_shape(x);
        if g.shape() != x.shape() || rstd.shape() != rs {
            return Err(Error::ShapeMismatch {
                op: BACKWARD.name,
                lhs: g.shape().into(),
                rhs: x.shape().into(),
                hint: format!(
                    " (the gradient must be x's shape and rstd {rs:?}; rstd is {:?})",
                    rstd.shape()
                ),
            });
        }
        Ok(())
    }
    fn composite(&self, i: &[&NDArray]) -> Result<Self::Output> {
        let (g, x, w, rstd) = (i[0], i[1], i[2], i[3]);
        let xhat = x.mul(rstd)?;
        let [nx, nw] = self.needs;
        let gx = nx
            .then(|| -> Result<NDArray> {
                let gy = g.mul(w)?;
                let c = gy.mul(&xhat)?.mean(Some(&[-1]), true)?;
                gy.sub(&xhat.mul(&c)?)?.mul(rstd)?.astype_if(x.dtype())
            })
            .transpose()?;
        let gw = nw
            .then(|| -> Result<NDArray> {
                let gxh = g.mul(&xhat)?;
                let lead: Vec<isize> = (0..x.ndim() as isize - 1).collect();
                let summed = if lead.is_empty() {
                    gxh
                } else {
                    gxh.sum(Some(&lead), false)?
                };
                summed.reshape(&[w.numel() as isize])?.astype_if(w.dtype())
            })
            .transpose()?;
        Ok([gx, gw])
    }
    fn cpu(&self, i: &[&NDArray]) -> Result<Self::Output> {
        match i[1].dtype() {
            DType::F32 => self.host::<f32>(i),
            _ => self.host::<f64>(i),
        }
    }
}

impl Backward {
    fn host<R: Float>(&self, i: &[&NDArray]) -> Result<[Option<NDArray>; 2]> {
        let (g, x, w, rstd) = (i[0], i[1], i[2], i[3]);
        let (wv, rv) = (w.to_vec::<R>()?, rstd.to_vec::<R>()?);
        let mut gx = pool::take::<R>(BACKWARD.name, x.numel())?;
        let gw = x.with_host_slice(|xv: &[R]| {
            g.with_host_slice(|gv: &[R]| kernel::backward(xv, gv, &wv, &rv, &mut gx))
        })??;
        let [nx, nw] = self.needs;
        let gx = if nx {
            Some(NDArray::from_vec(gx, x.shape())?)
        } else {
            pool::give(gx);
            None
        };
        let gw = nw.then(|| NDArray::from_vec(gw, &[wv.len()])).transpose()?;
        Ok([gx, gw])
    }
}

impl NDArray {
    /// RMS normalisation over the last dim: `x / sqrt(mean(x^2) + eps) * weight` per row,
    /// `weight` (D) for `self` (..., D). Returns the output and, for the backward, each row's
    /// `1 / sqrt(mean(x^2) + eps)` (shape (..., 1)). One fused op (see `quill_array::fused`).
    pub fn rms_norm(&self, weight: &NDArray, eps: f64) -> Result<(NDArray, NDArray)> {
        run(&Forward { eps }, &[self, weight])
    }

    /// The gradients of `rms_norm` at `self` (x) given the output's gradient `grad` and the
    /// forward's `rstd`: `[gx, gw]`, each computed only where `needs` asks.
    pub fn rms_norm_backward(
        &self,
        grad: &NDArray,
        weight: &NDArray,
        rstd: &NDArray,
        needs: [bool; 2],
    ) -> Result<[Option<NDArray>; 2]> {
        run(&Backward { needs }, &[grad, self, weight, rstd])
    }
}
