//! 2-D convolution over NCHW input with PyTorch's semantics (stride, zero padding, dilation,
//! groups; weight (out_c, in_c / groups, kh, kw)): the `Conv2d` layer over `Tensor::conv2d`,
//! the backend's im2col + GEMM kernels with their own backward (see
//! `tensor/ops/conv2d.rs`), plus the small helpers the pooling layers share.

use super::init;
use super::module::Module;
use crate::tensor::Tensor;
use quill_core::{Conv2dSpec, ConvDims, DType, Error, Result, SliceArg};

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

/// A 2-D convolution layer: `weight` (out_c, in_c / groups, kh, kw), optional `bias` (out_c).
pub struct Conv2d {
    /// The filters, (out_c, in_c / groups, kh, kw).
    pub weight: Tensor,
    /// Added per output channel, (out_c); `None` when built without bias (as before a
    /// BatchNorm, which would cancel it).
    pub bias: Option<Tensor>,
    /// Step of the window in (rows, columns).
    pub stride: (usize, usize),
    /// Zeros added on each side in (rows, columns).
    pub padding: (usize, usize),
    /// Spacing between kernel taps in (rows, columns); 1 is a dense kernel.
    pub dilation: (usize, usize),
    /// Channel groups (1: every output channel sees every input channel; `in_c`: depthwise).
    pub groups: usize,
}

impl Conv2d {
    /// `kernel`, `stride`, `padding` and `dilation` each take a `usize` (both dims) or a
    /// `(h, w)` pair. PyTorch's default init: weight and bias uniform in ±1/sqrt(fan_in) with
    /// fan_in = in_c * kh * kw (kaiming_uniform with a = sqrt(5) reduces to that bound).
    /// One group; see `grouped` for more.
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
        Conv2d::grouped(
            in_c, out_c, kernel, stride, padding, dilation, 1, bias, seed,
        )
    }

    /// `new` with `groups` channel groups (PyTorch's `groups`): `in_c` and `out_c` must be
    /// divisible by it; the weight is (out_c, in_c / groups, kh, kw) and fan_in is
    /// in_c / groups * kh * kw.
    #[allow(clippy::too_many_arguments)]
    pub fn grouped(
        in_c: usize,
        out_c: usize,
        kernel: impl IntoPair,
        stride: impl IntoPair,
        padding: impl IntoPair,
        dilation: impl IntoPair,
        groups: usize,
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
                ("groups", (groups, groups)),
            ],
        )?;
        if !in_c.is_multiple_of(groups) || !out_c.is_multiple_of(groups) {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!(
                    "in_channels = {in_c} and out_channels = {out_c} must both be divisible \
                     by groups = {groups}"
                ),
            });
        }
        let cg = in_c / groups;
        let shape = [out_c, cg, kernel.0, kernel.1];
        let bound = 1.0 / ((cg * kernel.0 * kernel.1) as f64).sqrt();
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
            groups,
        })
    }

    /// The convolution as a function of its operands: `x` (N, C, H, W), `w` (O, C, kh, kw),
    /// `b` (O); returns (N, O, Ho, Wo) with `Ho = (H + 2 ph - dh (kh - 1) - 1) / sh + 1`.
    /// Differentiable in all three, to any order. One group; see `functional_grouped`.
    pub fn functional(
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        stride: impl IntoPair,
        padding: impl IntoPair,
        dilation: impl IntoPair,
    ) -> Result<Tensor> {
        Conv2d::functional_grouped(x, w, b, stride, padding, dilation, 1)
    }

    /// `functional` with `groups` channel groups: `w` is (O, C / groups, kh, kw).
    pub fn functional_grouped(
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        stride: impl IntoPair,
        padding: impl IntoPair,
        dilation: impl IntoPair,
        groups: usize,
    ) -> Result<Tensor> {
        let spec = Conv2dSpec {
            stride: stride.into_pair(),
            padding: padding.into_pair(),
            dilation: dilation.into_pair(),
            groups,
        };
        // Checked here too, so that errors name the layer.
        ConvDims::new(OP, x.shape(), w.shape(), spec)?;
        let y = x.conv2d(w, spec)?;
        let Some(b) = b else { return Ok(y) };
        let o = w.shape()[0];
        if b.shape() != [o] {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: b.shape().into(),
                rhs: w.shape().into(),
                hint: format!(" (the bias must be ({o}) for out_c = {o})"),
            });
        }
        y.add(&b.reshape(&[o as isize, 1, 1])?)
    }
}

impl Module for Conv2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Conv2d::functional_grouped(
            x,
            &self.weight,
            self.bias.as_ref(),
            self.stride,
            self.padding,
            self.dilation,
            self.groups,
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
