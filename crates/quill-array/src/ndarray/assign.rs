//! Data movement: `compact`, copies, `astype`, and assignment into a view from an array
//! (broadcast, cast) or a scalar (the seeds' `ewise_setitem` / `scalar_setitem`).

use super::NDArray;
use quill_core::{DType, Error, Result, Scalar, SliceArg};
use std::sync::Arc;

impl NDArray {
    /// This array when it is already contiguous and writable (no copy), otherwise a contiguous
    /// copy (`Error::OutOfMemory` when the copy cannot fit: a broadcast view can describe far
    /// more elements than its buffer holds).
    pub fn compact(&self) -> Result<NDArray> {
        if self.is_contiguous() && !self.is_readonly() {
            Ok(self.clone())
        } else {
            self.deep_copy()
        }
    }

    /// A contiguous copy that shares nothing with `self` (`Error::OutOfMemory` when it cannot
    /// fit: a broadcast view may stand for far more elements than memory holds).
    pub fn deep_copy(&self) -> Result<NDArray> {
        super::check_alloc("copy", self.numel(), self.dtype)?;
        let out = self.read().compact(&self.layout)?;
        NDArray::fresh(out, self.shape())
    }

    /// A contiguous copy converted to `dtype` with NumPy's cast rules (a copy even when the dtype
    /// is unchanged, as NumPy's default); errors as `deep_copy`.
    pub fn astype(&self, dtype: DType) -> Result<NDArray> {
        if dtype == self.dtype {
            return self.deep_copy();
        }
        super::check_alloc("astype", self.numel(), dtype)?;
        let out = self.read().cast(&self.layout, dtype)?;
        NDArray::fresh(out, self.shape())
    }

    /// An error naming `op` when this array is read-only (a broadcast view or a view of one);
    /// writes check this before anything else, as NumPy's do.
    pub fn check_writable(&self, op: &'static str) -> Result<()> {
        match self.layout.broadcast_dim() {
            Some(dim) => Err(Error::ReadOnlyView {
                op,
                shape: self.shape().into(),
                strides: self.strides().to_vec(),
                dim,
            }),
            None if self.readonly => Err(Error::invalid(
                op,
                format!(
                    "assignment destination is read-only: this view (shape {:?}) is part of a \
                     broadcast view, whose elements are shared; compact() it first",
                    self.shape()
                ),
            )),
            None => Ok(()),
        }
    }

    /// Writes `src` (broadcast to this view's shape and cast to its dtype) into this view. The
    /// result equals NumPy's `self[...] = src` even when `src` overlaps `self` in one buffer.
    pub fn assign(&self, src: &NDArray) -> Result<()> {
        const OP: &str = "assign";
        self.check_writable(OP)?;
        // A source on another device moves to the destination's first (before broadcasting,
        // so only its own elements move).
        let src = &if src.device() != self.device() {
            src.to_device(self.device())?
        } else {
            src.clone()
        };
        // As NumPy's setitem, leading size-1 axes beyond the destination's rank are dropped
        // (`a[:] = ones((1, 3))` into shape (3,), `a[0, 0] = ones(1)`).
        let given: quill_core::Dims = src.shape().into();
        let extra = src.ndim().saturating_sub(self.ndim());
        let src = &if extra > 0 && src.shape()[..extra].iter().all(|&d| d == 1) {
            let kept: Vec<isize> = src.shape()[extra..].iter().map(|&d| d as isize).collect();
            src.view(&kept)?
        } else {
            src.clone()
        };
        let src = match src.layout.broadcast_to(self.shape()) {
            Ok(l) => src.with_layout(l),
            Err(_) => {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    lhs: self.shape().into(),
                    rhs: given,
                    hint: " (the value must broadcast to the destination's shape)".into(),
                })
            }
        };
        // A source in the destination's buffer is read in full before any write (as NumPy).
        let src = if src.dtype != self.dtype {
            src.astype(self.dtype)?
        } else if self.shares_storage_with(&src) {
            src.deep_copy()?
        } else {
            src
        };
        // Lock in address order so that two threads assigning a -> b and b -> a cannot deadlock.
        let (dst_first, src_storage) = (
            Arc::as_ptr(&self.storage) < Arc::as_ptr(&src.storage),
            src.storage.clone(),
        );
        if dst_first {
            let mut d = self.write();
            let s = src_storage.lock.read().unwrap_or_else(|e| e.into_inner());
            d.copy_from(&self.layout, &s, &src.layout)
        } else {
            let s = src_storage.lock.read().unwrap_or_else(|e| e.into_inner());
            let mut d = self.write();
            d.copy_from(&self.layout, &s, &src.layout)
        }
    }

    /// Writes `value` at every element of this view. As NumPy 2, a value the dtype cannot hold
    /// (an integer out of range, a float that is NaN, infinite or out of range for an integer
    /// dtype) is an error rather than a wrapped or saturated number.
    pub fn assign_scalar(&self, value: impl Into<Scalar>) -> Result<()> {
        let value = value.into();
        self.check_writable("assign_scalar")?;
        quill_core::promote::check_scalar_fits("assign_scalar", self.dtype, value)?;
        self.write().fill(&self.layout, value)
    }

    /// Whether `value` may be written into this array (see `assign_scalar`), as an error
    /// naming `op` when not.
    pub fn check_fits(&self, op: &'static str, value: impl Into<Scalar>) -> Result<()> {
        quill_core::promote::check_scalar_fits(op, self.dtype, value.into())
    }

    /// `self[index] = src` (NumPy basic indexing, `src` broadcast and cast).
    pub fn set(&self, index: &[SliceArg], src: &NDArray) -> Result<()> {
        self.slice(index)?.assign(src)
    }

    /// `self[index] = value`.
    pub fn set_scalar(&self, index: &[SliceArg], value: impl Into<Scalar>) -> Result<()> {
        self.slice(index)?.assign_scalar(value)
    }
}
