//! Batch normalisation with batch statistics (optionally followed by a ReLU), forward and
//! backward, as fused ops. The CPU kernel (`quill_cpu::batchnorm`: two passes each way, f16 and
//! bf16 computed in f32 and rounded once) runs on contiguous (n, c, inner) operands; the
//! composite is six array passes forward and the closed form
//! `gx = w * invstd * (g - mean(g) - xhat * mean(g * xhat))` backward, on any device. The
//! backward recomputes the mean from `x`: the forward's mean rounded to x's dtype would lose
//! `sum(g * (x - mean))` to cancellation when |mean| >> std.

use super::{floats, run, FusedKind, FusedOp};
use crate::backend::Storage;
use crate::ndarray::{check_alloc, compute_dtype, prepared, Reads};
use crate::NDArray;
use quill_core::{DType, Error, NormDims, Result};
use quill_cpu::batchnorm;

/// The forward's registry entry.
pub(crate) const FORWARD: FusedKind = FusedKind {
    name: "batch_norm",
    cpu: floats,
    cuda: super::none,
    composite: &["mean", "sub", "square", "add", "rsqrt", "mul", "relu"],
};

/// The backward's registry entry.
pub(crate) const BACKWARD: FusedKind = FusedKind {
    name: "batch_norm_backward",
    cpu: floats,
    cuda: super::none,
    composite: &["mean", "sub", "sum", "mul", "add", "rsqrt", "square", "gt"],
};

/// Checks `x` (N, C, ...) against per-channel `weight` and `bias` (C,), float dtypes (mixed
/// dtypes run the composite, which promotes as the elementwise ops do).
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
    for a in [x, w, b] {
        if !a.dtype().is_float() {
            return Err(Error::invalid(
                op,
                format!("needs floating-point operands, got {}", a.dtype()),
            ));
        }
    }
    Ok(NormDims {
        n: s[0],
        c,
        inner: s[2..].iter().product(),
        eps,
        relu: false,
    })
}

/// Every axis but the channel axis 1, and the (1, C, 1, ...) shape of per-channel values.
fn axes_and_channel_shape(x: &NDArray, c: usize) -> (Vec<isize>, Vec<isize>) {
    let axes = (0..x.ndim() as isize).filter(|&a| a != 1).collect();
    let mut pshape = vec![1isize; x.ndim()];
    pshape[1] = c as isize;
    (axes, pshape)
}

/// A kernel output as an array of `shape` in `dtype` (the kernels compute f16 / bf16 in f32).
fn back(s: quill_cpu::CpuStorage, shape: &[usize], dtype: DType) -> Result<NDArray> {
    NDArray::fresh(Storage::Cpu(s), shape)?.astype_if(dtype)
}

struct Forward {
    eps: f64,
    relu: bool,
}

impl FusedOp for Forward {
    type Output = (NDArray, NDArray, NDArray);
    fn kind(&self) -> &'static FusedKind {
        &FORWARD
    }
    fn check(&self, i: &[&NDArray]) -> Result<()> {
        dims(FORWARD.name, i[0], i[1], i[2], self.eps).map(|_| ())
    }
    fn composite(&self, i: &[&NDArray]) -> Result<Self::Output> {
        let (x, w, b) = (i[0], i[1], i[2]);
        let (axes, pshape) = axes_and_channel_shape(x, w.numel());
        let mean = x.mean(Some(&axes), true)?;
        let centred = x.sub(&mean)?;
        let var = centred.square()?.mean(Some(&axes), true)?;
        let scale = w
            .reshape(&pshape)?
            .mul(&var.add_scalar(self.eps)?.rsqrt()?)?;
        let mut y = centred.mul(&scale)?.add(&b.reshape(&pshape)?)?;
        if self.relu {
            y = y.relu()?;
        }
        Ok((y, mean.reshape(&[-1])?, var.reshape(&[-1])?))
    }
    fn cpu(&self, i: &[&NDArray]) -> Result<Self::Output> {
        let (x, w, b) = (i[0], i[1], i[2]);
        let d = NormDims {
            relu: self.relu,
            ..dims(FORWARD.name, x, w, b, self.eps)?
        };
        let compute = compute_dtype(FORWARD.name, x, w)?;
        check_alloc(FORWARD.name, x.numel(), compute)?;
        let [x, w, b] = [x, w, b].map(|a| prepared(a, compute));
        let (x, w, b) = (x?, w?, b?);
        let (y, m, v) = {
            let r = Reads::new([&x, &w, &b]);
            let at = |k: usize, a: &NDArray| -> Result<_> {
                Ok((r.get(k).try_cpu(FORWARD.name)?, a.offset()))
            };
            batchnorm::forward(at(0, &x)?, at(1, &w)?, at(2, &b)?, &d)?
        };
        let dt = i[0].dtype();
        Ok((
            back(y, i[0].shape(), dt)?,
            back(m, &[d.c], dt)?,
            back(v, &[d.c], dt)?,
        ))
    }
}

struct Backward {
    eps: f64,
    relu: bool,
}

impl FusedOp for Backward {
    type Output = (NDArray, NDArray, NDArray);
    fn kind(&self) -> &'static FusedKind {
        &BACKWARD
    }
    /// x, grad, weight, var and (with the ReLU) the forward's output y.
    fn check(&self, i: &[&NDArray]) -> Result<()> {
        let (x, grad, weight, var) = (i[0], i[1], i[2], i[3]);
        dims(BACKWARD.name, x, weight, var, self.eps)?;
        let y = i.get(4).copied().unwrap_or(grad);
        for (a, what, want) in [
            (grad, "grad", x.shape()),
            (var, "var", weight.shape()),
            (y, "y", x.shape()),
        ] {
            if a.shape() != want {
                return Err(Error::ShapeMismatch {
                    op: BACKWARD.name,
                    lhs: a.shape().into(),
                    rhs: want.into(),
                    hint: format!(" ({what} must have the shape the forward gave)"),
                });
            }
            if !a.dtype().is_float() {
                return Err(Error::invalid(
                    BACKWARD.name,
                    format!(
                        "needs floating-point operands, got {} for {what}",
                        a.dtype()
                    ),
                ));
            }
        }
        Ok(())
    }
    fn composite(&self, i: &[&NDArray]) -> Result<Self::Output> {
        let (x, g, w, var) = (i[0], i[1], i[2], i[3]);
        let c = w.numel();
        let (axes, pshape) = axes_and_channel_shape(x, c);
        let gated;
        let g = match i.get(4) {
            Some(y) => {
                gated = g.mul(&y.gt_scalar(0.0)?.astype(g.dtype())?)?;
                &gated
            }
            None => g,
        };
        let axes = Some(&axes[..]);
        let xc = x.sub(&x.mean(axes, true)?)?;
        let invstd = var.reshape(&pshape)?.add_scalar(self.eps)?.rsqrt()?;
        let n = (x.numel() / c.max(1)).max(1) as f64;
        let sum_g = g.sum(axes, true)?;
        let sum_gxc = g.mul(&xc)?.sum(axes, true)?;
        let dt = x.dtype();
        let gw = sum_gxc
            .mul(&invstd)?
            .reshape(&[c as isize])?
            .astype_if(dt)?;
        let gb = sum_g.reshape(&[c as isize])?.astype_if(dt)?;
        // gx = k1 * g - k2 * xc - k1 * mean(g), per-channel k1 = w * invstd and
        // k2 = k1 * invstd^2 * mean(g * xc).
        let k1 = w.reshape(&pshape)?.mul(&invstd)?;
        let k2 = k1
            .mul(&invstd.square()?)?
            .mul(&sum_gxc)?
            .mul_scalar(1.0 / n)?;
        let k0 = k1.mul(&sum_g)?.mul_scalar(-1.0 / n)?;
        let gx = g.mul(&k1)?.sub(&xc.mul(&k2)?)?.add(&k0)?.astype_if(dt)?;
        Ok((gx, gw, gb))
    }
    fn cpu(&self, i: &[&NDArray]) -> Result<Self::Output> {
        let (x, weight, var) = (i[0], i[2], i[3]);
        let d = NormDims {
            relu: self.relu,
            ..dims(BACKWARD.name, x, weight, var, self.eps)?
        };
        let compute = compute_dtype(BACKWARD.name, x, weight)?;
        check_alloc(BACKWARD.name, x.numel(), compute)?;
        let mut p: Vec<NDArray> = i[..4]
            .iter()
            .map(|a| prepared(a, compute))
            .collect::<Result<_>>()?;
        // Without the ReLU the gradient stands in for `y` (the kernel does not read it).
        p.push(match i.get(4) {
            Some(y) => prepared(y, compute)?,
            None => p[1].clone(),
        });
        let (gx, gw, gb) = {
            let r = Reads::new([&p[0], &p[1], &p[2], &p[3], &p[4]]);
            let at =
                |k: usize| -> Result<_> { Ok((r.get(k).try_cpu(BACKWARD.name)?, p[k].offset())) };
            batchnorm::backward(at(0)?, at(1)?, at(2)?, at(3)?, at(4)?, &d)?
        };
        let dt = x.dtype();
        Ok((
            back(gx, x.shape(), dt)?,
            back(gw, &[d.c], dt)?,
            back(gb, &[d.c], dt)?,
        ))
    }
}

impl NDArray {
    /// Batch normalisation of this (N, C, ...) float array with its own statistics over every
    /// dim but dim 1: `(y, mean, var)` with `y = (x - mean) / sqrt(var + eps) * weight + bias`,
    /// `mean` and the biased `var` of shape (C,). `weight` and `bias` are (C,) of x's dtype.
    /// One fused op (see `quill_array::fused`).
    pub fn batch_norm_train(
        &self,
        weight: &NDArray,
        bias: &NDArray,
        eps: f64,
    ) -> Result<(NDArray, NDArray, NDArray)> {
        run(&Forward { eps, relu: false }, &[self, weight, bias])
    }

    /// `batch_norm_train` followed by ReLU, in the same two passes: `(relu(y), mean, var)`.
    pub fn batch_norm_relu_train(
        &self,
        weight: &NDArray,
        bias: &NDArray,
        eps: f64,
    ) -> Result<(NDArray, NDArray, NDArray)> {
        run(&Forward { eps, relu: true }, &[self, weight, bias])
    }

    /// The gradients `(dx, dweight, dbias)` of `batch_norm_train` at this input, given the
    /// `weight`, the `var` the forward returned, the output's gradient `grad` and the same
    /// `eps` (the mean is recomputed from `x`); dx in x's dtype, the others in weight's.
    pub fn batch_norm_backward(
        &self,
        grad: &NDArray,
        weight: &NDArray,
        var: &NDArray,
        eps: f64,
    ) -> Result<(NDArray, NDArray, NDArray)> {
        run(&Backward { eps, relu: false }, &[self, grad, weight, var])
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
        run(&Backward { eps, relu: true }, &[self, grad, weight, var, y])
    }
}
