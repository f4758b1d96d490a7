//! Batch normalisation with batch statistics on arrays: the shape and dtype rules, compaction
//! of the operands (the kernels read a contiguous (n, c, inner) buffer) and the calls into the
//! backend's `batch_norm` / `batch_norm_backward`. f16 and bf16 compute in f32 and round once.

use super::conv::{compute_dtype, prepared};
use super::{check_alloc, NDArray, Reads};
use crate::backend::{colocate, Storage};
use quill_core::{Error, NormDims, Result};

/// Checks `x` (N, C, ...) against per-channel `weight` and `bias` (C,), one float dtype.
fn dims(op: &'static str, x: &NDArray, w: &NDArray, b: &NDArray, eps: f64) -> Result<NormDims> {
    let s = x.shape();
    let c = w.shape().first().copied().unwrap_or(0);
    if s.len() < 2 || s[1] != c || w.shape() != [c] || b.shape() != [c] {
        return Err(Error::ShapeMismatch {
            op,
            lhs: s.into(),
            rhs: w.shape().into(),
            hint: format!(
                " (x must be (N, C, ...) with C = weight's and bias's length; bias is {:?})",
                b.shape()
            ),
        });
    }
    if x.numel() == 0 {
        return Err(Error::invalid(
            op,
            format!("needs at least one value per channel, got shape {s:?}"),
        ));
    }
    if !(eps >= 0.0 && eps.is_finite()) {
        return Err(Error::invalid(
            op,
            format!("eps must be finite and >= 0, got {eps}"),
        ));
    }
    compute_dtype(op, x, w)?;
    compute_dtype(op, x, b)?;
    Ok(NormDims {
        n: s[0],
        c,
        inner: s[2..].iter().product(),
        eps,
        relu: false,
    })
}

impl NDArray {
    /// Batch normalisation of this (N, C, ...) float array with its own statistics over every
    /// dim but dim 1: `(y, mean, var)` with `y = (x - mean) / sqrt(var + eps) * weight + bias`,
    /// `mean` and the biased `var` of shape (C,). `weight` and `bias` are (C,) of x's dtype.
    pub fn batch_norm_train(
        &self,
        weight: &NDArray,
        bias: &NDArray,
        eps: f64,
    ) -> Result<(NDArray, NDArray, NDArray)> {
        self.batch_norm_impl(weight, bias, eps, false)
    }

    /// `batch_norm_train` followed by ReLU, in the same two passes: `(relu(y), mean, var)`.
    pub fn batch_norm_relu_train(
        &self,
        weight: &NDArray,
        bias: &NDArray,
        eps: f64,
    ) -> Result<(NDArray, NDArray, NDArray)> {
        self.batch_norm_impl(weight, bias, eps, true)
    }

    fn batch_norm_impl(
        &self,
        weight: &NDArray,
        bias: &NDArray,
        eps: f64,
        relu: bool,
    ) -> Result<(NDArray, NDArray, NDArray)> {
        const OP: &str = "batch_norm";
        let d = NormDims {
            relu,
            ..dims(OP, self, weight, bias, eps)?
        };
        let compute = compute_dtype(OP, self, weight)?;
        check_alloc(OP, self.numel(), compute)?;
        let arrays = colocate(OP, [self, weight, bias])?;
        let [x, w, b] = [0, 1, 2].map(|i| prepared(&arrays[i], compute));
        let (x, w, b) = (x?, w?, b?);
        let (y, m, v) = {
            let r = Reads::new([&x, &w, &b]);
            Storage::batch_norm(
                (r.get(0), x.offset()),
                (r.get(1), w.offset()),
                (r.get(2), b.offset()),
                &d,
            )?
        };
        let dt = self.dtype();
        let back = |s: Storage, shape: &[usize]| -> Result<NDArray> {
            let a = NDArray::fresh(s, shape)?;
            Ok(if a.dtype() != dt { a.astype(dt)? } else { a })
        };
        Ok((back(y, self.shape())?, back(m, &[d.c])?, back(v, &[d.c])?))
    }

    /// The gradients `(dx, dweight, dbias)` of `batch_norm_train` at this input, given the
    /// `weight`, the `var` the forward returned, the output's gradient `grad` and the same
    /// `eps`. The mean is recomputed from `x` in the pass that sums the gradient: the
    /// forward's mean, rounded to x's dtype, would lose `sum(g * (x - mean))` to cancellation
    /// when |mean| >> std.
    pub fn batch_norm_backward(
        &self,
        grad: &NDArray,
        weight: &NDArray,
        var: &NDArray,
        eps: f64,
    ) -> Result<(NDArray, NDArray, NDArray)> {
        self.batch_norm_backward_impl(grad, weight, var, eps, None)
    }

    /// The gradients of `batch_norm_relu_train`: `batch_norm_backward` of `grad` passed
    /// only where the forward's output `y` is positive.
    pub fn batch_norm_relu_backward(
        &self,
        y: &NDArray,
        grad: &NDArray,
        weight: &NDArray,
        var: &NDArray,
        eps: f64,
    ) -> Result<(NDArray, NDArray, NDArray)> {
        self.batch_norm_backward_impl(grad, weight, var, eps, Some(y))
    }

    fn batch_norm_backward_impl(
        &self,
        grad: &NDArray,
        weight: &NDArray,
        var: &NDArray,
        eps: f64,
        y: Option<&NDArray>,
    ) -> Result<(NDArray, NDArray, NDArray)> {
        const OP: &str = "batch_norm_backward";
        let d = NormDims {
            relu: y.is_some(),
            ..dims(OP, self, weight, var, eps)?
        };
        let checks = [
            (grad, "grad", self.shape()),
            (var, "var", weight.shape()),
            (y.unwrap_or(grad), "y", self.shape()),
        ];
        for (a, what, want) in checks {
            if a.shape() != want {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    lhs: a.shape().into(),
                    rhs: want.into(),
                    hint: format!(" ({what} must have the shape the forward gave)"),
                });
            }
            compute_dtype(OP, self, a)?;
        }
        let compute = compute_dtype(OP, self, weight)?;
        check_alloc(OP, self.numel(), compute)?;
        // Without the ReLU the gradient stands in for `y` (the kernel does not read it).
        let arrays = colocate(OP, [self, grad, weight, var, y.unwrap_or(grad)])?;
        let mut p: Vec<NDArray> = arrays[..4]
            .iter()
            .map(|a| prepared(a, compute))
            .collect::<Result<_>>()?;
        p.push(match y {
            Some(_) => prepared(&arrays[4], compute)?,
            None => p[1].clone(),
        });
        let (gx, gw, gb) = {
            let r = Reads::new([&p[0], &p[1], &p[2], &p[3], &p[4]]);
            let at = |i: usize| (r.get(i), p[i].offset());
            Storage::batch_norm_backward([at(0), at(1), at(2), at(3), at(4)], &d)?
        };
        let dt = self.dtype();
        let back = |s: Storage, shape: &[usize]| -> Result<NDArray> {
            let a = NDArray::fresh(s, shape)?;
            Ok(if a.dtype() != dt { a.astype(dt)? } else { a })
        };
        Ok((
            back(gx, self.shape())?,
            back(gw, &[d.c])?,
            back(gb, &[d.c])?,
        ))
    }
}
