//! Layer normalisation over the last dim, forward and backward, as fused ops. The CPU kernel
//! (f32 / f64) is one pass over the rows each way (`quill_cpu::fused::layer_norm`); the
//! composite (mean, sub, square, mean, add, rsqrt, mul, mul, add) takes about ten. The saved
//! statistics are each row's mean and `1 / sqrt(var + eps)` (biased variance), shape
//! (..., 1).

use super::{f32_f64, none, row_shape, run, FusedKind, FusedOp};
use crate::NDArray;
use quill_core::{Error, Result};
use quill_cpu::fused::{layer_norm as kernel, Float};
use quill_cpu::pool;

/// The forward's registry entry.
pub(crate) const FORWARD: FusedKind = FusedKind {
    name: "layer_norm",
    cpu: f32_f64,
    cuda: none,
    composite: &["mean", "sub", "square", "add", "rsqrt", "mul"],
};

/// The backward's registry entry.
pub(crate) const BACKWARD: FusedKind = FusedKind {
    name: "layer_norm_backward",
    cpu: f32_f64,
    cuda: none,
    composite: &["mean", "sub", "mul", "sum", "astype"],
};

/// `x` (..., D), `w` and `b` (D).
fn check(op: &'static str, x: &NDArray, w: &NDArray, b: &NDArray) -> Result<usize> {
    let d = w.shape().first().copied().unwrap_or(0);
    if x.ndim() == 0 || x.shape()[x.ndim() - 1] != d || w.shape() != [d] || b.shape() != [d] {
        return Err(Error::ShapeMismatch {
            op,
            lhs: x.shape().into(),
            rhs: w.shape().into(),
            hint: format!(
                " (x must be (..., D) with D = weight's and bias's length; bias is {:?})",
                b.shape()
            ),
        });
    }
    Ok(d)
}

struct Forward {
    eps: f64,
}

impl FusedOp for Forward {
    type Output = (NDArray, NDArray, NDArray);
    fn kind(&self) -> &'static FusedKind {
        &FORWARD
    }
    fn check(&self, i: &[&NDArray]) -> Result<()> {
        check(FORWARD.name, i[0], i[1], i[2]).map(|_| ())
    }
    fn composite(&self, i: &[&NDArray]) -> Result<Self::Output> {
        let (x, w, b) = (i[0], i[1], i[2]);
        let mean = x.mean(Some(&[-1]), true)?;
        let centred = x.sub(&mean)?;
        let var = centred.square()?.mean(Some(&[-1]), true)?;
        let rstd = var.add_scalar(self.eps)?.rsqrt()?;
        let out = centred.mul(&rstd)?.mul(w)?.add(b)?;
        Ok((out, mean, rstd))
    }
    fn cpu(&self, i: &[&NDArray]) -> Result<Self::Output> {
        match i[0].dtype() {
            quill_core::DType::F32 => self.host::<f32>(i),
            _ => self.host::<f64>(i),
        }
    }
}

impl Forward {
    fn host<R: Float>(&self, i: &[&NDArray]) -> Result<(NDArray, NDArray, NDArray)> {
        let (x, w, b) = (i[0], i[1], i[2]);
        let rows = x.numel().checked_div(w.numel()).unwrap_or(0);
        let (wv, bv) = (w.to_vec::<R>()?, b.to_vec::<R>()?);
        // A pooled buffer that the kernel overwrites: no zeroing, no fresh pages.
        let mut y = pool::take::<R>(FORWARD.name, x.numel())?;
        let (mut mean, mut rstd) = (vec![R::default(); rows], vec![R::default(); rows]);
        x.with_host_slice(|xs: &[R]| {
            kernel::forward(xs, &wv, &bv, self.eps, &mut y, &mut mean, &mut rstd)
        })?;
        let rs = row_shape(x);
        Ok((
            NDArray::from_vec(y, x.shape())?,
            NDArray::from_vec(mean, &rs)?,
            NDArray::from_vec(rstd, &rs)?,
        ))
    }
}

struct Backward {
    /// Which of (gx, gw, gb) to return.
    needs: [bool; 3],
}

impl FusedOp for Backward {
    type Output = [Option<NDArray>; 3];
    fn kind(&self) -> &'static FusedKind {
        &BACKWARD
    }
    /// `g`, `x` (..., D), `w` (D), `mean`, `rstd` (..., 1).
    fn check(&self, i: &[&NDArray]) -> Result<()> {
        let (g, x, w, mean, rstd) = (i[0], i[1], i[2], i[3], i[4]);
        check(BACKWARD.name, x, w, w)?;
        let rs = row_shape(x);
        if g.shape() != x.shape() || mean.shape() != rs || rstd.shape() != rs {
            return Err(Error::ShapeMismatch {
                op: BACKWARD.name,
                lhs: g.shape().into(),
                rhs: x.shape().into(),
                hint: format!(
                    " (the gradient must be x's shape and mean / rstd {rs:?}; they are {:?} \
                     and {:?})",
                    mean.shape(),
                    rstd.shape()
                ),
            });
        }
        Ok(())
    }
    fn composite(&self, i: &[&NDArray]) -> Result<Self::Output> {
        let (g, x, w, mean, rstd) = (i[0], i[1], i[2], i[3], i[4]);
        let xhat = x.sub(mean)?.mul(rstd)?;
        let d = w.numel() as isize;
        let lead: Vec<isize> = (0..x.ndim() as isize - 1).collect();
        let over_rows = |t: NDArray| -> Result<NDArray> {
            if lead.is_empty() {
                Ok(t)
            } else {
                t.sum(Some(&lead), false)?.reshape(&[d])
            }
        };
        let [nx, nw, nb] = self.needs;
        let gx = nx
            .then(|| -> Result<NDArray> {
                let gy = g.mul(w)?;
                let a = gy.mean(Some(&[-1]), true)?;
                let c = gy.mul(&xhat)?.mean(Some(&[-1]), true)?;
                gy.sub(&a)?
                    .sub(&xhat.mul(&c)?)?
                    .mul(rstd)?
                    .astype_if(x.dtype())
            })
            .transpose()?;
        let gw = nw
            .then(|| over_rows(g.mul(&xhat)?)?.astype_if(w.dtype()))
            .transpose()?;
        let gb = nb
            .then(|| over_rows(g.clone())?.astype_if(w.dtype()))
            .transpose()?;
        Ok([gx, gw, gb])
    }
    fn cpu(&self, i: &[&NDArray]) -> Result<Self::Output> {
        match i[1].dtype() {
            quill_core::DType::F32 => self.host::<f32>(i),
            _ => self.host::<f64>(i),
        }
    }
}

impl Backward {
    fn host<R: Float>(&self, i: &[&NDArray]) -> Result<[Option<NDArray>; 3]> {
        let (g, x, w, mean, rstd) = (i[0], i[1], i[2], i[3], i[4]);
        let (wv, mv, rv) = (w.to_vec::<R>()?, mean.to_vec::<R>()?, rstd.to_vec::<R>()?);
        // The kernel computes x's gradient on the way to w's and b's: it needs the buffer
        // either way.
        let mut gx = pool::take::<R>(BACKWARD.name, x.numel())?;
        // Read in place (no copies) when x and g are contiguous.
        let (gw, gb) = x.with_host_slice(|xv: &[R]| {
            g.with_host_slice(|gv: &[R]| kernel::backward(xv, gv, &wv, &mv, &rv, &mut gx))
        })??;
        let d = wv.len();
        let [nx, nw, nb] = self.needs;
        let gx = if nx {
            Some(NDArray::from_vec(gx, x.shape())?)
        } else {
            pool::give(gx);
            None
        };
        let gw = nw.then(|| NDArray::from_vec(gw, &[d])).transpose()?;
        let gb = nb.then(|| NDArray::from_vec(gb, &[d])).transpose()?;
        Ok([gx, gw, gb])
    }
}

impl NDArray {
    /// Layer normalisation over the last dim: `(x - mean) / sqrt(var + eps) * weight + bias`
    /// per row, with each row's mean and biased variance; `weight` and `bias` are (D) for
    /// `self` (..., D). Returns the output and, for the backward, each row's mean and
    /// `1 / sqrt(var + eps)` (shape (..., 1)). One fused op (see `quill_array::fused`).
    pub fn layer_norm(
        &self,
        weight: &NDArray,
        bias: &NDArray,
        eps: f64,
    ) -> Result<(NDArray, NDArray, NDArray)> {
        run(&Forward { eps }, &[self, weight, bias])
    }

    /// The gradients of `layer_norm` at `self` (x) given the output's gradient `grad` and the
    /// forward's `mean` / `rstd`: `[gx, gw, gb]`, each computed only where `needs` asks.
    pub fn layer_norm_backward(
        &self,
        grad: &NDArray,
        weight: &NDArray,
        mean: &NDArray,
        rstd: &NDArray,
        needs: [bool; 3],
    ) -> Result<[Option<NDArray>; 3]> {
        run(&Backward { needs }, &[grad, self, weight, mean, rstd])
    }
}
