//! Order-dependent kernels over lanes along one axis: `sort` / `argsort` (stable, NaN last as
//! NumPy) and `cumsum`. The axis is moved last and the view compacted, so every lane is one
//! contiguous run; the result goes back to the original axis order in one strided copy.

use crate::{compact, dispatch_dtype, CpuElement, CpuStorage};
use quill_core::{DType, Error, Layout, Result};
use std::cmp::Ordering;

/// NumPy's sort order: the usual order, NaN after everything (NaNs equal among themselves).
#[inline]
pub fn total<T: PartialOrd>(a: &T, b: &T) -> Ordering {
    match a.partial_cmp(b) {
        Some(o) => o,
        #[allow(clippy::eq_op)] // x != x is the NaN test for every element type here
        None => (a != a).cmp(&(b != b)),
    }
}

/// The permutation that moves `axis` last.
fn axis_last(ndim: usize, axis: usize) -> Vec<isize> {
    let mut perm: Vec<isize> = (0..ndim as isize).filter(|&i| i as usize != axis).collect();
    perm.push(axis as isize);
    perm
}

/// `src` seen through `l` with `axis` moved last, as a typed contiguous vector (lanes are
/// consecutive runs), and the lane shape.
fn lanes<T: CpuElement>(src: &CpuStorage, l: &Layout, axis: usize) -> Result<(Vec<T>, Vec<usize>)> {
    let lane_l = l.permute(&axis_last(l.ndim(), axis))?;
    let c = compact(src, &lane_l)?;
    let v = T::slice(&c)
        .ok_or(Error::DTypeMismatch {
            op: "lanes",
            expected: T::DTYPE,
            got: c.dtype(),
        })?
        .to_vec();
    Ok((v, lane_l.shape().to_vec()))
}

/// Undoes `lanes`: `out`, contiguous in lane order with `lane_shape`, back in the original
/// axis order, contiguous.
fn unlanes(out: CpuStorage, lane_shape: &[usize], axis: usize) -> Result<CpuStorage> {
    let nd = lane_shape.len();
    if axis + 1 == nd {
        return Ok(out);
    }
    // Lane order is (others..., axis): original axis i sits at position inv[i].
    let inv: Vec<isize> = (0..nd)
        .map(|i| match i.cmp(&axis) {
            Ordering::Less => i as isize,
            Ordering::Equal => (nd - 1) as isize,
            Ordering::Greater => i as isize - 1,
        })
        .collect();
    let back = Layout::contiguous(lane_shape)?.permute(&inv)?;
    compact(&out, &back)
}

fn sorted<T: CpuElement + PartialOrd>(
    src: &CpuStorage,
    l: &Layout,
    axis: usize,
    descending: bool,
    indices: bool,
) -> Result<CpuStorage> {
    let n = l.shape()[axis];
    let (data, lane_shape) = lanes::<T>(src, l, axis)?;
    let out = if !indices {
        let mut out = data;
        for lane in out.chunks_mut(n.max(1)) {
            // Stable either way: equal elements keep their order when descending too.
            if descending {
                lane.sort_by(|x, y| total(y, x));
            } else {
                lane.sort_by(total);
            }
        }
        CpuStorage::from_vec(out)
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
        CpuStorage::from_vec(out)
    };
    unlanes(out, &lane_shape, axis)
}

/// Each lane along `axis` sorted (or its sorting positions, i64, when `indices`).
pub fn sort(
    src: &CpuStorage,
    l: &Layout,
    axis: usize,
    descending: bool,
    indices: bool,
) -> Result<CpuStorage> {
    dispatch_dtype!(src.dtype(), T => sorted::<T>(src, l, axis, descending, indices), complex => {
        Err(quill_core::Error::invalid(
            if indices { "argsort" } else { "sort" },
            format!("not defined for complex dtype {} (complex numbers have no order); sort abs() or .real", src.dtype()),
        ))
    })
}

fn cumsum_typed<T: CpuElement>(
    src: &CpuStorage,
    l: &Layout,
    axis: usize,
    include_initial: bool,
    add: impl Fn(T, T) -> T,
) -> Result<CpuStorage> {
    let n = l.shape()[axis];
    let (data, mut lane_shape) = lanes::<T>(src, l, axis)?;
    // Counted from the shape: with n = 0 there are still lanes (of one 0 if include_initial).
    let count: usize = lane_shape[..lane_shape.len() - 1].iter().product();
    let mut out = Vec::with_capacity(count * (n + include_initial as usize));
    for lane in 0..count {
        let mut acc = T::zero();
        if include_initial {
            out.push(acc);
        }
        for &x in &data[lane * n..(lane + 1) * n] {
            acc = add(acc, x);
            out.push(acc);
        }
    }
    *lane_shape.last_mut().expect("rank >= 1") += include_initial as usize;
    unlanes(CpuStorage::from_vec(out), &lane_shape, axis)
}

/// Running sums along `axis` of an f32, f64 or i64 buffer (integers wrap, as NumPy's).
pub fn cumsum(
    src: &CpuStorage,
    l: &Layout,
    axis: usize,
    include_initial: bool,
) -> Result<CpuStorage> {
    match src.dtype() {
        DType::F32 => cumsum_typed(src, l, axis, include_initial, |a: f32, b| a + b),
        DType::F64 => cumsum_typed(src, l, axis, include_initial, |a: f64, b| a + b),
        DType::I64 => cumsum_typed(src, l, axis, include_initial, i64::wrapping_add),
        DType::C64 => cumsum_typed(src, l, axis, include_initial, |a: quill_core::C64, b| a + b),
        DType::C128 => cumsum_typed(src, l, axis, include_initial, |a: quill_core::C128, b| {
            a + b
        }),
        d => Err(Error::invalid(
            "cumsum",
            format!("the kernel sums f32, f64, complex or i64; got {d} (cast first)"),
        )),
    }
}
