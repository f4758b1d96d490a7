//! Integer-array indexing along one axis: `gather` and out-of-place `scatter_add` (PyTorch's),
//! `index_select` (PyTorch's) and `take_along_axis` (NumPy's). The last two are `gather` on
//! zero-copy views: a 1-D or broadcast index becomes a stride-0 view of the gather index, so no
//! index is ever materialised. Indices are read through their own strides in any of i32, i64
//! and u8; negative values count from the end as in Python.

use super::{NDArray, Reads};
use crate::backend::{colocate, Storage};
use quill_core::shape::{broadcast_shapes, normalize_axis};
use quill_core::{Along, Error, Layout, Result, SliceArg};
use quill_cpu::index::index_dtype_error;

fn check_index_dtype(op: &'static str, index: &NDArray) -> Result<()> {
    match index.dtype() {
        d if d.is_int() => Ok(()),
        d => Err(index_dtype_error(op, d)),
    }
}

/// `index` on `device`: positions follow the array they index (as a CPU index may pick from
/// a GPU tensor in PyTorch's advanced indexing), so labels or token ids from a host data
/// loader index GPU arrays without a `to_device` at every call.
fn index_on(index: &NDArray, device: crate::Device) -> Result<NDArray> {
    if index.device() == device {
        Ok(index.clone())
    } else {
        index.to_device(device)
    }
}

/// The layout of `a`'s element at position 0 of `axis` for every position of `shape` (which is
/// no larger than `a` off the axis): the gather / scatter base, with stride 0 on `axis`.
fn axis_base(a: &NDArray, axis: usize, shape: &[usize]) -> Result<Layout> {
    let mut args: Vec<SliceArg> = shape
        .iter()
        .map(|&n| SliceArg::range(Some(0), Some(n as isize), 1))
        .collect();
    args[axis] = SliceArg::range(Some(0), Some(1), 1);
    a.layout.slice(&args)?.broadcast_to(shape)
}

/// The error for a non-empty index into an empty axis: names the index's first value.
fn empty_axis_error(op: &'static str, index: &NDArray, axis: usize) -> Result<NDArray> {
    let first = index.slice(&vec![SliceArg::Index(0); index.ndim()])?;
    Err(Error::IndexOutOfRange {
        op,
        index: first.item::<i64>()? as isize,
        axis,
        size: 0,
    })
}

/// Checks `index` against `a` as gather and scatter_add need: same rank, integer dtype, and no
/// larger than `a` off the axis. Returns the normalised axis.
fn check_along(op: &'static str, a: &NDArray, axis: isize, index: &NDArray) -> Result<usize> {
    check_index_dtype(op, index)?;
    let ndim = a.ndim();
    let ax = normalize_axis(op, axis, ndim.max(1), 0)?;
    let fits =
        index.ndim() == ndim && (0..ndim).all(|d| d == ax || index.shape()[d] <= a.shape()[d]);
    if !fits {
        return Err(Error::ShapeMismatch {
            op,
            lhs: a.shape().into(),
            rhs: index.shape().into(),
            hint: format!(
                " (the index needs the input's rank and no larger size on any axis but {ax})"
            ),
        });
    }
    Ok(ax)
}

/// `out[p] = src[p with axis replaced by index[p]]` for every position `p` of `index`, whose
/// shape is checked by the caller. `op` names the public op in errors.
fn gather_impl(op: &'static str, src: &NDArray, ax: usize, index: &NDArray) -> Result<NDArray> {
    if src.ndim() == 0 {
        let out = gather_impl(op, &src.view(&[1])?, 0, &index.view(&[1])?)?;
        return out.view(&[]);
    }
    let index = index_on(index, src.device())?;
    let shape = index.shape();
    if index.numel() == 0 {
        return NDArray::zeros(shape, src.dtype)?.to_device(src.device());
    }
    if src.shape()[ax] == 0 {
        return empty_axis_error(op, &index, ax);
    }
    let base = axis_base(src, ax, shape)?;
    let along = Along {
        stride: src.strides()[ax],
        size: src.shape()[ax],
        axis: ax,
    };
    let g = Reads::new([src, &index]);
    let out = Storage::gather(op, (g.get(0), &base), (g.get(1), &index.layout), along)?;
    NDArray::fresh(out, shape)
}

impl NDArray {
    /// `torch.gather`: `out[i][j][k] = self[i][index[i][j][k]][k]` for `axis = 1`. `index` has
    /// this array's rank, an integer dtype (i32, i64 or u8) and no larger size off `axis`; the
    /// output has its shape and this array's dtype. Negative indices count from the end.
    pub fn gather(&self, axis: isize, index: &NDArray) -> Result<NDArray> {
        const OP: &str = "gather";
        let ax = check_along(OP, self, axis, index)?;
        gather_impl(OP, self, ax, index)
    }

    /// `torch.scatter_add`, out of place: a copy of this array with `src[i][j][k]` added at
    /// `[i][index[i][j][k]][k]` (for `axis = 1`), in C order of `index`. `src` must have the
    /// shape of `index` and cast to this dtype within its kind (no float into an integer array).
    pub fn scatter_add(&self, axis: isize, index: &NDArray, src: &NDArray) -> Result<NDArray> {
        const OP: &str = "scatter_add";
        let ax = check_along(OP, self, axis, index)?;
        if src.shape() != index.shape() {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: index.shape().into(),
                rhs: src.shape().into(),
                hint: " (src must have the index's shape)".into(),
            });
        }
        if !quill_core::promote::same_kind(src.dtype, self.dtype) {
            return Err(Error::invalid(
                OP,
                format!(
                    "cannot add a {} src into a {} array (casting rule same_kind)",
                    src.dtype, self.dtype
                ),
            ));
        }
        if self.ndim() == 0 {
            let one = |a: &NDArray| a.view(&[1]);
            return self
                .view(&[1])?
                .scatter_add(0, &one(index)?, &one(src)?)?
                .view(&[]);
        }
        let out = self.deep_copy()?;
        if index.numel() == 0 {
            return Ok(out);
        }
        if self.shape()[ax] == 0 {
            return empty_axis_error(OP, index, ax);
        }
        let src = if src.dtype == self.dtype {
            src.clone()
        } else {
            src.astype(self.dtype)?
        };
        let index = index_on(index, out.device())?;
        let [out, index, src] = colocate(OP, [&out, &index, &src])?;
        let base = axis_base(&out, ax, index.shape())?;
        let along = Along {
            stride: out.strides()[ax],
            size: out.shape()[ax],
            axis: ax,
        };
        // `out` is fresh, so only `src` and `index` can share a buffer.
        let g = Reads::new([&src, &index]);
        Storage::scatter_add(
            OP,
            (&mut *out.write(), &base),
            (g.get(0), &src.layout),
            (g.get(1), &index.layout),
            along,
        )?;
        drop(g);
        Ok(out)
    }

    /// `torch.index_select`: the positions `index` (1-D, or rank 0 for one position) picks along
    /// `axis`, in its order; the output's `axis` has `index`'s length.
    pub fn index_select(&self, axis: isize, index: &NDArray) -> Result<NDArray> {
        const OP: &str = "index_select";
        check_index_dtype(OP, index)?;
        let ax = normalize_axis(OP, axis, self.ndim(), 0)?;
        if index.ndim() > 1 {
            return Err(Error::invalid(
                OP,
                format!("the index must be 1-D, got shape {:?}", index.shape()),
            ));
        }
        let mut shape = self.shape().to_vec();
        shape[ax] = index.numel();
        let mut along = vec![1isize; self.ndim()];
        along[ax] = index.numel() as isize;
        // A stride-0 view: every row reads the same index entries (moved first, so that a
        // transfer copies the entries and not the broadcast).
        let idx = index_on(index, self.device())?
            .view(&along)?
            .broadcast_to(&shape)?;
        gather_impl(OP, self, ax, &idx)
    }

    /// NumPy's `take_along_axis`: like `gather`, but `index` broadcasts against this array on
    /// every axis but `axis` (both have the same rank).
    pub fn take_along_axis(&self, index: &NDArray, axis: isize) -> Result<NDArray> {
        const OP: &str = "take_along_axis";
        check_index_dtype(OP, index)?;
        let ax = normalize_axis(OP, axis, self.ndim(), 0)?;
        if index.ndim() != self.ndim() {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: self.shape().into(),
                rhs: index.shape().into(),
                hint: " (the index needs the input's rank)".into(),
            });
        }
        let off_axis = |s: &[usize]| {
            let mut s = s.to_vec();
            s[ax] = 1;
            s
        };
        let mut shape = broadcast_shapes(OP, &off_axis(self.shape()), &off_axis(index.shape()))
            .map_err(|e| match e {
                Error::ShapeMismatch { .. } => Error::ShapeMismatch {
                    op: OP,
                    lhs: self.shape().into(),
                    rhs: index.shape().into(),
                    hint: format!(" (the index must broadcast against the input off axis {ax})"),
                },
                e => e,
            })?;
        shape[ax] = self.shape()[ax];
        let src = self.broadcast_to(&shape)?;
        shape[ax] = index.shape()[ax];
        let idx = index_on(index, self.device())?.broadcast_to(&shape)?;
        gather_impl(OP, &src, ax, &idx)
    }
}

impl NDArray {
    /// The rows (first-axis slices) at `indices`, in their order, as a new contiguous array
    /// with a first axis of `indices.len()`: how a dataset gathers a batch. On the CPU, one
    /// copy per row into a pooled buffer; elsewhere `index_select` on the device. An index past
    /// the first axis is an error naming it.
    pub fn select_rows(&self, indices: &[usize]) -> Result<NDArray> {
        const OP: &str = "select_rows";
        if self.ndim() == 0 {
            return Err(Error::invalid(OP, "a rank-0 array has no rows"));
        }
        let n = self.shape()[0];
        if let Some(&bad) = indices.iter().find(|&&i| i >= n) {
            return Err(Error::IndexOutOfRange {
                op: OP,
                index: bad as isize,
                axis: 0,
                size: n,
            });
        }
        if self.is_cuda() {
            let idx: Vec<i64> = indices.iter().map(|&i| i as i64).collect();
            let idx = NDArray::from_vec(idx, &[indices.len()])?;
            return self.index_select(0, &idx);
        }
        let mut shape = self.shape().to_vec();
        shape[0] = indices.len();
        let row: usize = self.shape()[1..].iter().product();
        quill_cpu::dispatch_dtype!(self.dtype(), T => {
            let rows = self.with_host_slice(|data: &[T]| -> Result<Vec<T>> {
                // A pooled buffer: batches of one size are freed and taken again every step.
                let len = row.saturating_mul(indices.len());
                let mut out = quill_cpu::pool::take::<T>(OP, len)?;
                if row > 0 {
                    for (dst, &i) in out.chunks_exact_mut(row).zip(indices) {
                        dst.copy_from_slice(&data[i * row..(i + 1) * row]);
                    }
                }
                Ok(out)
            })??;
            NDArray::from_vec(rows, &shape)
        })
    }
}
