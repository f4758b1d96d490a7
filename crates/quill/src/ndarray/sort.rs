//! Order-dependent ops: `sort` / `argsort` (stable, NaN last as NumPy), `cumsum`, `nonzero`
//! and `searchsorted`. Each works on lanes: the axis is moved last and the view compacted, so
//! every lane is one contiguous run. They run on the CPU; GPU arrays go through the host and
//! come back.

use super::NDArray;
use crate::device::Device;
use quill_core::shape::normalize_axis;
use quill_core::{DType, Error, Result};
use quill_cpu::{dispatch_dtype, CpuElement};
use std::cmp::Ordering;

/// NumPy's sort order: the usual order, NaN after everything (NaNs equal among themselves).
#[inline]
fn total<T: PartialOrd>(a: &T, b: &T) -> Ordering {
    match a.partial_cmp(b) {
        Some(o) => o,
        #[allow(clippy::eq_op)] // x != x is the NaN test for every element type here
        None => (a != a).cmp(&(b != b)),
    }
}

/// `a` with axis `ax` moved last, compact, on the CPU: lanes are consecutive runs.
fn lanes(a: &NDArray, ax: usize) -> Result<NDArray> {
    let nd = a.ndim();
    let mut perm: Vec<isize> = (0..nd as isize).filter(|&i| i as usize != ax).collect();
    perm.push(ax as isize);
    a.to_device(Device::Cpu)?.permute(&perm)?.try_compact()
}

/// Undoes `lanes`: a contiguous array in lane order back to the original axis order, compact,
/// on `device`.
fn unlanes(out: NDArray, ax: usize, device: Device) -> Result<NDArray> {
    let nd = out.ndim();
    // lane order is (others..., ax): original axis i sits at position pos(i).
    let perm: Vec<isize> = (0..nd)
        .map(|i| match i.cmp(&ax) {
            Ordering::Less => i as isize,
            Ordering::Equal => (nd - 1) as isize,
            Ordering::Greater => i as isize - 1,
        })
        .collect();
    out.permute(&perm)?.try_compact()?.to_device(device)
}

fn lane_axis(op: &'static str, a: &NDArray, axis: isize) -> Result<usize> {
    if a.ndim() == 0 {
        return Err(Error::invalid(
            op,
            "needs an array of rank 1 or more; a rank-0 array has no axis to order",
        ));
    }
    normalize_axis(op, axis, a.ndim(), 0)
}

fn sorted_lanes<T: CpuElement + PartialOrd>(
    a: &NDArray,
    n: usize,
    descending: bool,
    values: bool,
) -> Result<NDArray> {
    let data = a.to_vec::<T>()?;
    let shape = a.shape().to_vec();
    if values {
        let mut out = data;
        for lane in out.chunks_mut(n.max(1)) {
            // Stable either way: equal elements keep their order when descending too.
            if descending {
                lane.sort_by(|x, y| total(y, x));
            } else {
                lane.sort_by(total);
            }
        }
        NDArray::from_vec(out, &shape)
    } else {
        let mut out: Vec<i64> = Vec::with_capacity(data.len());
        for lane in data.chunks(n.max(1)) {
            let mut idx: Vec<i64> = (0..lane.len() as i64).collect();
            if descending {
                idx.sort_by(|&i, &j| total(&lane[j as usize], &lane[i as usize]));
            } else {
                idx.sort_by(|&i, &j| total(&lane[i as usize], &lane[j as usize]));
            }
            out.extend(idx);
        }
        NDArray::from_vec(out, &shape)
    }
}

/// Running sums of each lane of `a` (lanes of length `n`, last axis), `add` the step.
fn cumsum_lanes<T: CpuElement>(
    a: &NDArray,
    n: usize,
    include_initial: bool,
    add: impl Fn(T, T) -> T,
) -> Result<Vec<T>> {
    let data = a.to_vec::<T>()?;
    // Counted from the shape: with n = 0 there are still lanes (of one 0 if include_initial).
    let lanes: usize = a.shape()[..a.ndim() - 1].iter().product();
    let mut out = Vec::with_capacity(lanes * (n + include_initial as usize));
    for lane in 0..lanes {
        let mut acc = T::zero();
        if include_initial {
            out.push(acc);
        }
        for &x in &data[lane * n..(lane + 1) * n] {
            acc = add(acc, x);
            out.push(acc);
        }
    }
    Ok(out)
}

impl NDArray {
    /// The elements sorted along `axis` (stable; NaN last ascending, first descending).
    pub fn sort(&self, axis: isize, descending: bool) -> Result<NDArray> {
        self.order("sort", axis, descending, true)
    }

    /// Indices (int64) that sort each lane along `axis`, stable as `sort`.
    pub fn argsort(&self, axis: isize, descending: bool) -> Result<NDArray> {
        self.order("argsort", axis, descending, false)
    }

    fn order(&self, op: &'static str, axis: isize, desc: bool, values: bool) -> Result<NDArray> {
        let ax = lane_axis(op, self, axis)?;
        let n = self.shape()[ax];
        let l = lanes(self, ax)?;
        let out = dispatch_dtype!(self.dtype(), T => sorted_lanes::<T>(&l, n, desc, values))?;
        unlanes(out, ax, self.device())
    }

    /// Running sums along `axis`; with `include_initial` each lane starts with a 0 (one
    /// longer). Integers and bool sum in int64, float16 / bfloat16 in float32 (cast back).
    pub fn cumsum(&self, axis: isize, include_initial: bool) -> Result<NDArray> {
        let ax = lane_axis("cumsum", self, axis)?;
        let n = self.shape()[ax];
        let (compute, result) = match self.dtype() {
            DType::F32 | DType::F64 => (self.dtype(), self.dtype()),
            DType::F16 | DType::BF16 => (DType::F32, self.dtype()),
            _ => (DType::I64, DType::I64),
        };
        let l = lanes(&self.try_astype(compute)?, ax)?;
        let mut shape = l.shape().to_vec();
        *shape.last_mut().expect("rank >= 1") += include_initial as usize;
        let out = match compute {
            DType::F32 => NDArray::from_vec(
                cumsum_lanes(&l, n, include_initial, |a: f32, b| a + b)?,
                &shape,
            ),
            DType::F64 => NDArray::from_vec(
                cumsum_lanes(&l, n, include_initial, |a: f64, b| a + b)?,
                &shape,
            ),
            // Wrapping, as NumPy's integer sums.
            _ => NDArray::from_vec(
                cumsum_lanes(&l, n, include_initial, i64::wrapping_add)?,
                &shape,
            ),
        }?;
        unlanes(out.try_astype(result)?, ax, self.device())
    }

    /// The indices of the non-zero (true) elements: one int64 array per axis, in C order, as
    /// NumPy's `nonzero`. A rank-0 array is an error, as in NumPy 2.
    pub fn nonzero(&self) -> Result<Vec<NDArray>> {
        if self.ndim() == 0 {
            return Err(Error::invalid(
                "nonzero",
                "a rank-0 array has no coordinates to list; use reshape(1) (or atleast_1d) first",
            ));
        }
        let mask = self
            .to_device(Device::Cpu)?
            .try_astype(DType::Bool)?
            .to_vec::<bool>()?;
        let shape = self.shape();
        let hits: Vec<usize> = (0..mask.len()).filter(|&i| mask[i]).collect();
        let mut out = Vec::with_capacity(shape.len());
        for d in 0..shape.len() {
            let inner: usize = shape[d + 1..].iter().product();
            let coords: Vec<i64> = hits
                .iter()
                .map(|&i| ((i / inner.max(1)) % shape[d]) as i64)
                .collect();
            out.push(NDArray::from_vec(coords, &[hits.len()])?.to_device(self.device())?);
        }
        Ok(out)
    }

    /// For each of `values`, where it would go in this sorted 1-D array to keep it sorted:
    /// before equal elements (`right = false`) or after them. NaN sorts last, as `sort`.
    pub fn searchsorted(&self, values: &NDArray, right: bool) -> Result<NDArray> {
        const OP: &str = "searchsorted";
        if self.ndim() != 1 {
            return Err(Error::invalid(
                OP,
                format!("the sorted array must be 1-D; got shape {:?}", self.shape()),
            ));
        }
        let common = quill_core::promote::promote_types(self.dtype(), values.dtype());
        let s = self.to_device(Device::Cpu)?.try_astype(common)?;
        let v = values.to_device(Device::Cpu)?.try_astype(common)?;
        let out = dispatch_dtype!(common, T => {
            let sorted = s.to_vec::<T>()?;
            let idx: Vec<i64> = v
                .to_vec::<T>()?
                .iter()
                .map(|x| {
                    sorted.partition_point(|y| match total(y, x) {
                        Ordering::Less => true,
                        Ordering::Equal => right,
                        Ordering::Greater => false,
                    }) as i64
                })
                .collect();
            NDArray::from_vec(idx, values.shape())
        })?;
        out.to_device(values.device())
    }
}
