//! Composite ops: plain functions over the primitives, so their gradients (of any order) come
//! from the primitives' rules with nothing more to write. Each runs in f32 under autocast
//! (a bf16 / f16 operand widened first, `f32_under_autocast`), as PyTorch's f32 list has them.

use super::{norm_axes, to_isize};
use crate::tensor::{autocast, Tensor};
use crate::NDArray;
use quill_core::Result;

/// Runs `f` on `x` widened to f32 when autocast is on and `x` is bf16 / f16; `None` when `x`
/// needs no widening (the caller then computes on `x` itself).
fn f32_under_autocast(
    x: &Tensor,
    f: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Option<Result<Tensor>> {
    match autocast::widened([x]) {
        Ok(None) => None,
        Ok(Some([w])) => Some(f(&w)),
        Err(e) => Some(Err(e)),
    }
}

impl Tensor {
    /// Mean over `axes` (None = all). The mean of nothing is NaN, as NumPy's.
    pub fn mean(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        if let Some(r) = f32_under_autocast(self, |x| x.mean(axes, keepdims)) {
            return r;
        }
        let s = self.sum(axes, keepdims)?;
        let n = reduced_count(self.shape(), axes);
        s.div_scalar(n as f64)
    }

    /// Variance over `axes` with `ddof` delta degrees of freedom (`ddof = 1`: unbiased).
    pub fn var(&self, axes: Option<&[isize]>, ddof: usize, keepdims: bool) -> Result<Tensor> {
        if let Some(r) = f32_under_autocast(self, |x| x.var(axes, ddof, keepdims)) {
            return r;
        }
        let m = self.mean(axes, true)?;
        let d = self.sub(&m)?;
        let n = reduced_count(self.shape(), axes);
        // |d|^2 for complex values (d times its conjugate, made real), NumPy's definition.
        let sq = if d.dtype().is_complex() {
            d.mul(&d.conj()?)?.real()?
        } else {
            d.square()?
        };
        sq.sum(axes, keepdims)?
            .div_scalar(n.saturating_sub(ddof) as f64)
    }

    /// Standard deviation: the square root of `var`.
    pub fn std(&self, axes: Option<&[isize]>, ddof: usize, keepdims: bool) -> Result<Tensor> {
        self.var(axes, ddof, keepdims)?.sqrt()
    }

    /// `log(sum(exp(x)))` over `axes`, computed stably by shifting by the (constant) maximum
    /// (of the real parts, for complex input, as PyTorch's).
    pub fn logsumexp(&self, axes: Option<&[isize]>, keepdims: bool) -> Result<Tensor> {
        if let Some(r) = f32_under_autocast(self, |x| x.logsumexp(axes, keepdims)) {
            return r;
        }
        // Complex values shift by their largest real part (PyTorch's complex logsumexp).
        let complex = self.dtype().is_complex();
        let m = if complex {
            self.array().real()?.max(axes, true)?
        } else {
            self.array().max(axes, true)?
        };
        // An infinite maximum would give inf - inf = nan: shift by 0 there instead.
        let finite = m.isfinite()?;
        let m = NDArray::where_(&finite, &m, &NDArray::zeros(&[], m.dtype())?)?;
        let m = if complex { m.astype(self.dtype())? } else { m };
        let mt = Tensor::new(m);
        let s = self.sub(&mt)?.exp()?.sum(axes, true)?.log()?.add(&mt)?;
        if keepdims {
            Ok(s)
        } else {
            let ax = norm_axes(axes, self.ndim());
            let shape: Vec<usize> = self
                .shape()
                .iter()
                .enumerate()
                .filter(|(i, _)| !ax.contains(i))
                .map(|(_, &d)| d)
                .collect();
            s.reshape(&to_isize(&shape))
        }
    }

    /// `x - logsumexp(x)` along `axis`.
    pub fn log_softmax(&self, axis: isize) -> Result<Tensor> {
        if let Some(r) = f32_under_autocast(self, |x| x.log_softmax(axis)) {
            return r;
        }
        self.sub(&self.logsumexp(Some(&[axis]), true)?)
    }

    /// `exp(x - m) / sum(exp(x - m))` along `axis` with `m` the (constant) maximum: exact for
    /// large logits, where `exp(log_softmax)` would inherit logsumexp's rounding.
    pub fn softmax(&self, axis: isize) -> Result<Tensor> {
        if let Some(r) = f32_under_autocast(self, |x| x.softmax(axis)) {
            return r;
        }
        let m = self.array().max(Some(&[axis]), true)?;
        let finite = m.isfinite()?;
        let m = NDArray::where_(&finite, &m, &NDArray::zeros(&[], m.dtype())?)?;
        let e = self.sub(&Tensor::new(m))?.exp()?;
        e.div(&e.sum(Some(&[axis]), true)?)
    }
}

/// How many input elements each output of a reduction over `axes` combines.
fn reduced_count(shape: &[usize], axes: Option<&[isize]>) -> usize {
    norm_axes(axes, shape.len())
        .iter()
        .map(|&a| shape[a])
        .product()
}
