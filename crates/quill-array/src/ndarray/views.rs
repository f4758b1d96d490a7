//! Zero-copy views: each returns an array over the same buffer with a new layout (see
//! `quill_core::Layout` for the rules). `reshape` alone may copy, when no view exists.

use super::NDArray;
use quill_core::{Layout, Result, SliceArg};

impl NDArray {
    /// Reshape (one dim may be -1): a view when a strided layout exists, otherwise a copy.
    ///
    /// ```
    /// use quill_array::NDArray;
    /// use quill_core::DType;
    /// let a = NDArray::arange(0.0, 6.0, 1.0, DType::F32)?;
    /// let m = a.reshape(&[2, -1])?; // a view: (2, 3)
    /// assert!(m.shares_storage_with(&a));
    /// let t = m.permute(&[1, 0])?.reshape(&[6])?; // no view exists: a copy, in C order
    /// assert!(!t.shares_storage_with(&a));
    /// assert_eq!(t.to_vec::<f32>()?, vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    /// # Ok::<(), quill_core::Error>(())
    /// ```
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
    ///
    /// ```
    /// use quill_array::NDArray;
    /// use quill_core::DType;
    /// let m = NDArray::zeros(&[2, 3], DType::F32)?;
    /// assert_eq!(m.view(&[3, 2])?.shape(), &[3, 2]);
    /// assert!(m.permute(&[1, 0])?.view(&[6]).is_err());
    /// # Ok::<(), quill_core::Error>(())
    /// ```
    pub fn view(&self, shape: &[isize]) -> Result<NDArray> {
        Ok(self.with_layout(self.layout.reshape(shape)?))
    }

    /// The axes reordered (`axes[i]` is the source axis of result axis `i`): a view, no copy.
    ///
    /// ```
    /// use quill_array::NDArray;
    /// use quill_core::DType;
    /// let a = NDArray::arange(0.0, 6.0, 1.0, DType::F32)?.reshape(&[2, 3])?;
    /// let t = a.permute(&[1, 0])?;
    /// assert_eq!((t.shape(), t.strides()), (&[3, 2][..], &[1, 3][..]));
    /// assert!(t.shares_storage_with(&a));
    /// assert_eq!(t.to_vec::<f32>()?, vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    /// # Ok::<(), quill_core::Error>(())
    /// ```
    pub fn permute(&self, axes: &[isize]) -> Result<NDArray> {
        Ok(self.with_layout(self.layout.permute(axes)?))
    }

    /// Axes `a` and `b` swapped (negative counts from the end): a view.
    ///
    /// ```
    /// use quill_array::NDArray;
    /// use quill_core::DType;
    /// let a = NDArray::zeros(&[2, 3, 4], DType::F32)?;
    /// assert_eq!(a.transpose(0, -1)?.shape(), &[4, 3, 2]);
    /// # Ok::<(), quill_core::Error>(())
    /// ```
    pub fn transpose(&self, a: isize, b: isize) -> Result<NDArray> {
        Ok(self.with_layout(self.layout.transpose(a, b)?))
    }

    /// Broadcast with stride 0 (NumPy rules). The result is read-only when a dim was repeated,
    /// and so is every view of it: assigning into them errs.
    ///
    /// ```
    /// use quill_array::NDArray;
    /// use quill_core::DType;
    /// let row = NDArray::arange(0.0, 3.0, 1.0, DType::F32)?;
    /// let b = row.broadcast_to(&[2, 3])?;
    /// assert_eq!(b.strides(), &[0, 1]);
    /// assert!(b.assign_scalar(1.0).is_err()); // read-only
    /// assert!(row.broadcast_to(&[2, 4]).is_err());
    /// # Ok::<(), quill_core::Error>(())
    /// ```
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

    /// The given size-1 axes removed (an error names an axis that is not size 1): a view.
    ///
    /// ```
    /// use quill_array::NDArray;
    /// use quill_core::DType;
    /// let a = NDArray::zeros(&[1, 3, 1], DType::F32)?;
    /// assert_eq!(a.squeeze(&[0])?.shape(), &[3, 1]);
    /// assert!(a.squeeze(&[1]).is_err());
    /// # Ok::<(), quill_core::Error>(())
    /// ```
    pub fn squeeze(&self, axes: &[isize]) -> Result<NDArray> {
        Ok(self.with_layout(self.layout.squeeze(axes)?))
    }

    /// Every size-1 axis removed: a view.
    ///
    /// ```
    /// use quill_array::NDArray;
    /// use quill_core::DType;
    /// assert_eq!(NDArray::zeros(&[1, 3, 1], DType::F32)?.squeeze_all().shape(), &[3]);
    /// # Ok::<(), quill_core::Error>(())
    /// ```
    pub fn squeeze_all(&self) -> NDArray {
        self.with_layout(self.layout.squeeze_all())
    }

    /// A size-1 axis inserted at `axis` (negative counts from the end of the result): a view.
    ///
    /// ```
    /// use quill_array::NDArray;
    /// use quill_core::DType;
    /// let a = NDArray::zeros(&[2, 3], DType::F32)?;
    /// assert_eq!(a.unsqueeze(1)?.shape(), &[2, 1, 3]);
    /// assert_eq!(a.unsqueeze(-1)?.shape(), &[2, 3, 1]);
    /// # Ok::<(), quill_core::Error>(())
    /// ```
    pub fn unsqueeze(&self, axis: isize) -> Result<NDArray> {
        Ok(self.with_layout(self.layout.unsqueeze(axis)?))
    }

    /// The order along `axes` reversed: a view with negative strides.
    ///
    /// ```
    /// use quill_array::NDArray;
    /// use quill_core::DType;
    /// let a = NDArray::arange(0.0, 4.0, 1.0, DType::I64)?;
    /// let f = a.flip(&[0])?;
    /// assert_eq!(f.strides(), &[-1]);
    /// assert_eq!(f.to_vec::<i64>()?, vec![3, 2, 1, 0]);
    /// # Ok::<(), quill_core::Error>(())
    /// ```
    pub fn flip(&self, axes: &[isize]) -> Result<NDArray> {
        Ok(self.with_layout(self.layout.flip(axes)?))
    }

    /// NumPy basic indexing; build `args` with `s![..]` (ranges with steps, negative steps,
    /// integers that drop an axis, `NewAxis`, `Ellipsis`): a view.
    ///
    /// ```
    /// use quill_array::NDArray;
    /// use quill_core::{s, DType};
    /// let a = NDArray::arange(0.0, 12.0, 1.0, DType::F32)?.reshape(&[3, 4])?;
    /// let v = a.slice(&s![..;-1, 1..;2])?; // rows reversed, odd columns
    /// assert_eq!((v.shape(), v.strides(), v.offset()), (&[3, 2][..], &[-4, 2][..], 9));
    /// assert_eq!(v.to_vec::<f32>()?, vec![9.0, 11.0, 5.0, 7.0, 1.0, 3.0]);
    /// assert_eq!(a.slice(&s![1])?.shape(), &[4]); // an integer drops the axis
    /// # Ok::<(), quill_core::Error>(())
    /// ```
    pub fn slice(&self, args: &[SliceArg]) -> Result<NDArray> {
        Ok(self.with_layout(self.layout.slice(args)?))
    }

    /// A view with explicit shape, strides and offset (in elements) over this array's buffer;
    /// every reachable offset must lie inside the buffer.
    ///
    /// ```
    /// use quill_array::NDArray;
    /// use quill_core::DType;
    /// let a = NDArray::arange(0.0, 5.0, 1.0, DType::F32)?;
    /// // Sliding windows of 3, one element apart: rows overlap in the buffer.
    /// let w = a.as_strided(&[3, 3], &[1, 1], 0)?;
    /// assert_eq!(w.to_vec::<f32>()?, vec![0.0, 1.0, 2.0, 1.0, 2.0, 3.0, 2.0, 3.0, 4.0]);
    /// assert!(a.as_strided(&[3, 3], &[2, 1], 0).is_err()); // would read past the end
    /// # Ok::<(), quill_core::Error>(())
    /// ```
    pub fn as_strided(&self, shape: &[usize], strides: &[isize], offset: usize) -> Result<NDArray> {
        Ok(self.with_layout(Layout::as_strided(
            shape,
            strides,
            offset,
            self.buffer_len(),
        )?))
    }
}
