//! Zero padding and dilation: fresh arrays that hold this array's elements at an offset or a
//! stride and zeros everywhere else, plus `undilate`, the strided view that reads them back.

use super::create::checked_len;
use super::NDArray;
use crate::backend::Storage;
use crate::device::Device;
use quill_core::shape::normalize_axes;
use quill_core::{Error, Result, SliceArg};

impl NDArray {
    /// NumPy's `np.pad(a, pads)` with zeros: `pads[i] = (before, after)` zeros are added on
    /// axis `i`, one pair per axis. A fresh contiguous array on this array's device.
    pub fn pad(&self, pads: &[(usize, usize)]) -> Result<NDArray> {
        const OP: &str = "pad";
        if pads.len() != self.ndim() {
            return Err(Error::invalid(
                OP,
                format!(
                    "{} (before, after) pairs {pads:?} for an array of shape {:?}: give one pair \
                     per axis",
                    pads.len(),
                    self.shape()
                ),
            ));
        }
        let mut shape = Vec::with_capacity(pads.len());
        for (&(b, a), &d) in pads.iter().zip(self.shape()) {
            let n = d.checked_add(b).and_then(|n| n.checked_add(a));
            shape.push(n.ok_or_else(|| Error::Overflow {
                op: OP,
                shape: self.shape().into(),
            })?);
        }
        let out = self.zeros_of_shape(OP, &shape)?;
        let interior: Vec<SliceArg> = pads
            .iter()
            .zip(self.shape())
            .map(|(&(b, _), &d)| range(b, b + d, 1))
            .collect();
        out.set(&interior, self)?;
        Ok(out)
    }

    /// needle's `dilate`: along each of `axes`, `dilation` zeros follow every element, so a
    /// dim of size n becomes `n * (dilation + 1)`. A fresh array (a copy even for dilation 0).
    pub fn dilate(&self, axes: &[isize], dilation: usize) -> Result<NDArray> {
        const OP: &str = "dilate";
        let axes = normalize_axes(OP, axes, self.ndim())?;
        let step = step_of(OP, dilation)?;
        let mut shape = self.shape().to_vec();
        for &a in &axes {
            shape[a] = shape[a]
                .checked_mul(step as usize)
                .ok_or_else(|| Error::Overflow {
                    op: OP,
                    shape: self.shape().into(),
                })?;
        }
        let out = self.zeros_of_shape(OP, &shape)?;
        out.set(&every(&axes, self.ndim(), step), self)?;
        Ok(out)
    }

    /// needle's `undilate`, the inverse of `dilate`: every `(dilation + 1)`-th element along
    /// each of `axes` (from the first), as a view. A dim of size n becomes
    /// `ceil(n / (dilation + 1))`.
    pub fn undilate(&self, axes: &[isize], dilation: usize) -> Result<NDArray> {
        const OP: &str = "undilate";
        let axes = normalize_axes(OP, axes, self.ndim())?;
        self.slice(&every(&axes, self.ndim(), step_of(OP, dilation)?))
    }

    /// Zeros of `shape` in this array's dtype, on its device.
    fn zeros_of_shape(&self, op: &'static str, shape: &[usize]) -> Result<NDArray> {
        let n = checked_len(op, shape, self.dtype)?;
        if self.device() == Device::Cpu {
            return NDArray::zeros(shape, self.dtype);
        }
        let out = NDArray::fresh(Storage::for_overwrite(self.device(), self.dtype, n)?, shape)?;
        out.assign_scalar(0.0)?;
        Ok(out)
    }
}

/// `start..stop;step` as a slice argument.
fn range(start: usize, stop: usize, step: usize) -> SliceArg {
    SliceArg::Range {
        start: Some(start as isize),
        stop: Some(stop as isize),
        step: step as isize,
    }
}

/// `dilation + 1`, the step between kept elements, as a slice step.
fn step_of(op: &'static str, dilation: usize) -> Result<isize> {
    isize::try_from(dilation)
        .ok()
        .and_then(|d| d.checked_add(1))
        .ok_or_else(|| Error::invalid(op, format!("dilation {dilation} is too large")))
}

/// Slice arguments that take every `step`-th element on `axes` and everything elsewhere.
fn every(axes: &[usize], ndim: usize, step: isize) -> Vec<SliceArg> {
    (0..ndim)
        .map(|i| {
            if axes.contains(&i) {
                SliceArg::Range {
                    start: None,
                    stop: None,
                    step,
                }
            } else {
                SliceArg::FULL
            }
        })
        .collect()
}
