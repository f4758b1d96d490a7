//! 2-D convolution on arrays (PyTorch's `conv2d` without bias, and its two gradients): the
//! shape and dtype rules (`ConvDims`), compaction of the operands (the kernels read
//! contiguous NCHW buffers) and the calls into the backend. f16 and bf16 compute in f32 and
//! round once. Max pooling (the CNN's other window op) lives here too.

use super::{check_alloc, NDArray, Reads};
use crate::backend::{colocate, Storage};
use quill_core::{Conv2dSpec, ConvDims, DType, Error, PoolDims, Result};

/// The dtype the kernels compute in for operands of `a`'s and `b`'s dtypes.
pub(crate) fn compute_dtype(op: &'static str, a: &NDArray, b: &NDArray) -> Result<DType> {
    if a.dtype() != b.dtype() {
        return Err(Error::DTypeMismatch {
            op,
            expected: a.dtype(),
            got: b.dtype(),
        });
    }
    match a.dtype() {
        DType::F64 => Ok(DType::F64),
        DType::F32 | DType::F16 | DType::BF16 => Ok(DType::F32),
        d => Err(Error::invalid(
            op,
            format!("needs floating-point operands, got {d}"),
        )),
    }
}

/// `x` contiguous in `dtype`.
pub(crate) fn prepared(x: &NDArray, dtype: DType) -> Result<NDArray> {
    if x.dtype() == dtype {
        x.compact()
    } else {
        x.astype(dtype)
    }
}

/// Runs `kernel` on the two operands made contiguous in the compute dtype and wraps its
/// result as a fresh array of `shape` in `out_dtype`.
fn run(
    op: &'static str,
    (a, b): (&NDArray, &NDArray),
    compute: DType,
    shape: &[usize],
    out_dtype: DType,
    kernel: impl FnOnce((&Storage, usize), (&Storage, usize)) -> Result<Storage>,
) -> Result<NDArray> {
    check_alloc(op, shape.iter().product(), compute)?;
    let [a, b] = colocate(op, [a, b])?;
    let (a, b) = (prepared(&a, compute)?, prepared(&b, compute)?);
    let s = {
        let g = Reads::new([&a, &b]);
        kernel((g.get(0), a.offset()), (g.get(1), b.offset()))?
    };
    let out = NDArray::fresh(s, shape)?;
    Ok(if out.dtype() != out_dtype {
        out.astype(out_dtype)?
    } else {
        out
    })
}

/// Errors unless `got` is `want` (the shape the forward's sizes imply).
fn check_shape(op: &'static str, what: &str, got: &[usize], want: &[usize]) -> Result<()> {
    if got == want {
        return Ok(());
    }
    Err(Error::ShapeMismatch {
        op,
        lhs: got.into(),
        rhs: want.into(),
        hint: format!(" ({what} must have the shape the convolution implies)"),
    })
}

impl NDArray {
    /// 2-D convolution (cross-correlation, PyTorch's `conv2d` without bias) of this (N, C, H,
    /// W) array with `weight` (O, C / groups, kh, kw) under `spec`: (N, O, Ho, Wo) with
    /// `Ho = (H + 2 ph - dh (kh - 1) - 1) / sh + 1`. Both operands share one float dtype; any
    /// strides (non-contiguous operands are compacted first).
    pub fn conv2d(&self, weight: &NDArray, spec: Conv2dSpec) -> Result<NDArray> {
        const OP: &str = "conv2d";
        let dims = ConvDims::new(OP, self.shape(), weight.shape(), spec)?;
        let compute = compute_dtype(OP, self, weight)?;
        run(
            OP,
            (self, weight),
            compute,
            &dims.output_shape(),
            self.dtype(),
            |x, w| Storage::conv2d(x, w, &dims),
        )
    }

    /// The gradient of `x.conv2d(weight, spec)` with respect to `x` (of shape
    /// `input_shape`), given the output's gradient `grad` (this array).
    pub fn conv2d_backward_input(
        &self,
        weight: &NDArray,
        input_shape: &[usize],
        spec: Conv2dSpec,
    ) -> Result<NDArray> {
        const OP: &str = "conv2d_backward_input";
        let dims = ConvDims::new(OP, input_shape, weight.shape(), spec)?;
        check_shape(OP, "grad", self.shape(), &dims.output_shape())?;
        let compute = compute_dtype(OP, self, weight)?;
        run(
            OP,
            (self, weight),
            compute,
            &dims.input_shape(),
            self.dtype(),
            |gy, w| Storage::conv2d_backward_input(gy, w, &dims),
        )
    }

    /// The gradient of `x.conv2d(weight, spec)` with respect to `weight` (of shape
    /// `weight_shape`), with `x` this array and `grad` the output's gradient.
    pub fn conv2d_backward_weight(
        &self,
        grad: &NDArray,
        weight_shape: &[usize],
        spec: Conv2dSpec,
    ) -> Result<NDArray> {
        const OP: &str = "conv2d_backward_weight";
        let dims = ConvDims::new(OP, self.shape(), weight_shape, spec)?;
        check_shape(OP, "grad", grad.shape(), &dims.output_shape())?;
        let compute = compute_dtype(OP, self, grad)?;
        run(
            OP,
            (self, grad),
            compute,
            &dims.weight_shape(),
            self.dtype(),
            |x, gy| Storage::conv2d_backward_weight(x, gy, &dims),
        )
    }
}

impl NDArray {
    /// 2-D max pooling of this (N, C, H, W) float array: windows `kernel` (kh, kw) taken
    /// `stride` apart, no padding, floor output size (N, C, Ho, Wo); NaN wins a window.
    pub fn max_pool2d(&self, kernel: (usize, usize), stride: (usize, usize)) -> Result<NDArray> {
        const OP: &str = "max_pool2d";
        let d = PoolDims::new(OP, self.shape(), kernel, stride)?;
        let compute = compute_dtype(OP, self, self)?;
        let shape = [self.shape()[0], self.shape()[1], d.ho, d.wo];
        check_alloc(OP, shape.iter().product(), compute)?;
        let x = prepared(self, compute)?;
        let s = {
            let g = Reads::new([&x]);
            Storage::max_pool2d((g.get(0), x.offset()), &d)?
        };
        let out = NDArray::fresh(s, &shape)?;
        Ok(if out.dtype() != self.dtype() {
            out.astype(self.dtype())?
        } else {
            out
        })
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
        const OP: &str = "max_pool2d_backward";
        let d = PoolDims::new(OP, self.shape(), kernel, stride)?;
        let want = [self.shape()[0], self.shape()[1], d.ho, d.wo];
        check_shape(OP, "y", y.shape(), &want)?;
        check_shape(OP, "grad", grad.shape(), &want)?;
        let compute = compute_dtype(OP, self, y)?;
        compute_dtype(OP, self, grad)?;
        check_alloc(OP, self.numel(), compute)?;
        let [x, y, g] = colocate(OP, [self, y, grad])?;
        let (x, y, g) = (
            prepared(&x, compute)?,
            prepared(&y, compute)?,
            prepared(&g, compute)?,
        );
        let s = {
            let r = Reads::new([&x, &y, &g]);
            Storage::max_pool2d_backward(
                (r.get(0), x.offset()),
                (r.get(1), y.offset()),
                (r.get(2), g.offset()),
                &d,
            )?
        };
        let out = NDArray::fresh(s, self.shape())?;
        Ok(if out.dtype() != self.dtype() {
            out.astype(self.dtype())?
        } else {
            out
        })
    }
}
