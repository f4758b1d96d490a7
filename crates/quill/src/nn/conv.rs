//! 2-D convolution over NCHW input with PyTorch's semantics (stride, zero padding, dilation;
//! weight (out_c, in_c, kh, kw)), computed as im2col + one matmul. The im2col is built only
//! from differentiable Tensor ops (a padded copy, strided slices, a stack), so autograd derives
//! the backward pass: the slices' gradients scatter back into the padded input (col2im) and
//! the matmul's give the weight gradient.

use super::init;
use super::module::Module;
use crate::tensor::Tensor;
use quill_core::{DType, Error, Result, SliceArg};

const OP: &str = "Conv2d";

/// A spatial size given once for both dims (`3`) or as (height, width) (`(3, 5)`).
pub trait IntoPair {
    fn into_pair(self) -> (usize, usize);
}

impl IntoPair for usize {
    fn into_pair(self) -> (usize, usize) {
        (self, self)
    }
}

impl IntoPair for (usize, usize) {
    fn into_pair(self) -> (usize, usize) {
        self
    }
}

/// `start..stop;step` as a slice argument.
pub(crate) fn range(start: usize, stop: usize, step: usize) -> SliceArg {
    SliceArg::Range {
        start: Some(start as isize),
        stop: Some(stop as isize),
        step: step as isize,
    }
}

/// Errors unless every entry of the named pairs is at least 1.
pub(crate) fn check_positive(op: &'static str, pairs: &[(&str, (usize, usize))]) -> Result<()> {
    for (name, (a, b)) in pairs {
        if *a == 0 || *b == 0 {
            return Err(Error::InvalidArgument {
                op,
                msg: format!("{name} must be at least 1 in both dims, got ({a}, {b})"),
            });
        }
    }
    Ok(())
}

/// A 2-D convolution layer: `weight` (out_c, in_c, kh, kw), optional `bias` (out_c).
pub struct Conv2d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub stride: (usize, usize),
    pub padding: (usize, usize),
    pub dilation: (usize, usize),
}

impl Conv2d {
    /// `kernel`, `stride`, `padding` and `dilation` each take a `usize` (both dims) or a
    /// `(h, w)` pair. PyTorch's default init: weight and bias uniform in ±1/sqrt(fan_in) with
    /// fan_in = in_c * kh * kw (kaiming_uniform with a = sqrt(5) reduces to that bound).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        in_c: usize,
        out_c: usize,
        kernel: impl IntoPair,
        stride: impl IntoPair,
        padding: impl IntoPair,
        dilation: impl IntoPair,
        bias: bool,
        seed: u64,
    ) -> Result<Conv2d> {
        let (kernel, stride) = (kernel.into_pair(), stride.into_pair());
        let (padding, dilation) = (padding.into_pair(), dilation.into_pair());
        check_positive(
            OP,
            &[
                ("in_channels", (in_c, in_c)),
                ("out_channels", (out_c, out_c)),
                ("kernel", kernel),
                ("stride", stride),
                ("dilation", dilation),
            ],
        )?;
        let shape = [out_c, in_c, kernel.0, kernel.1];
        let bound = 1.0 / ((in_c * kernel.0 * kernel.1) as f64).sqrt();
        let weight = Tensor::from_array(init::uniform(&shape, bound, seed, DType::F32)?, true)?;
        let bias = if bias {
            let b = init::uniform(&[out_c], bound, seed ^ 0x5EED, DType::F32)?;
            Some(Tensor::from_array(b, true)?)
        } else {
            None
        };
        Ok(Conv2d {
            weight,
            bias,
            stride,
            padding,
            dilation,
        })
    }

    /// The convolution as a function of its operands: `x` (N, C, H, W), `w` (O, C, kh, kw),
    /// `b` (O); returns (N, O, Ho, Wo) with `Ho = (H + 2 ph - dh (kh - 1) - 1) / sh + 1`.
    /// Differentiable in all three.
    pub fn functional(
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        stride: impl IntoPair,
        padding: impl IntoPair,
        dilation: impl IntoPair,
    ) -> Result<Tensor> {
        let (stride, padding, dilation) = (
            stride.into_pair(),
            padding.into_pair(),
            dilation.into_pair(),
        );
        check_positive(OP, &[("stride", stride), ("dilation", dilation)])?;
        let mismatch = |hint: String| Error::ShapeMismatch {
            op: OP,
            lhs: x.shape().into(),
            rhs: w.shape().into(),
            hint,
        };
        if w.ndim() != 4 {
            return Err(mismatch(
                " (the weight must be (out_c, in_c, kh, kw))".into(),
            ));
        }
        if x.ndim() != 4 {
            return Err(mismatch(" (the input must be (N, C, H, W))".into()));
        }
        let (n, c, h, wd) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
        let (o, kh, kw) = (w.shape()[0], w.shape()[2], w.shape()[3]);
        if c != w.shape()[1] {
            return Err(mismatch(format!(
                " (the input has {c} channels but the weight expects in_c = {})",
                w.shape()[1]
            )));
        }
        if let Some(b) = b {
            if b.shape() != [o] {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    lhs: b.shape().into(),
                    rhs: w.shape().into(),
                    hint: format!(" (the bias must be ({o}) for out_c = {o})"),
                });
            }
        }
        if kh == 0 || kw == 0 {
            return Err(mismatch(" (the kernel must be at least 1 x 1)".into()));
        }
        let (hp, wp) = (h + 2 * padding.0, wd + 2 * padding.1);
        // The extent of one dilated window.
        let (eh, ew) = (dilation.0 * (kh - 1) + 1, dilation.1 * (kw - 1) + 1);
        if hp < eh || wp < ew {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!(
                    "the output would be empty: input {:?} padded by {padding:?} to ({hp}, {wp}) \
                     is smaller than the dilated kernel ({eh}, {ew}) of weight {:?}",
                    x.shape(),
                    w.shape()
                ),
            });
        }
        let (ho, wo) = ((hp - eh) / stride.0 + 1, (wp - ew) / stride.1 + 1);

        // Work in NHWC: each window position then contributes C contiguous columns, so the
        // stack copies runs of C elements and the column matrix is a free reshape of it.
        let xt = x.permute(&[0, 2, 3, 1])?;
        let xp = if padding == (0, 0) {
            xt
        } else {
            let interior = [
                SliceArg::FULL,
                range(padding.0, padding.0 + h, 1),
                range(padding.1, padding.1 + wd, 1),
            ];
            Tensor::zeros(&[n, hp, wp, c], x.dtype())?.slice_assign(&interior, &xt)?
        };
        let mut windows = Vec::with_capacity(kh * kw);
        for i in 0..kh {
            for j in 0..kw {
                let (r0, c0) = (i * dilation.0, j * dilation.1);
                windows.push(xp.slice(&[
                    SliceArg::FULL,
                    range(r0, r0 + stride.0 * (ho - 1) + 1, stride.0),
                    range(c0, c0 + stride.1 * (wo - 1) + 1, stride.1),
                ])?);
            }
        }
        let rows = (n * ho * wo) as isize;
        let k = (kh * kw * c) as isize;
        // (N, Ho, Wo, kh*kw, C): column index (i, j, c) in row-major order.
        let cols = if windows.len() == 1 {
            windows.pop().expect("one window")
        } else {
            let refs: Vec<&Tensor> = windows.iter().collect();
            Tensor::stack(&refs, 3)?
        }
        .reshape(&[rows, k])?;
        // The weight in the same (i, j, c) order: (kh, kw, C, O) -> (kh*kw*C, O).
        let wm = w.permute(&[2, 3, 1, 0])?.reshape(&[k, o as isize])?;
        let mut y = cols.matmul(&wm)?;
        if let Some(b) = b {
            y = y.add(b)?;
        }
        // Back to NCHW as a view; the data stays NHWC, which the next conv's permute undoes.
        y.reshape(&[n as isize, ho as isize, wo as isize, o as isize])?
            .permute(&[0, 3, 1, 2])
    }
}

impl Module for Conv2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Conv2d::functional(
            x,
            &self.weight,
            self.bias.as_ref(),
            self.stride,
            self.padding,
            self.dilation,
        )
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = vec![("weight".to_string(), self.weight.clone())];
        if let Some(b) = &self.bias {
            v.push(("bias".into(), b.clone()));
        }
        v
    }
}
