//! 2-D max pooling on the CPU over contiguous (planes, h, w) buffers, one pass each way: the
//! forward takes each window's maximum (NaN wins, as `max` does); the backward re-reads the
//! input and hands each window's gradient to the elements equal to its maximum, split evenly
//! between ties (the rule of quill's `max` reduction, so the fused layer and the composite
//! one agree). Threads split the planes.

use crate::{CpuElement, CpuStorage};
use quill_core::{DType, Error, PoolDims, Result};
use rayon::prelude::*;
use std::ops::{Add, Div};

/// Elements below which a call stays on one thread.
const GRAIN: usize = 1 << 16;

/// The float types the kernels compute in.
pub(crate) trait PoolReal:
    CpuElement + Copy + Default + PartialOrd + Add<Output = Self> + Div<Output = Self> + Send + Sync
{
    fn count(n: usize) -> Self;
}
impl PoolReal for f32 {
    fn count(n: usize) -> f32 {
        n as f32
    }
}
impl PoolReal for f64 {
    fn count(n: usize) -> f64 {
        n as f64
    }
}

fn slice<'a, T: CpuElement>(
    op: &'static str,
    s: &'a CpuStorage,
    off: usize,
    len: usize,
) -> Result<&'a [T]> {
    let v = T::slice(s).ok_or(Error::DTypeMismatch {
        op,
        expected: T::DTYPE,
        got: s.dtype(),
    })?;
    v.get(off..off + len).ok_or_else(|| {
        Error::invalid(
            op,
            format!(
                "internal: a buffer of {} elements read at {off}..{}",
                v.len(),
                off + len
            ),
        )
    })
}

/// Runs `body(plane, out)` over the planes, each `per` elements of `out`.
fn planes<T: Send>(out: &mut [T], per: usize, work: usize, body: impl Fn(usize, &mut [T]) + Sync) {
    if per == 0 {
        return;
    }
    if work >= GRAIN && rayon::current_num_threads() > 1 {
        out.par_chunks_mut(per)
            .enumerate()
            .for_each(|(p, o)| body(p, o));
    } else {
        out.chunks_mut(per)
            .enumerate()
            .for_each(|(p, o)| body(p, o));
    }
}

/// The maximum of window (oh, ow) of plane `x`.
#[inline(always)]
fn window_max<T: PoolReal>(d: &PoolDims, x: &[T], oh: usize, ow: usize) -> T {
    let (r0, c0) = (oh * d.sh, ow * d.sw);
    let mut m = x[r0 * d.w + c0];
    for i in 0..d.kh {
        let row = &x[(r0 + i) * d.w + c0..(r0 + i) * d.w + c0 + d.kw];
        for &v in row {
            // `v != v` is NaN: it wins and stays.
            #[allow(clippy::eq_op)]
            if v > m || v != v {
                m = v;
                if m != m {
                    return m;
                }
            }
        }
    }
    m
}

/// The forward: (planes, ho, wo) from contiguous `x`.
pub fn forward(x: (&CpuStorage, usize), dims: &PoolDims) -> Result<CpuStorage> {
    match x.0.dtype() {
        DType::F32 => forward_t::<f32>(x, dims),
        DType::F64 => forward_t::<f64>(x, dims),
        d => Err(quill_core::backend::unsupported("max_pool2d", "cpu", d)),
    }
}

fn forward_t<T: PoolReal>(x: (&CpuStorage, usize), d: &PoolDims) -> Result<CpuStorage> {
    let (hw, ohw) = (d.h * d.w, d.ho * d.wo);
    let xs = slice::<T>("max_pool2d", x.0, x.1, d.planes * hw)?;
    let mut store = CpuStorage::for_overwrite(T::DTYPE, d.planes * ohw);
    let out = T::slice_mut(&mut store).expect("allocated as T");
    planes(out, ohw, d.planes * hw, |p, o| {
        let xp = &xs[p * hw..(p + 1) * hw];
        for (oh, row) in o.chunks_exact_mut(d.wo).enumerate() {
            for (ow, v) in row.iter_mut().enumerate() {
                *v = window_max(d, xp, oh, ow);
            }
        }
    });
    Ok(store)
}

/// The input gradient (planes, h, w) from contiguous `x`, `y` and `gy`.
pub fn backward(
    x: (&CpuStorage, usize),
    y: (&CpuStorage, usize),
    gy: (&CpuStorage, usize),
    dims: &PoolDims,
) -> Result<CpuStorage> {
    match x.0.dtype() {
        DType::F32 => backward_t::<f32>(x, y, gy, dims),
        DType::F64 => backward_t::<f64>(x, y, gy, dims),
        d => Err(quill_core::backend::unsupported(
            "max_pool2d_backward",
            "cpu",
            d,
        )),
    }
}

fn backward_t<T: PoolReal>(
    x: (&CpuStorage, usize),
    y: (&CpuStorage, usize),
    gy: (&CpuStorage, usize),
    d: &PoolDims,
) -> Result<CpuStorage> {
    const OP: &str = "max_pool2d_backward";
    let (hw, ohw) = (d.h * d.w, d.ho * d.wo);
    let xs = slice::<T>(OP, x.0, x.1, d.planes * hw)?;
    let ys = slice::<T>(OP, y.0, y.1, d.planes * ohw)?;
    let gs = slice::<T>(OP, gy.0, gy.1, d.planes * ohw)?;
    let mut store = CpuStorage::for_overwrite(T::DTYPE, d.planes * hw);
    let dx = T::slice_mut(&mut store).expect("allocated as T");
    planes(dx, hw, d.planes * hw, |p, dxp| {
        dxp.fill(T::default());
        let xp = &xs[p * hw..(p + 1) * hw];
        for oh in 0..d.ho {
            for ow in 0..d.wo {
                let k = p * ohw + oh * d.wo + ow;
                let (m, g) = (ys[k], gs[k]);
                let (r0, c0) = (oh * d.sh, ow * d.sw);
                let at = |i: usize, j: usize| (r0 + i) * d.w + c0 + j;
                let mut ties = 0;
                for i in 0..d.kh {
                    for j in 0..d.kw {
                        ties += usize::from(xp[at(i, j)] == m);
                    }
                }
                if ties == 0 {
                    continue;
                }
                let share = if ties == 1 { g } else { g / T::count(ties) };
                for i in 0..d.kh {
                    for j in 0..d.kw {
                        if xp[at(i, j)] == m {
                            dxp[at(i, j)] = dxp[at(i, j)] + share;
                        }
                    }
                }
            }
        }
    });
    Ok(store)
}
