//! Joining and splitting along an axis: `concat` and `stack` (NumPy's concatenate / stack, with
//! dtype promotion) and `split` / `chunk` (PyTorch's, returning views). A join allocates its
//! output once and assigns each input into a slice view of it, so the strided copy kernels do
//! the work whatever the inputs' layouts.

use super::NDArray;
use crate::backend::{colocate_all, Storage};
use crate::device::Device;
use quill_core::shape::normalize_axis;
use quill_core::{DType, Error, Layout, Result, SliceArg};

/// The slice arguments selecting `start..start + len` on `axis` of a rank-`ndim` array.
pub(crate) fn axis_range(ndim: usize, axis: usize, start: usize, len: usize) -> Vec<SliceArg> {
    let mut args = vec![SliceArg::FULL; ndim];
    args[axis] = SliceArg::range(Some(start as isize), Some((start + len) as isize), 1);
    args
}

/// A contiguous array on `device` whose every element the caller overwrites.
fn uninit(op: &'static str, shape: &[usize], dtype: DType, device: Device) -> Result<NDArray> {
    let n = super::create::checked_len(op, shape, dtype)?;
    Ok(NDArray::from_storage(
        Storage::for_overwrite(device, dtype, n)?,
        Layout::contiguous(shape)?,
    ))
}

/// `concat` with the op name used in errors (`stack` reports as itself).
fn concat_impl(op: &'static str, arrays: &[&NDArray], axis: isize) -> Result<NDArray> {
    let Some(first) = arrays.first() else {
        return Err(Error::invalid(op, "needs at least one array"));
    };
    // The output is made where the inputs are; each input is one strided copy into it.
    let device = colocate_all(op, arrays)?;
    let ndim = first.ndim();
    if ndim == 0 {
        return Err(Error::invalid(
            op,
            "rank-0 arrays cannot be concatenated (there is no axis); unsqueeze them or use stack",
        ));
    }
    let ax = normalize_axis(op, axis, ndim, 0)?;
    let mut shape = first.shape().to_vec();
    let mut dtype = first.dtype();
    for (i, a) in arrays.iter().enumerate().skip(1) {
        let same_rest =
            a.ndim() == ndim && (0..ndim).all(|d| d == ax || a.shape()[d] == first.shape()[d]);
        if !same_rest {
            return Err(Error::ShapeMismatch {
                op,
                lhs: first.shape().into(),
                rhs: a.shape().into(),
                hint: format!(
                    " (array {i}: every input needs rank {ndim} and the same size on every \
                     axis but axis {ax})"
                ),
            });
        }
        shape[ax] = shape[ax]
            .checked_add(a.shape()[ax])
            .ok_or(Error::Overflow {
                op,
                shape: shape.as_slice().into(),
            })?;
        dtype = quill_core::promote_types(dtype, a.dtype());
    }
    let out = uninit(op, &shape, dtype, device)?;
    if out.numel() == 0 {
        return Ok(out);
    }
    let mut start = 0;
    for a in arrays {
        let len = a.shape()[ax];
        if len > 0 {
            out.slice(&axis_range(ndim, ax, start, len))?.assign(a)?;
        }
        start += len;
    }
    Ok(out)
}

impl NDArray {
    /// Joins arrays along an existing `axis` (negative counts from the end), as NumPy's
    /// `concatenate`: equal ranks, equal sizes off the axis, dtypes promoted with
    /// `promote_types`. The result is a new contiguous array.
    pub fn concat(arrays: &[&NDArray], axis: isize) -> Result<NDArray> {
        concat_impl("concat", arrays, axis)
    }

    /// Joins arrays of one shape along a new `axis` (in `-(ndim + 1)..=ndim`), as NumPy's
    /// `stack`.
    pub fn stack(arrays: &[&NDArray], axis: isize) -> Result<NDArray> {
        const OP: &str = "stack";
        let Some(first) = arrays.first() else {
            return Err(Error::invalid(OP, "needs at least one array"));
        };
        let ax = normalize_axis(OP, axis, first.ndim(), 1)?;
        for (i, a) in arrays.iter().enumerate().skip(1) {
            if a.shape() != first.shape() {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    lhs: first.shape().into(),
                    rhs: a.shape().into(),
                    hint: format!(" (array {i}: every input needs the same shape)"),
                });
            }
        }
        let expanded = arrays
            .iter()
            .map(|a| a.unsqueeze(ax as isize))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&NDArray> = expanded.iter().collect();
        concat_impl(OP, &refs, ax as isize)
    }

    /// Views of consecutive pieces of `axis` with the given lengths, which must add up to the
    /// axis length (PyTorch's `split_with_sizes`). No data moves.
    pub fn split(&self, sizes: &[usize], axis: isize) -> Result<Vec<NDArray>> {
        split_impl("split", self, sizes, axis)
    }

    /// `n` views (fewer when the axis is short) of `ceil(len / n)` elements along `axis`, the
    /// last possibly smaller, as `torch.chunk`. An empty axis gives `n` empty views.
    pub fn chunk(&self, n: usize, axis: isize) -> Result<Vec<NDArray>> {
        const OP: &str = "chunk";
        if n == 0 {
            return Err(Error::invalid(
                OP,
                "the number of chunks must be at least 1, got 0",
            ));
        }
        let ax = normalize_axis(OP, axis, self.ndim(), 0)?;
        let len = self.shape()[ax];
        let sizes: Vec<usize> = if len == 0 {
            vec![0; n]
        } else {
            let step = len.div_ceil(n);
            (0..len).step_by(step).map(|s| step.min(len - s)).collect()
        };
        split_impl(OP, self, &sizes, axis)
    }
}

fn split_impl(op: &'static str, a: &NDArray, sizes: &[usize], axis: isize) -> Result<Vec<NDArray>> {
    let ax = normalize_axis(op, axis, a.ndim(), 0)?;
    let len = a.shape()[ax];
    let total = sizes.iter().try_fold(0usize, |s, &x| s.checked_add(x));
    if total != Some(len) {
        return Err(Error::invalid(
            op,
            format!(
                "the sizes {sizes:?} must add up to the length {len} of axis {ax} of shape {:?}",
                a.shape()
            ),
        ));
    }
    let mut start = 0;
    sizes
        .iter()
        .map(|&n| {
            let v = a.slice(&axis_range(a.ndim(), ax, start, n));
            start += n;
            v
        })
        .collect()
}
