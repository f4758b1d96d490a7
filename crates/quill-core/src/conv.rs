//! The sizes of one 2-D convolution with PyTorch's semantics (NCHW input, (O, C / groups,
//! kh, kw) weight, per-dim stride, zero padding and dilation, grouped channels), checked once
//! here so that the array layer and every backend agree on them.

use crate::{Error, Result};

/// The hyper-parameters of a 2-D convolution, each spatial one as (height, width).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv2dSpec {
    /// Step between adjacent kernel positions, in input elements; each must be at least 1.
    pub stride: (usize, usize),
    /// Zeros added on both sides of each spatial dim (so `H` grows by `2 * padding.0`).
    pub padding: (usize, usize),
    /// Spacing between kernel taps (1: adjacent taps); each must be at least 1.
    pub dilation: (usize, usize),
    /// Number of channel groups; input and output channels must both be divisible by it, and
    /// each group's outputs see only that group's inputs.
    pub groups: usize,
}

impl Default for Conv2dSpec {
    fn default() -> Self {
        Conv2dSpec {
            stride: (1, 1),
            padding: (0, 0),
            dilation: (1, 1),
            groups: 1,
        }
    }
}

/// A checked convolution problem: input (n, c, h, w), weight (o, c / groups, kh, kw), output
/// (n, o, ho, wo). Kernels read every buffer contiguous (C order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvDims {
    /// Batch size: the input's and output's first dim.
    pub n: usize,
    /// Input channels (all groups together); a multiple of `spec.groups`.
    pub c: usize,
    /// Input height, before padding.
    pub h: usize,
    /// Input width, before padding.
    pub w: usize,
    /// Output channels, the weight's first dim; a multiple of `spec.groups`.
    pub o: usize,
    /// Kernel height, before dilation; at least 1.
    pub kh: usize,
    /// Kernel width, before dilation; at least 1.
    pub kw: usize,
    /// Output height, at least 1.
    pub ho: usize,
    /// Output width, at least 1.
    pub wo: usize,
    /// The stride, padding, dilation and groups the sizes were derived under.
    pub spec: Conv2dSpec,
}

impl ConvDims {
    /// Checks an input of shape `x` against a weight of shape `w` under `spec` and derives
    /// the output size `Ho = (H + 2 ph - dh (kh - 1) - 1) / sh + 1` (likewise `Wo`). Errors
    /// name `op` and both shapes.
    pub fn new(op: &'static str, x: &[usize], w: &[usize], spec: Conv2dSpec) -> Result<ConvDims> {
        let mismatch = |hint: String| Error::ShapeMismatch {
            op,
            lhs: x.into(),
            rhs: w.into(),
            hint,
        };
        for (name, (a, b)) in [("stride", spec.stride), ("dilation", spec.dilation)] {
            if a == 0 || b == 0 {
                return Err(Error::invalid(
                    op,
                    format!("{name} must be at least 1 in both dims, got ({a}, {b})"),
                ));
            }
        }
        if spec.groups == 0 {
            return Err(Error::invalid(op, "groups must be at least 1, got 0"));
        }
        if w.len() != 4 {
            return Err(mismatch(
                " (the weight must be (out_c, in_c / groups, kh, kw))".into(),
            ));
        }
        if x.len() != 4 {
            return Err(mismatch(" (the input must be (N, C, H, W))".into()));
        }
        let (n, c, h, wd) = (x[0], x[1], x[2], x[3]);
        let (o, cg, kh, kw) = (w[0], w[1], w[2], w[3]);
        let g = spec.groups;
        if !c.is_multiple_of(g) || !o.is_multiple_of(g) {
            return Err(mismatch(format!(
                " (in_c = {c} and out_c = {o} must both be divisible by groups = {g})"
            )));
        }
        if c / g != cg {
            return Err(mismatch(format!(
                " (the input has {c} channels, {} per group of {g}, but the weight expects \
                 in_c / groups = {cg})",
                c / g
            )));
        }
        if kh == 0 || kw == 0 {
            return Err(mismatch(" (the kernel must be at least 1 x 1)".into()));
        }
        let too_big = || Error::invalid(op, format!("padding {:?} is too large", spec.padding));
        let grow = |d: usize, p: usize| p.checked_mul(2).and_then(|p| p.checked_add(d));
        let hp = grow(h, spec.padding.0).ok_or_else(too_big)?;
        let wp = grow(wd, spec.padding.1).ok_or_else(too_big)?;
        let extent = |d: usize, k: usize| d.checked_mul(k - 1).and_then(|e| e.checked_add(1));
        let eh = extent(spec.dilation.0, kh).ok_or_else(too_big)?;
        let ew = extent(spec.dilation.1, kw).ok_or_else(too_big)?;
        if hp < eh || wp < ew {
            return Err(Error::invalid(
                op,
                format!(
                    "the output would be empty: input {x:?} padded by {:?} to ({hp}, {wp}) is \
                     smaller than the dilated kernel ({eh}, {ew}) of weight {w:?}",
                    spec.padding
                ),
            ));
        }
        Ok(ConvDims {
            n,
            c,
            h,
            w: wd,
            o,
            kh,
            kw,
            ho: (hp - eh) / spec.stride.0 + 1,
            wo: (wp - ew) / spec.stride.1 + 1,
            spec,
        })
    }

    /// The input's shape (n, c, h, w).
    pub fn input_shape(&self) -> [usize; 4] {
        [self.n, self.c, self.h, self.w]
    }
    /// The weight's shape (o, c / groups, kh, kw).
    pub fn weight_shape(&self) -> [usize; 4] {
        [self.o, self.c / self.spec.groups, self.kh, self.kw]
    }
    /// The output's shape (n, o, ho, wo).
    pub fn output_shape(&self) -> [usize; 4] {
        [self.n, self.o, self.ho, self.wo]
    }
}

/// A checked 2-D max pooling problem (no padding, floor output size): `planes` = N * C
/// independent (h, w) planes, windows (kh, kw) taken (sh, sw) apart, output (ho, wo) each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolDims {
    /// Number of independent planes: batch size times channels.
    pub planes: usize,
    /// Input plane height; at least `kh`.
    pub h: usize,
    /// Input plane width; at least `kw`.
    pub w: usize,
    /// Window height; at least 1.
    pub kh: usize,
    /// Window width; at least 1.
    pub kw: usize,
    /// Vertical step between windows; at least 1.
    pub sh: usize,
    /// Horizontal step between windows; at least 1.
    pub sw: usize,
    /// Output plane height: `(h - kh) / sh + 1`.
    pub ho: usize,
    /// Output plane width: `(w - kw) / sw + 1`.
    pub wo: usize,
}

impl PoolDims {
    /// Checks an (N, C, H, W) input `x` against `kernel` and `stride`; errors name `op`.
    pub fn new(
        op: &'static str,
        x: &[usize],
        kernel: (usize, usize),
        stride: (usize, usize),
    ) -> Result<PoolDims> {
        for (name, (a, b)) in [("kernel", kernel), ("stride", stride)] {
            if a == 0 || b == 0 {
                return Err(Error::invalid(
                    op,
                    format!("{name} must be at least 1 in both dims, got ({a}, {b})"),
                ));
            }
        }
        if x.len() != 4 {
            return Err(Error::invalid(
                op,
                format!("the input must be (N, C, H, W), got shape {x:?}"),
            ));
        }
        let (h, w) = (x[2], x[3]);
        if h < kernel.0 || w < kernel.1 {
            return Err(Error::invalid(
                op,
                format!(
                    "the output would be empty: input {x:?} is smaller than the kernel {kernel:?}"
                ),
            ));
        }
        Ok(PoolDims {
            planes: x[0] * x[1],
            h,
            w,
            kh: kernel.0,
            kw: kernel.1,
            sh: stride.0,
            sw: stride.1,
            ho: (h - kernel.0) / stride.0 + 1,
            wo: (w - kernel.1) / stride.1 + 1,
        })
    }
}
