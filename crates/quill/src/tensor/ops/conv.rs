//! needle's `conv`: 2-D convolution (cross-correlation) over NHWC input with a
//! (kh, kw, Cin, Cout) weight, square stride and zero padding, as one op with its own backward.
//!
//! The forward is im2col on arrays: pad, one strided window view (N, Ho, Wo, kh, kw, Cin)
//! of the padded input, one compaction into the column matrix, one matmul. The backward runs
//! the backend's NCHW convolution-gradient kernels (`NDArray::conv2d_backward_input` /
//! `_weight`, col2im and a per-thread summed GEMM) on permuted views, except when it is itself
//! recorded (`create_graph`): then it is needle hw4's, in Tensor ops (so it is differentiable
//! again): the input's gradient is a
//! stride-1 convolution of the stride-dilated output gradient with the spatially flipped,
//! in/out-transposed weight; the weight's gradient is a convolution of the (channel-first)
//! padded input with the (batch-as-channel) dilated output gradient.
//!
//! `nn::Conv2d::functional` is the PyTorch-layout counterpart (NCHW input, (Cout, Cin, kh,
//! kw) weight, per-dim stride / padding, dilation, bias) whose backward autograd derives
//! from slices and a stack. For dilation 1 and no bias the two agree:
//! `Conv2d::functional(x, w, None, s, p, 1)` equals
//! `x.permute([0, 2, 3, 1]).conv(w.permute([2, 3, 1, 0]), s, p).permute([0, 3, 1, 2])`.

use crate::tensor::{autocast, is_grad_enabled, Backward, Tensor};
use quill_core::{Conv2dSpec, Error, Result, SliceArg};

const OP: &str = "conv";

struct Conv {
    stride: usize,
    padding: usize,
}

/// `start..stop` on one dim.
fn span(start: usize, stop: usize) -> SliceArg {
    SliceArg::Range {
        start: Some(start as isize),
        stop: Some(stop as isize),
        step: 1,
    }
}

/// Per-dim signed (before, after) amounts: positive pads with zeros, negative cuts off.
fn pad_or_crop(t: &Tensor, amounts: &[(isize, isize)]) -> Result<Tensor> {
    let cut: Vec<SliceArg> = amounts
        .iter()
        .zip(t.shape())
        .map(|(&(b, a), &n)| {
            let lo = (-b).max(0) as usize;
            let hi = n - (-a).max(0) as usize;
            span(lo, hi)
        })
        .collect();
    let t = if amounts.iter().any(|&(b, a)| b < 0 || a < 0) {
        t.slice(&cut)?
    } else {
        t.clone()
    };
    let pads: Vec<(usize, usize)> = amounts
        .iter()
        .map(|&(b, a)| (b.max(0) as usize, a.max(0) as usize))
        .collect();
    if pads.iter().all(|&p| p == (0, 0)) {
        Ok(t)
    } else {
        t.pad(&pads)
    }
}

impl Backward for Conv {
    fn name(&self) -> &'static str {
        "ConvBackward"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (x, w) = (&inputs[0], &inputs[1]);
        let (s, p) = (self.stride, self.padding);
        if !is_grad_enabled() {
            return self.kernels(g, x, w);
        }
        let (h, wd) = (x.shape()[1], x.shape()[2]);
        let (kh, kw) = (w.shape()[0], w.shape()[1]);
        let (ho, wo) = (g.shape()[1], g.shape()[2]);
        // The output gradient placed at the window origins in padded-input coordinates: a
        // dilation by s - 1 without needle's trailing zeros after the last row and column.
        let (hd, wdd) = ((ho - 1) * s + 1, (wo - 1) * s + 1);
        let gd = if s > 1 {
            g.dilate(&[1, 2], s - 1)?
                .slice(&[SliceArg::FULL, span(0, hd), span(0, wdd)])?
        } else {
            g.clone()
        };
        let gx = x
            .requires_grad()
            .then(|| -> Result<Tensor> {
                if x.numel() == 0 {
                    return x.zeros_like();
                }
                // A full correlation (kh - 1 zeros each side) with the flipped kernel gives
                // the padded input's gradient; the amounts below also cut it to the interior.
                let wt = w.flip(&[0, 1])?.transpose(2, 3)?;
                let before = (kh as isize - 1 - p as isize, kw as isize - 1 - p as isize);
                let after = (
                    (h + p) as isize - hd as isize,
                    (wd + p) as isize - wdd as isize,
                );
                let gp = pad_or_crop(
                    &gd,
                    &[(0, 0), (before.0, after.0), (before.1, after.1), (0, 0)],
                )?;
                gp.conv(&wt, 1, 0)
            })
            .transpose()?;
        let gw = w
            .requires_grad()
            .then(|| -> Result<Tensor> {
                // Rows and columns past the last window never reach the output: cut them so
                // the result is exactly (kh, kw).
                let xp = x.pad(&[(0, 0), (p, p), (p, p), (0, 0)])?.slice(&[
                    SliceArg::FULL,
                    span(0, hd + kh - 1),
                    span(0, wdd + kw - 1),
                ])?;
                let r = xp
                    .permute(&[3, 1, 2, 0])?
                    .conv(&gd.permute(&[1, 2, 0, 3])?, 1, 0)?;
                r.permute(&[1, 2, 0, 3])
            })
            .transpose()?;
        Ok(vec![gx, gw])
    }
}

impl Conv {
    /// The gradients from the NCHW kernels: x (N, H, W, C) is the NCHW array permuted
    /// (0, 3, 1, 2), the weight (kh, kw, C, O) the (O, C, kh, kw) one permuted (3, 2, 0, 1).
    fn kernels(&self, g: &Tensor, x: &Tensor, w: &Tensor) -> Result<Vec<Option<Tensor>>> {
        let spec = Conv2dSpec {
            stride: (self.stride, self.stride),
            padding: (self.padding, self.padding),
            ..Conv2dSpec::default()
        };
        let nchw = [0, 3, 1, 2];
        let g4 = g.array().permute(&nchw)?;
        let xs = x.shape();
        let ws = w.shape();
        let gx = x
            .requires_grad()
            .then(|| -> Result<Tensor> {
                let wk = w.array().permute(&[3, 2, 0, 1])?;
                let gx = g4.conv2d_backward_input(&wk, &[xs[0], xs[3], xs[1], xs[2]], spec)?;
                Ok(Tensor::new(gx.permute(&[0, 2, 3, 1])?))
            })
            .transpose()?;
        let gw = w
            .requires_grad()
            .then(|| -> Result<Tensor> {
                let xk = x.array().permute(&nchw)?;
                let gw = xk.conv2d_backward_weight(&g4, &[ws[3], ws[2], ws[0], ws[1]], spec)?;
                Ok(Tensor::new(gw.permute(&[2, 3, 1, 0])?))
            })
            .transpose()?;
        Ok(vec![gx, gw])
    }
}

impl Tensor {
    /// needle's `ops.conv`: `self` (N, H, W, Cin) cross-correlated with `weight`
    /// (kh, kw, Cin, Cout) after `padding` zeros on each side of H and W, taking every
    /// `stride`-th window: (N, Ho, Wo, Cout) with `Ho = (H + 2 padding - kh) / stride + 1`.
    /// Differentiable in both operands, to any order. See the module docs for how it relates
    /// to `nn::Conv2d::functional` (NCHW).
    ///
    /// Under [`autocast`](crate::autocast()) both operands are cast to the autocast dtype, so
    /// the column matrix's product runs in the narrow GEMM and the result comes back in it.
    pub fn conv(&self, weight: &Tensor, stride: usize, padding: usize) -> Result<Tensor> {
        if let Some([x, w]) = autocast::lower([self, weight])? {
            return x.conv(&w, stride, padding);
        }
        let (x, w) = (self.array(), weight.array());
        let mismatch = |hint: String| Error::ShapeMismatch {
            op: OP,
            lhs: x.shape().into(),
            rhs: w.shape().into(),
            hint,
        };
        if x.ndim() != 4 {
            return Err(mismatch(format!(
                " (the input must be rank 4 (N, H, W, Cin), got rank {})",
                x.ndim()
            )));
        }
        if w.ndim() != 4 {
            return Err(mismatch(format!(
                " (the weight must be rank 4 (kh, kw, Cin, Cout), got rank {})",
                w.ndim()
            )));
        }
        let (n, h, wd, c) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
        let (kh, kw, wc, o) = (w.shape()[0], w.shape()[1], w.shape()[2], w.shape()[3]);
        if c != wc {
            return Err(mismatch(format!(
                " (the input has Cin = {c} channels but the weight expects {wc})"
            )));
        }
        if x.dtype() != w.dtype() {
            return Err(Error::DTypeMismatch {
                op: OP,
                expected: x.dtype(),
                got: w.dtype(),
            });
        }
        if stride == 0 {
            return Err(Error::invalid(OP, "stride must be at least 1, got 0"));
        }
        if kh == 0 || kw == 0 {
            return Err(mismatch(" (the kernel must be at least 1 x 1)".into()));
        }
        let grow = |d: usize| {
            padding
                .checked_mul(2)
                .and_then(|p| p.checked_add(d))
                .ok_or_else(|| Error::invalid(OP, format!("padding {padding} is too large")))
        };
        let (hp, wp) = (grow(h)?, grow(wd)?);
        if hp < kh || wp < kw {
            return Err(Error::invalid(
                OP,
                format!(
                    "the kernel ({kh}, {kw}) of weight {:?} is bigger than the input {:?} \
                     padded by {padding} to ({hp}, {wp})",
                    w.shape(),
                    x.shape()
                ),
            ));
        }
        let (ho, wo) = ((hp - kh) / stride + 1, (wp - kw) / stride + 1);
        let xp = if padding == 0 {
            x.clone()
        } else {
            x.pad(&[(0, 0), (padding, padding), (padding, padding), (0, 0)])?
        };
        // Every window as a view of the padded input's own layout (any strides work), then
        // one copy into the (N*Ho*Wo, kh*kw*Cin) column matrix.
        let st = xp.strides();
        let s = stride as isize;
        let windows = xp.as_strided(
            &[n, ho, wo, kh, kw, c],
            &[st[0], st[1] * s, st[2] * s, st[1], st[2], st[3]],
            xp.offset(),
        )?;
        let cols = windows
            .compact()?
            .reshape(&[(n * ho * wo) as isize, (kh * kw * c) as isize])?;
        let wm = w.reshape(&[(kh * kw * c) as isize, o as isize])?;
        let out = cols
            .matmul(&wm)?
            .reshape(&[n as isize, ho as isize, wo as isize, o as isize])?;
        Ok(Tensor::make(out, &[self, weight], Conv { stride, padding }))
    }
}
