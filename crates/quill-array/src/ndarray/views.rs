//! Zero-copy views: each returns an array over the same buffer with a new layout (see
//! `quill_core::Layout` for the rules). `reshape` alone may copy, when no view exists.

use super::NDArray;
use quill_core::{Layout, Result, SliceArg};

impl NDArray {
    /// Reshape (one dim may be -1): a view when a strided layout exists, otherwise a copy.
    pub fn reshape(&self, shape: &[isize]) -> Result<NDArray> {
        match self.layout.reshape(shape) {
            Ok(l) => Ok(self.with_layout(l)),
            Err(quill_core::Error::ReshapeNeedsCopy { .. }) => {
                let c = self.deep_copy()?;
                let l = c.layout.reshape(shape)?;
                Ok(c.with_layout(l))
            }
            Err(e) => Err(e),
        }
    }

    /// Reshape that never copies: an error naming the layout when no view exists.
    pub fn view(&self, shape: &[isize]) -> Result<NDArray> {
        Ok(self.with_layout(self.layout.reshape(shape)?))
    }

    pub fn permute(&self, axes: &[isize]) -> Result<NDArray> {
        Ok(self.with_layout(self.layout.permute(axes)?))
    }

    pub fn transpose(&self, a: isize, b: isize) -> Result<NDArray> {
        Ok(self.with_layout(self.layout.transpose(a, b)?))
    }

    /// Broadcast with stride 0 (NumPy rules). The result is read-only when a dim was repeated,
    /// and so is every view of it: assigning into them errs.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<NDArray> {
        let mut v = self.with_layout(self.layout.broadcast_to(shape)?);
        v.readonly |= v.layout.broadcast_dim().is_some();
        Ok(v)
    }

    /// This view, read-only from now on (and every view of it): NumPy's `broadcast_to`
    /// result is read-only even where it repeats nothing.
    pub fn into_readonly(mut self) -> NDArray {
        self.readonly = true;
        self
    }

    pub fn squeeze(&self, axes: &[isize]) -> Result<NDArray> {
        Ok(self.with_layout(self.layout.squeeze(axes)?))
    }

    pub fn squeeze_all(&self) -> NDArray {
        self.with_layout(self.layout.squeeze_all())
    }

    pub fn unsqueeze(&self, axis: isize) -> Result<NDArray> {
        Ok(self.with_layout(self.layout.unsqueeze(axis)?))
    }

    pub fn flip(&self, axes: &[isize]) -> Result<NDArray> {
        Ok(self.with_layout(self.layout.flip(axes)?))
    }

    /// NumPy basic indexing; build `args` with `s![..]`.
    pub fn slice(&self, args: &[SliceArg]) -> Result<NDArray> {
        Ok(self.with_layout(self.layout.slice(args)?))
    }

    /// A view with explicit shape, strides and offset (in elements) over this array's buffer;
    /// every reachable offset must lie inside the buffer.
    pub fn as_strided(&self, shape: &[usize], strides: &[isize], offset: usize) -> Result<NDArray> {
        Ok(self.with_layout(Layout::as_strided(
            shape,
            strides,
            offset,
            self.buffer_len(),
        )?))
    }
}
