//! 2-D max pooling (no padding, floor output size) and its gradient, as fused ops. The CPU
//! kernels (`quill_cpu::maxpool`, AVX-512 where the CPU has it) read contiguous NCHW buffers;
//! the composites work window offset by window offset on strided views, on any device: the
//! forward is a running `maximum` (NaN wins, as in the kernel), the backward adds each window's
//! gradient to the elements equal to its maximum, split evenly between ties (a window whose
//! maximum is NaN passes none, as in the kernel).

use super::{check_implied, compute_of, floats, run, FusedKind, FusedOp};
use crate::backend::Storage;
use crate::ndarray::{check_alloc, compute_dtype, prepared, Reads};
use crate::NDArray;
use quill_core::{PoolDims, Result, SliceArg};
use quill_cpu::maxpool;

/// The forward's registry entry.
pub(crate) const FORWARD: FusedKind = FusedKind {
    name: "max_pool2d",
    cpu: floats,
    cuda: super::none,
    composite: &["maximum", "astype", "compact"],
};

/// The backward's registry entry.
pub(crate) const BACKWARD: FusedKind = FusedKind {
    name: "max_pool2d_backward",
    cpu: floats,
    cuda: super::none,
    composite: &[
        "eq",
        "isnan",
        "logical_and",
        "logical_or",
        "add",
        "div",
        "mul",
        "astype",
    ],
};

/// Window offset (i, j)'s (N, C, Ho, Wo) view of `x` (N, C, H, W).
fn tap(x: &NDArray, d: &PoolDims, i: usize, j: usize) -> Result<NDArray> {
    let span = |start: usize, step: usize, n: usize| {
        let stop = if n == 0 {
            start
        } else {
            start + step * (n - 1) + 1
        };
        SliceArg::range(Some(start as isize), Some(stop as isize), step as isize)
    };
    x.slice(&[
        SliceArg::FULL,
        SliceArg::FULL,
        span(i, d.sh, d.ho),
        span(j, d.sw, d.wo),
    ])
}

struct Forward {
    kernel: (usize, usize),
    stride: (usize, usize),
}

impl Forward {
    fn dims(&self, x: &NDArray) -> Result<PoolDims> {
        PoolDims::new(FORWARD.name, x.shape(), self.kernel, self.stride)
    }
}

impl FusedOp for Forward {
    type Output = NDArray;
    fn kind(&self) -> &'static FusedKind {
        &FORWARD
    }
    fn check(&self, i: &[&NDArray]) -> Result<()> {
        self.dims(i[0])?;
        compute_dtype(FORWARD.name, i[0], i[0]).map(|_| ())
    }
    fn composite(&self, i: &[&NDArray]) -> Result<NDArray> {
        let d = self.dims(i[0])?;
        let x = i[0].astype_if(compute_of(i[0].dtype()))?;
        let mut y = tap(&x, &d, 0, 0)?.compact()?;
        for a in 0..d.kh {
            for b in 0..d.kw {
                if (a, b) != (0, 0) {
                    y = y.maximum(&tap(&x, &d, a, b)?)?;
                }
            }
        }
        y.astype_if(i[0].dtype())
    }
    fn cpu(&self, i: &[&NDArray]) -> Result<NDArray> {
        let x = i[0];
        let d = self.dims(x)?;
        let compute = compute_dtype(FORWARD.name, x, x)?;
        let shape = [x.shape()[0], x.shape()[1], d.ho, d.wo];
        check_alloc(FORWARD.name, shape.iter().product(), compute)?;
        let xc = prepared(x, compute)?;
        let s = {
            let g = Reads::new([&xc]);
            maxpool::forward((g.get(0).try_cpu(FORWARD.name)?, xc.offset()), &d)?
        };
        NDArray::fresh(Storage::Cpu(s), &shape)?.astype_if(x.dtype())
    }
}

struct Backward {
    kernel: (usize, usize),
    stride: (usize, usize),
}

impl FusedOp for Backward {
    type Output = NDArray;
    fn kind(&self) -> &'static FusedKind {
        &BACKWARD
    }
    /// x, y (the forward's output), grad.
    fn check(&self, i: &[&NDArray]) -> Result<()> {
        let d = PoolDims::new(BACKWARD.name, i[0].shape(), self.kernel, self.stride)?;
        let want = [i[0].shape()[0], i[0].shape()[1], d.ho, d.wo];
        check_implied(BACKWARD.name, "y", i[1].shape(), &want, "the pooling")?;
        check_implied(BACKWARD.name, "grad", i[2].shape(), &want, "the pooling")?;
        compute_dtype(BACKWARD.name, i[0], i[1])?;
        compute_dtype(BACKWARD.name, i[0], i[2]).map(|_| ())
    }
    fn composite(&self, i: &[&NDArray]) -> Result<NDArray> {
        let d = PoolDims::new(BACKWARD.name, i[0].shape(), self.kernel, self.stride)?;
        let ct = compute_of(i[0].dtype());
        let (x, y, g) = (
            i[0].astype_if(ct)?,
            i[1].astype_if(ct)?,
            i[2].astype_if(ct)?,
        );
        // Where each window's maximum sits. A NaN maximum equals nothing: that window passes
        // no gradient, as in the kernels.
        let hit = |a: usize, b: usize| -> Result<NDArray> { tap(&x, &d, a, b)?.eq(&y) };
        let count = NDArray::zeros(y.shape(), ct)?.to_device(y.device())?;
        for a in 0..d.kh {
            for b in 0..d.kw {
                count.add_assign(&hit(a, b)?.astype(ct)?)?;
            }
        }
        // count is 0 only for a NaN window, whose hits are all false.
        let share = g.div(&count.maximum_scalar(1.0)?)?;
        let dx = NDArray::zeros(x.shape(), ct)?.to_device(x.device())?;
        for a in 0..d.kh {
            for b in 0..d.kw {
                let part = share.mul(&hit(a, b)?.astype(ct)?)?;
                tap(&dx, &d, a, b)?.add_assign(&part)?;
            }
        }
        dx.astype_if(i[0].dtype())
    }
    fn cpu(&self, i: &[&NDArray]) -> Result<NDArray> {
        let d = PoolDims::new(BACKWARD.name, i[0].shape(), self.kernel, self.stride)?;
        let compute = compute_dtype(BACKWARD.name, i[0], i[1])?;
        check_alloc(BACKWARD.name, i[0].numel(), compute)?;
        let (x, y, g) = (
            prepared(i[0], compute)?,
            prepared(i[1], compute)?,
            prepared(i[2], compute)?,
        );
        let s = {
            let r = Reads::new([&x, &y, &g]);
            let at = |k: usize, a: &NDArray| -> Result<_> {
                Ok((r.get(k).try_cpu(BACKWARD.name)?, a.offset()))
            };
            maxpool::backward(at(0, &x)?, at(1, &y)?, at(2, &g)?, &d)?
        };
        NDArray::fresh(Storage::Cpu(s), i[0].shape())?.astype_if(i[0].dtype())
    }
}

impl NDArray {
    /// 2-D max pooling of this (N, C, H, W) float array: windows `kernel` (kh, kw) taken
    /// `stride` apart, no padding, floor output size (N, C, Ho, Wo); NaN wins a window. One
    /// fused op (see `quill_array::fused`).
    pub fn max_pool2d(&self, kernel: (usize, usize), stride: (usize, usize)) -> Result<NDArray> {
        run(&Forward { kernel, stride }, &[self])
    }

    /// The gradient of `x.max_pool2d(kernel, stride)` (with output `y`) with respect to `x`
    /// (this array), given the output's gradient `grad`: each window's gradient goes to the
    /// elements equal to its maximum, split evenly between ties.
    pub fn max_pool2d_backward(
        &self,
        y: &NDArray,
        grad: &NDArray,
        kernel: (usize, usize),
        stride: (usize, usize),
    ) -> Result<NDArray> {
        run(&Backward { kernel, stride }, &[self, y, grad])
    }
}
