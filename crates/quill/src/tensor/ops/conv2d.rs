//! PyTorch's 2-D convolution (NCHW input, (O, C / groups, kh, kw) weight, per-dim stride,
//! zero padding, dilation, groups) as one differentiable op over the backend's im2col + GEMM
//! kernels: the forward, the input gradient (col2im) and the weight gradient each run as a
//! few large kernels instead of one small op per kernel tap.
//!
//! Next to it, the composite formulation (an im2col built from differentiable Tensor ops: a
//! padded copy, kh * kw strided slices, a stack, one matmul per group). It is the reference,
//! and the backward when the backward is itself being recorded (`create_graph`): the fused
//! gradients are not differentiable again, the composite ones are.

use crate::tensor::{autocast, grad, is_grad_enabled, Backward, BackwardOptions, Tensor};
use quill_core::{Conv2dSpec, ConvDims, Result, SliceArg};

const OP: &str = "conv2d";

struct Conv2d {
    spec: Conv2dSpec,
}

impl Backward for Conv2d {
    fn name(&self) -> &'static str {
        "Conv2dBackward"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (x, w) = (&inputs[0], &inputs[1]);
        let spec = self.spec;
        if is_grad_enabled() {
            let gx = x
                .requires_grad()
                .then(|| composite_input_grad(g, w, x.shape(), spec))
                .transpose()?;
            let gw = w
                .requires_grad()
                .then(|| composite_weight_grad(x, g, w.shape(), spec))
                .transpose()?;
            return Ok(vec![gx, gw]);
        }
        let gx = x
            .requires_grad()
            .then(|| g.array().conv2d_backward_input(w.array(), x.shape(), spec))
            .transpose()?
            .map(Tensor::new);
        let gw = w
            .requires_grad()
            .then(|| x.array().conv2d_backward_weight(g.array(), w.shape(), spec))
            .transpose()?
            .map(Tensor::new);
        Ok(vec![gx, gw])
    }
}

/// `start..stop;step` on one dim.
fn range(start: usize, stop: usize, step: usize) -> SliceArg {
    SliceArg::Range {
        start: Some(start as isize),
        stop: Some(stop as isize),
        step: step as isize,
    }
}

/// Channels `c0..c1` of an (N, C, ...) or (O, ...) tensor (dim `axis`).
fn channels(t: &Tensor, axis: usize, c0: usize, c1: usize) -> Result<Tensor> {
    let mut args = vec![SliceArg::FULL; axis];
    args.push(range(c0, c1, 1));
    t.slice(&args)
}

/// The column matrix (N * Ho * Wo, kh * kw * C) of `x` (N, C, H, W), columns in (i, j, c)
/// order, from differentiable Tensor ops.
fn im2col(x: &Tensor, d: &ConvDims) -> Result<Tensor> {
    let (n, c, h, wd) = (x.shape()[0], x.shape()[1], d.h, d.w);
    let s = &d.spec;
    let (hp, wp) = (h + 2 * s.padding.0, wd + 2 * s.padding.1);
    // NHWC: each window position then contributes C contiguous columns, so the stack copies
    // runs of C elements and the column matrix is a free reshape of it.
    let xt = x.permute(&[0, 2, 3, 1])?;
    let xp = if s.padding == (0, 0) {
        xt
    } else {
        let interior = [
            SliceArg::FULL,
            range(s.padding.0, s.padding.0 + h, 1),
            range(s.padding.1, s.padding.1 + wd, 1),
        ];
        Tensor::zeros_on(&[n, hp, wp, c], x.dtype(), x.device())?.slice_assign(&interior, &xt)?
    };
    let mut windows = Vec::with_capacity(d.kh * d.kw);
    for i in 0..d.kh {
        for j in 0..d.kw {
            let (r0, c0) = (i * s.dilation.0, j * s.dilation.1);
            windows.push(xp.slice(&[
                SliceArg::FULL,
                range(r0, r0 + s.stride.0 * (d.ho - 1) + 1, s.stride.0),
                range(c0, c0 + s.stride.1 * (d.wo - 1) + 1, s.stride.1),
            ])?);
        }
    }
    let cols = if windows.len() == 1 {
        windows.pop().expect("one window")
    } else {
        let refs: Vec<&Tensor> = windows.iter().collect();
        Tensor::stack(&refs, 3)?
    };
    cols.reshape(&[(n * d.ho * d.wo) as isize, (d.kh * d.kw * c) as isize])
}

/// One group's weight (Og, Cg, kh, kw) as the (kh * kw * Cg, Og) matrix im2col multiplies.
fn weight_matrix(w: &Tensor) -> Result<Tensor> {
    let k = (w.shape()[1] * w.shape()[2] * w.shape()[3]) as isize;
    w.permute(&[2, 3, 1, 0])?
        .reshape(&[k, w.shape()[0] as isize])
}

/// One group's (N, Og, Ho, Wo) output gradient as the (N * Ho * Wo, Og) matrix.
fn grad_matrix(g: &Tensor) -> Result<Tensor> {
    let (n, o, ho, wo) = (g.shape()[0], g.shape()[1], g.shape()[2], g.shape()[3]);
    g.permute(&[0, 2, 3, 1])?
        .reshape(&[(n * ho * wo) as isize, o as isize])
}

/// Applies `f(group, c0..c1, o0..o1)` to every group and concatenates the results on `axis`.
fn per_group(
    d: &ConvDims,
    axis: isize,
    f: impl Fn(usize, (usize, usize), (usize, usize)) -> Result<Tensor>,
) -> Result<Tensor> {
    let groups = d.spec.groups;
    let (cg, og) = (d.c / groups, d.o / groups);
    let parts = (0..groups)
        .map(|gi| f(gi, (gi * cg, (gi + 1) * cg), (gi * og, (gi + 1) * og)))
        .collect::<Result<Vec<_>>>()?;
    if parts.len() == 1 {
        return Ok(parts.into_iter().next().expect("one group"));
    }
    let refs: Vec<&Tensor> = parts.iter().collect();
    Tensor::concat(&refs, axis)
}

/// The weight gradient in Tensor ops: per group, `cols(x)^T @ g`, back to (Og, Cg, kh, kw).
fn composite_weight_grad(
    x: &Tensor,
    g: &Tensor,
    w_shape: &[usize],
    spec: Conv2dSpec,
) -> Result<Tensor> {
    let d = ConvDims::new(OP, x.shape(), w_shape, spec)?;
    let (kh, kw) = (d.kh as isize, d.kw as isize);
    let cg = (d.c / spec.groups) as isize;
    per_group(&d, 0, |_, (c0, c1), (o0, o1)| {
        let sub = ConvDims {
            c: c1 - c0,
            o: o1 - o0,
            spec: Conv2dSpec { groups: 1, ..spec },
            ..d
        };
        let cols = im2col(&channels(x, 1, c0, c1)?, &sub)?;
        let gm = grad_matrix(&channels(g, 1, o0, o1)?)?;
        cols.mt()?
            .matmul(&gm)?
            .reshape(&[kh, kw, cg, (o1 - o0) as isize])?
            .permute(&[3, 2, 0, 1])
    })
}

/// The input gradient in Tensor ops: per group, the column gradient `g @ W^T` pushed back
/// through the composite im2col (its recorded backward, a function of the column gradient
/// only, since im2col is linear).
fn composite_input_grad(
    g: &Tensor,
    w: &Tensor,
    x_shape: &[usize],
    spec: Conv2dSpec,
) -> Result<Tensor> {
    let d = ConvDims::new(OP, x_shape, w.shape(), spec)?;
    per_group(&d, 1, |_, (c0, c1), (o0, o1)| {
        let sub = ConvDims {
            c: c1 - c0,
            o: o1 - o0,
            spec: Conv2dSpec { groups: 1, ..spec },
            ..d
        };
        let dcols = grad_matrix(&channels(g, 1, o0, o1)?)?
            .matmul(&weight_matrix(&channels(w, 0, o0, o1)?)?.mt()?)?;
        // A fresh leaf stands in for the input: its graph is im2col alone.
        let z = Tensor::zeros_on(&[d.n, c1 - c0, d.h, d.w], g.dtype(), g.device())?
            .requires_grad_(true)?;
        let cols = im2col(&z, &sub)?;
        let opts = BackwardOptions {
            retain_graph: false,
            create_graph: true,
            overwrite_grad: false,
        };
        let mut gz = grad(&cols, std::slice::from_ref(&z), Some(&dcols), opts)?;
        Ok(gz.remove(0))
    })
}

impl Tensor {
    /// PyTorch's `conv2d` without bias: this (N, C, H, W) tensor cross-correlated with
    /// `weight` (O, C / groups, kh, kw) under `spec` (stride, zero padding, dilation, groups):
    /// (N, O, Ho, Wo), `Ho = (H + 2 ph - dh (kh - 1) - 1) / sh + 1`. Runs the backend's
    /// im2col + GEMM kernels; differentiable in both operands to any order (gradients of
    /// gradients go through `conv2d_composite`'s formulation).
    ///
    /// Under [`autocast`](crate::autocast()) it runs in f32, bf16 / f16 operands widened (so a
    /// narrow activation meets an f32 weight), unlike PyTorch, which runs it in bf16.
    pub fn conv2d(&self, weight: &Tensor, spec: Conv2dSpec) -> Result<Tensor> {
        // The CPU kernel has no bf16 arithmetic: it widens bf16 operands to f32 and rounds its
        // result, so casting to bf16 first only added passes and rounding (the small CNN's
        // epoch ran at 0.62-0.81x of f32 so, docs/PERFORMANCE.md). Make this
        // `autocast::lower` once the kernel packs bf16 for the bf16 GEMM.
        if let Some([x, w]) = autocast::widened([self, weight])? {
            return x.conv2d(&w, spec);
        }
        let y = self.array().conv2d(weight.array(), spec)?;
        Ok(Tensor::make(y, &[self, weight], Conv2d { spec }))
    }

    /// The same convolution as `conv2d` composed of differentiable primitives (pad, strided
    /// slices, stack, matmul, per group): the reference for the fused op.
    pub fn conv2d_composite(&self, weight: &Tensor, spec: Conv2dSpec) -> Result<Tensor> {
        let d = ConvDims::new(OP, self.shape(), weight.shape(), spec)?;
        if self.dtype() != weight.dtype() {
            return Err(quill_core::Error::DTypeMismatch {
                op: OP,
                expected: self.dtype(),
                got: weight.dtype(),
            });
        }
        let (n, ho, wo) = (d.n as isize, d.ho as isize, d.wo as isize);
        per_group(&d, 1, |_, (c0, c1), (o0, o1)| {
            let sub = ConvDims {
                c: c1 - c0,
                o: o1 - o0,
                spec: Conv2dSpec { groups: 1, ..spec },
                ..d
            };
            let cols = im2col(&channels(self, 1, c0, c1)?, &sub)?;
            let wm = weight_matrix(&channels(weight, 0, o0, o1)?)?;
            cols.matmul(&wm)?
                .reshape(&[n, ho, wo, (o1 - o0) as isize])?
                .permute(&[0, 3, 1, 2])
        })
    }
}
