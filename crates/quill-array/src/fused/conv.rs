//! 2-D convolution (PyTorch's `conv2d` without bias: cross-correlation with stride, padding,
//! dilation and groups) and its two gradients, as fused ops. The CPU kernels
//! (`quill_cpu::conv`: packed GEMM tiles over contiguous NCHW buffers, f16 and bf16 computed in
//! f32) are one call each; the composites are im2col in array ops, on any device: one strided
//! view of the padded input per kernel offset, and one matmul per group (a GPU runs them on its
//! own kernels instead of copying to the host).

use super::{check_implied, compute_of, floats, run, FusedKind, FusedOp};
use crate::backend::Storage;
use crate::ndarray::{check_alloc, compute_dtype, prepared, Reads};
use crate::NDArray;
use quill_core::{s, Conv2dSpec, ConvDims, DType, Result, SliceArg};
use quill_cpu::conv;

/// The forward's registry entry.
pub(crate) const FORWARD: FusedKind = FusedKind {
    name: "conv2d",
    cpu: floats,
    cuda: super::none,
    composite: &["compact", "matmul", "astype"],
};

/// The input gradient's registry entry.
pub(crate) const BACKWARD_INPUT: FusedKind = FusedKind {
    name: "conv2d_backward_input",
    cpu: floats,
    cuda: super::none,
    composite: &["compact", "matmul", "add", "astype"],
};

/// The weight gradient's registry entry.
pub(crate) const BACKWARD_WEIGHT: FusedKind = FusedKind {
    name: "conv2d_backward_weight",
    cpu: floats,
    cuda: super::none,
    composite: &["compact", "matmul", "assign", "astype"],
};

/// Runs a CPU kernel on two operands made contiguous in the compute dtype and wraps its
/// result as a fresh array of `shape` in `out_dtype`.
fn on_cpu(
    op: &'static str,
    (a, b): (&NDArray, &NDArray),
    shape: &[usize],
    out_dtype: DType,
    kernel: impl FnOnce(
        (&quill_cpu::CpuStorage, usize),
        (&quill_cpu::CpuStorage, usize),
    ) -> Result<quill_cpu::CpuStorage>,
) -> Result<NDArray> {
    let compute = compute_dtype(op, a, b)?;
    check_alloc(op, shape.iter().product(), compute)?;
    let (a, b) = (prepared(a, compute)?, prepared(b, compute)?);
    let s = {
        let g = Reads::new([&a, &b]);
        kernel(
            (g.get(0).try_cpu(op)?, a.offset()),
            (g.get(1).try_cpu(op)?, b.offset()),
        )?
    };
    NDArray::fresh(Storage::Cpu(s), shape)?.astype_if(out_dtype)
}

/// Kernel offset (i, j)'s view of the padded input `xp` (N, C, Hp, Wp): the (N, C, Ho, Wo)
/// elements that meet weight element (i, j).
fn tap(xp: &NDArray, d: &ConvDims, i: usize, j: usize) -> Result<NDArray> {
    let Conv2dSpec {
        stride: (sh, sw),
        dilation: (dh, dw),
        ..
    } = d.spec;
    let (r0, c0) = ((i * dh) as isize, (j * dw) as isize);
    let (r1, c1) = (
        r0 + (sh * d.ho.saturating_sub(1)) as isize + 1,
        c0 + (sw * d.wo.saturating_sub(1)) as isize + 1,
    );
    let (r1, c1) = (
        if d.ho == 0 { r0 } else { r1 },
        if d.wo == 0 { c0 } else { c1 },
    );
    xp.slice(&[
        SliceArg::FULL,
        SliceArg::FULL,
        SliceArg::range(Some(r0), Some(r1), sh as isize),
        SliceArg::range(Some(c0), Some(c1), sw as isize),
    ])
}

/// The input zero-padded by the spec's padding, in `dtype`.
fn padded(x: &NDArray, d: &ConvDims, dtype: DType) -> Result<NDArray> {
    let (ph, pw) = d.spec.padding;
    x.astype_if(dtype)?
        .pad(&[(0, 0), (0, 0), (ph, ph), (pw, pw)])
}

/// im2col of group `g`: (N * Ho * Wo, cg * kh * kw), rows in (n, ho, wo) order and columns in
/// (c, i, j) order, matching the weight's (O, cg, kh, kw) layout.
fn columns(xp: &NDArray, d: &ConvDims, g: usize) -> Result<NDArray> {
    let cg = d.c / d.spec.groups;
    let mut taps = Vec::with_capacity(d.kh * d.kw);
    for i in 0..d.kh {
        for j in 0..d.kw {
            let t = tap(xp, d, i, j)?;
            taps.push(t.slice(&s![.., (g * cg) as isize..((g + 1) * cg) as isize])?);
        }
    }
    let refs: Vec<&NDArray> = taps.iter().collect();
    // (N, cg, kh*kw, Ho, Wo) -> (N, Ho, Wo, cg, kh*kw)
    let stacked = NDArray::stack(&refs, 2)?;
    let rows = (d.n * d.ho * d.wo) as isize;
    stacked
        .permute(&[0, 3, 4, 1, 2])?
        .compact()?
        .reshape(&[rows, (cg * d.kh * d.kw) as isize])
}

/// Group `g`'s weight as (og, cg * kh * kw).
fn group_weight(w: &NDArray, d: &ConvDims, g: usize) -> Result<NDArray> {
    let og = d.o / d.spec.groups;
    let cg = d.c / d.spec.groups;
    w.slice(&s![(g * og) as isize..((g + 1) * og) as isize])?
        .compact()?
        .reshape(&[og as isize, (cg * d.kh * d.kw) as isize])
}

/// The output gradient of group `g` as (N * Ho * Wo, og).
fn group_grad(gy: &NDArray, d: &ConvDims, g: usize) -> Result<NDArray> {
    let og = d.o / d.spec.groups;
    gy.slice(&s![.., (g * og) as isize..((g + 1) * og) as isize])?
        .permute(&[0, 2, 3, 1])?
        .compact()?
        .reshape(&[(d.n * d.ho * d.wo) as isize, og as isize])
}

struct Forward {
    spec: Conv2dSpec,
}

impl FusedOp for Forward {
    type Output = NDArray;
    fn kind(&self) -> &'static FusedKind {
        &FORWARD
    }
    fn check(&self, i: &[&NDArray]) -> Result<()> {
        ConvDims::new(FORWARD.name, i[0].shape(), i[1].shape(), self.spec)?;
        compute_dtype(FORWARD.name, i[0], i[1]).map(|_| ())
    }
    fn composite(&self, i: &[&NDArray]) -> Result<NDArray> {
        let (x, w) = (i[0], i[1]);
        let d = ConvDims::new(FORWARD.name, x.shape(), w.shape(), self.spec)?;
        let ct = compute_of(x.dtype());
        let xp = padded(x, &d, ct)?;
        let w = w.astype_if(ct)?;
        let mut parts = Vec::with_capacity(d.spec.groups);
        for g in 0..d.spec.groups {
            // (N*Ho*Wo, cg*kh*kw) @ (cg*kh*kw, og)
            let y = columns(&xp, &d, g)?.matmul(&group_weight(&w, &d, g)?.transpose(0, 1)?)?;
            let og = (d.o / d.spec.groups) as isize;
            parts.push(y.reshape(&[d.n as isize, d.ho as isize, d.wo as isize, og])?);
        }
        let refs: Vec<&NDArray> = parts.iter().collect();
        NDArray::concat(&refs, 3)?
            .permute(&[0, 3, 1, 2])?
            .compact()?
            .astype_if(x.dtype())
    }
    fn cpu(&self, i: &[&NDArray]) -> Result<NDArray> {
        let d = ConvDims::new(FORWARD.name, i[0].shape(), i[1].shape(), self.spec)?;
        on_cpu(
            FORWARD.name,
            (i[0], i[1]),
            &d.output_shape(),
            i[0].dtype(),
            |x, w| conv::forward(x, w, &d),
        )
    }
}

struct BackwardInput {
    spec: Conv2dSpec,
    input_shape: Vec<usize>,
}

impl FusedOp for BackwardInput {
    type Output = NDArray;
    fn kind(&self) -> &'static FusedKind {
        &BACKWARD_INPUT
    }
    /// grad (the output's gradient), weight.
    fn check(&self, i: &[&NDArray]) -> Result<()> {
        let op = BACKWARD_INPUT.name;
        let d = ConvDims::new(op, &self.input_shape, i[1].shape(), self.spec)?;
        check_implied(
            op,
            "grad",
            i[0].shape(),
            &d.output_shape(),
            "the convolution",
        )?;
        compute_dtype(op, i[0], i[1]).map(|_| ())
    }
    fn composite(&self, i: &[&NDArray]) -> Result<NDArray> {
        let (gy, w) = (i[0], i[1]);
        let d = ConvDims::new(BACKWARD_INPUT.name, &self.input_shape, w.shape(), self.spec)?;
        let ct = compute_of(gy.dtype());
        let (ph, pw) = d.spec.padding;
        let (hp, wp) = (d.h + 2 * ph, d.w + 2 * pw);
        let dxp = NDArray::zeros(&[d.n, d.c, hp, wp], ct)?.to_device(gy.device())?;
        let (og, cg) = (d.o / d.spec.groups, d.c / d.spec.groups);
        let w = w.astype_if(ct)?;
        let gy = gy.astype_if(ct)?;
        for g in 0..d.spec.groups {
            let gg = group_grad(&gy, &d, g)?; // (N*Ho*Wo, og)
            let wg = w.slice(&s![(g * og) as isize..((g + 1) * og) as isize])?;
            for ki in 0..d.kh {
                for kj in 0..d.kw {
                    // (N*Ho*Wo, og) @ (og, cg) -> (N, Ho, Wo, cg) -> (N, cg, Ho, Wo)
                    let wij = wg.slice(&s![.., .., ki as isize, kj as isize])?;
                    let part = gg
                        .matmul(&wij)?
                        .reshape(&[d.n as isize, d.ho as isize, d.wo as isize, cg as isize])?
                        .permute(&[0, 3, 1, 2])?;
                    let dst = tap(&dxp, &d, ki, kj)?
                        .slice(&s![.., (g * cg) as isize..((g + 1) * cg) as isize])?;
                    dst.add_assign(&part)?;
                }
            }
        }
        dxp.slice(&s![
            ..,
            ..,
            ph as isize..(ph + d.h) as isize,
            pw as isize..(pw + d.w) as isize
        ])?
        .compact()?
        .astype_if(i[0].dtype())
    }
    fn cpu(&self, i: &[&NDArray]) -> Result<NDArray> {
        let d = ConvDims::new(
            BACKWARD_INPUT.name,
            &self.input_shape,
            i[1].shape(),
            self.spec,
        )?;
        on_cpu(
            BACKWARD_INPUT.name,
            (i[0], i[1]),
            &d.input_shape(),
            i[0].dtype(),
            |gy, w| conv::backward_input(gy, w, &d),
        )
    }
}

struct BackwardWeight {
    spec: Conv2dSpec,
    weight_shape: Vec<usize>,
}

impl FusedOp for BackwardWeight {
    type Output = NDArray;
    fn kind(&self) -> &'static FusedKind {
        &BACKWARD_WEIGHT
    }
    /// x, grad (the output's gradient).
    fn check(&self, i: &[&NDArray]) -> Result<()> {
        let op = BACKWARD_WEIGHT.name;
        let d = ConvDims::new(op, i[0].shape(), &self.weight_shape, self.spec)?;
        check_implied(
            op,
            "grad",
            i[1].shape(),
            &d.output_shape(),
            "the convolution",
        )?;
        compute_dtype(op, i[0], i[1]).map(|_| ())
    }
    fn composite(&self, i: &[&NDArray]) -> Result<NDArray> {
        let (x, gy) = (i[0], i[1]);
        let d = ConvDims::new(
            BACKWARD_WEIGHT.name,
            x.shape(),
            &self.weight_shape,
            self.spec,
        )?;
        let ct = compute_of(x.dtype());
        let xp = padded(x, &d, ct)?;
        let gy = gy.astype_if(ct)?;
        let og = d.o / d.spec.groups;
        let mut parts = Vec::with_capacity(d.spec.groups);
        for g in 0..d.spec.groups {
            // (og, N*Ho*Wo) @ (N*Ho*Wo, cg*kh*kw) -> (og, cg, kh, kw)
            let gw = group_grad(&gy, &d, g)?
                .transpose(0, 1)?
                .matmul(&columns(&xp, &d, g)?)?;
            let cg = d.c / d.spec.groups;
            parts.push(gw.reshape(&[og as isize, cg as isize, d.kh as isize, d.kw as isize])?);
        }
        let refs: Vec<&NDArray> = parts.iter().collect();
        NDArray::concat(&refs, 0)?.astype_if(x.dtype())
    }
    fn cpu(&self, i: &[&NDArray]) -> Result<NDArray> {
        let d = ConvDims::new(
            BACKWARD_WEIGHT.name,
            i[0].shape(),
            &self.weight_shape,
            self.spec,
        )?;
        on_cpu(
            BACKWARD_WEIGHT.name,
            (i[0], i[1]),
            &d.weight_shape(),
            i[0].dtype(),
            |x, gy| conv::backward_weight(x, gy, &d),
        )
    }
}

impl NDArray {
    /// 2-D convolution (cross-correlation, PyTorch's `conv2d` without bias) of this (N, C, H,
    /// W) array with `weight` (O, C / groups, kh, kw) under `spec`: (N, O, Ho, Wo) with
    /// `Ho = (H + 2 ph - dh (kh - 1) - 1) / sh + 1`. Both operands share one float dtype; any
    /// strides. One fused op (see `quill_array::fused`).
    pub fn conv2d(&self, weight: &NDArray, spec: Conv2dSpec) -> Result<NDArray> {
        run(&Forward { spec }, &[self, weight])
    }

    /// The gradient of `x.conv2d(weight, spec)` with respect to `x` (of shape
    /// `input_shape`), given the output's gradient `grad` (this array).
    pub fn conv2d_backward_input(
        &self,
        weight: &NDArray,
        input_shape: &[usize],
        spec: Conv2dSpec,
    ) -> Result<NDArray> {
        let op = BackwardInput {
            spec,
            input_shape: input_shape.to_vec(),
        };
        run(&op, &[self, weight])
    }

    /// The gradient of `x.conv2d(weight, spec)` with respect to `weight` (of shape
    /// `weight_shape`), with `x` this array and `grad` the output's gradient.
    pub fn conv2d_backward_weight(
        &self,
        grad: &NDArray,
        weight_shape: &[usize],
        spec: Conv2dSpec,
    ) -> Result<NDArray> {
        let op = BackwardWeight {
            spec,
            weight_shape: weight_shape.to_vec(),
        };
        run(&op, &[self, grad])
    }
}
