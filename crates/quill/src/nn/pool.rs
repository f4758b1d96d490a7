//! 2-D max and average pooling over NCHW input (no padding, floor output size, as PyTorch's
//! defaults). Max pooling runs the fused `Tensor::max_pool2d`; average pooling, and max
//! pooling's composite reference, are built from differentiable Tensor ops: the windows are copied out of the input onto a
//! leading axis (by one reshape / permute when they tile it, stride == kernel; else stacked
//! from strided slices as in im2col), then reduced. Max pooling's gradient goes to the maximum (tied maxima share it, as Tensor::max).

use super::conv::{check_positive, range, IntoPair};
use super::module::Module;
use crate::tensor::Tensor;
use quill_core::{Error, PoolDims, Result, SliceArg};

#[derive(Clone, Copy)]
enum Reduce {
    Max,
    Mean,
}

fn pool(
    op: &'static str,
    x: &Tensor,
    kernel: (usize, usize),
    stride: (usize, usize),
    reduce: Reduce,
) -> Result<Tensor> {
    check_positive(op, &[("kernel", kernel), ("stride", stride)])?;
    if x.ndim() != 4 {
        return Err(Error::InvalidArgument {
            op,
            msg: format!("the input must be (N, C, H, W), got shape {:?}", x.shape()),
        });
    }
    let (n, c, h, w) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
    let (kh, kw) = kernel;
    if h < kh || w < kw {
        return Err(Error::InvalidArgument {
            op,
            msg: format!(
                "the output would be empty: input {:?} is smaller than the kernel {kernel:?}",
                x.shape()
            ),
        });
    }
    let (ho, wo) = ((h - kh) / stride.0 + 1, (w - kw) / stride.1 + 1);
    let apply = |t: Tensor| match reduce {
        Reduce::Max => t.max(Some(&[0]), false),
        Reduce::Mean => t.mean(Some(&[0]), false),
    };
    // The windows go on a new leading axis of a contiguous (kh*kw, N, C, Ho, Wo) copy, so the
    // reduction and its gradient (a compare, a count, a multiply) run over long contiguous
    // rows; with the window axes innermost (length kh or kw) the kernels crawl.
    let (k, shape) = ((kh * kw) as isize, [n, c, ho, wo].map(|d| d as isize));
    if stride == kernel {
        // Non-overlapping windows: crop the rows / columns no window reaches, split H into
        // (Ho, kh) and W into (Wo, kw) (a view even of a strided input), move (kh, kw) to the
        // front and copy once. The gradient is the inverse: one transposing copy, no scatter.
        let cropped = if (ho * kh, wo * kw) == (h, w) {
            x.clone()
        } else {
            x.slice(&[
                SliceArg::FULL,
                SliceArg::FULL,
                range(0, ho * kh, 1),
                range(0, wo * kw, 1),
            ])?
        };
        let [n, c, ho, wo] = shape;
        let windows = cropped
            .reshape(&[n, c, ho, kh as isize, wo, kw as isize])?
            .permute(&[3, 5, 0, 1, 2, 4])?
            .reshape(&[k, n, c, ho, wo])?;
        return apply(windows);
    }
    // Overlapping or gapped windows: one strided slice per window offset, stacked.
    let mut windows = Vec::with_capacity(kh * kw);
    for i in 0..kh {
        for j in 0..kw {
            windows.push(x.slice(&[
                SliceArg::FULL,
                SliceArg::FULL,
                range(i, i + stride.0 * (ho - 1) + 1, stride.0),
                range(j, j + stride.1 * (wo - 1) + 1, stride.1),
            ])?);
        }
    }
    let refs: Vec<&Tensor> = windows.iter().collect();
    apply(Tensor::stack(&refs, 0)?)
}

/// Max over each `kernel` window, windows `stride` apart.
#[derive(Clone, Copy, Debug)]
pub struct MaxPool2d {
    /// Window size in (rows, columns), each at least 1.
    pub kernel: (usize, usize),
    /// Distance between window starts in (rows, columns); equal to `kernel` for the usual
    /// non-overlapping pooling.
    pub stride: (usize, usize),
}

impl MaxPool2d {
    /// `kernel` and `stride` each take a `usize` (both dims) or an `(h, w)` pair.
    pub fn new(kernel: impl IntoPair, stride: impl IntoPair) -> Result<MaxPool2d> {
        let (kernel, stride) = (kernel.into_pair(), stride.into_pair());
        check_positive("MaxPool2d", &[("kernel", kernel), ("stride", stride)])?;
        Ok(MaxPool2d { kernel, stride })
    }

    /// Max pooling of `x` (N, C, H, W) as a function, over the fused `Tensor::max_pool2d`
    /// (one pass each way).
    pub fn functional(x: &Tensor, kernel: impl IntoPair, stride: impl IntoPair) -> Result<Tensor> {
        let (k, s) = (kernel.into_pair(), stride.into_pair());
        // Checked here too, so that errors name the layer.
        PoolDims::new("MaxPool2d", x.shape(), k, s)?;
        x.max_pool2d(k, s)
    }

    /// The same pooling composed of differentiable primitives (windows copied onto a leading
    /// axis, then `max`): the reference for the fused op, and its backward under
    /// `create_graph`.
    pub fn functional_composite(
        x: &Tensor,
        kernel: impl IntoPair,
        stride: impl IntoPair,
    ) -> Result<Tensor> {
        let (k, s) = (kernel.into_pair(), stride.into_pair());
        pool("MaxPool2d", x, k, s, Reduce::Max)
    }
}

impl Module for MaxPool2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        MaxPool2d::functional(x, self.kernel, self.stride)
    }
}

/// Mean over each `kernel` window, windows `stride` apart.
#[derive(Clone, Copy, Debug)]
pub struct AvgPool2d {
    /// Window size in (rows, columns), each at least 1.
    pub kernel: (usize, usize),
    /// Distance between window starts in (rows, columns); equal to `kernel` for the usual
    /// non-overlapping pooling, which is also the fast path (one copy, no gather).
    pub stride: (usize, usize),
}

impl AvgPool2d {
    /// `kernel` and `stride` each take a `usize` (both dims) or an `(h, w)` pair.
    pub fn new(kernel: impl IntoPair, stride: impl IntoPair) -> Result<AvgPool2d> {
        let (kernel, stride) = (kernel.into_pair(), stride.into_pair());
        check_positive("AvgPool2d", &[("kernel", kernel), ("stride", stride)])?;
        Ok(AvgPool2d { kernel, stride })
    }

    /// Average pooling of `x` (N, C, H, W) as a function.
    pub fn functional(x: &Tensor, kernel: impl IntoPair, stride: impl IntoPair) -> Result<Tensor> {
        let (k, s) = (kernel.into_pair(), stride.into_pair());
        pool("AvgPool2d", x, k, s, Reduce::Mean)
    }
}

impl Module for AvgPool2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        AvgPool2d::functional(x, self.kernel, self.stride)
    }
}
