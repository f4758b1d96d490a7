//! 2-D max pooling on the CPU over contiguous (planes, h, w) buffers, one pass each way: the
//! forward takes each window's maximum (NaN wins, as `max` does); the backward re-reads the
//! input and hands each window's gradient to the elements equal to its maximum, split evenly
//! between ties (the rule of quill's `max` reduction, so the fused layer and the composite
//! one agree). Threads split the planes.

use crate::storage::read;
use crate::{CpuElement, CpuStorage};
use quill_core::{DType, PoolDims, Result};
use std::ops::{Add, Div};

/// Elements below which a call stays on one thread.
const GRAIN: usize = 1 << 16;

/// The float types the kernels compute in.
pub(crate) trait PoolReal:
    CpuElement + Copy + Default + PartialOrd + Add<Output = Self> + Div<Output = Self> + Send + Sync
{
    fn count(n: usize) -> Self;
    /// The 2x2 / stride 2 forward of one plane in hand-written SIMD, where this type and the
    /// CPU have one; false (nothing written) sends the plane to the portable loop.
    fn forward_2x2_simd(_d: &PoolDims, _x: &[Self], _y: &mut [Self]) -> bool {
        false
    }
    /// The 2x2 / stride 2 backward of one plane in hand-written SIMD, where this type and the
    /// CPU have one; false (nothing written) sends the plane to the portable loop.
    fn backward_2x2_simd(
        _d: &PoolDims,
        _x: &[Self],
        _y: &[Self],
        _g: &[Self],
        _dx: &mut [Self],
    ) -> bool {
        false
    }
    /// `v` where `c` holds, else zero, without a branch.
    fn keep(c: bool, v: Self) -> Self;
    /// `a` where `c` holds, else `b`, without a branch.
    fn pick(c: bool, a: Self, b: Self) -> Self;
}
impl PoolReal for f32 {
    fn count(n: usize) -> f32 {
        n as f32
    }
    fn forward_2x2_simd(d: &PoolDims, x: &[f32], y: &mut [f32]) -> bool {
        crate::maxpool_avx512::forward_2x2(d, x, y)
    }
    fn backward_2x2_simd(d: &PoolDims, x: &[f32], y: &[f32], g: &[f32], dx: &mut [f32]) -> bool {
        crate::maxpool_avx512::backward_2x2(d, x, y, g, dx)
    }
    #[inline(always)]
    fn keep(c: bool, v: f32) -> f32 {
        f32::from_bits(v.to_bits() & 0u32.wrapping_sub(c as u32))
    }
    #[inline(always)]
    fn pick(c: bool, a: f32, b: f32) -> f32 {
        let m = 0u32.wrapping_sub(c as u32);
        f32::from_bits((a.to_bits() & m) | (b.to_bits() & !m))
    }
}
impl PoolReal for f64 {
    fn count(n: usize) -> f64 {
        n as f64
    }
    #[inline(always)]
    fn keep(c: bool, v: f64) -> f64 {
        f64::from_bits(v.to_bits() & 0u64.wrapping_sub(c as u64))
    }
    #[inline(always)]
    fn pick(c: bool, a: f64, b: f64) -> f64 {
        let m = 0u64.wrapping_sub(c as u64);
        f64::from_bits((a.to_bits() & m) | (b.to_bits() & !m))
    }
}

/// Runs `body(plane, out)` over the planes, each `per` elements of `out`.
fn planes<T: Send>(out: &mut [T], per: usize, work: usize, body: impl Fn(usize, &mut [T]) + Sync) {
    if per == 0 {
        return;
    }
    let threads = crate::par::threads();
    if work >= GRAIN && threads > 1 {
        crate::par::for_each_chunk(out, per, threads, body);
    } else {
        out.chunks_mut(per)
            .enumerate()
            .for_each(|(p, o)| body(p, o));
    }
}

/// The maximum of window (oh, ow) of plane `x`, `kw` wide. Branch free: a NaN wins (`v != v`)
/// and then stays, since nothing compares greater than it.
#[inline(always)]
fn window_max<T: PoolReal>(d: &PoolDims, kw: usize, x: &[T], oh: usize, ow: usize) -> T {
    let (r0, c0) = (oh * d.sh, ow * d.sw);
    let mut m = x[r0 * d.w + c0];
    for i in 0..d.kh {
        for &v in &x[(r0 + i) * d.w + c0..][..kw] {
            #[allow(clippy::eq_op)]
            let take = v > m || v != v;
            m = T::pick(take, v, m);
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
    let xs = read::<T>("max_pool2d", x.0, x.1, d.planes * hw)?;
    let mut store = CpuStorage::for_overwrite("max_pool2d", T::DTYPE, d.planes * ohw)?;
    let out = T::slice_mut(&mut store).expect("allocated as T");
    planes(out, ohw, d.planes * hw, |p, o| {
        let xp = &xs[p * hw..(p + 1) * hw];
        if halves(d) {
            if !T::forward_2x2_simd(d, xp, o) {
                crate::simd::with_best_simd(
                    #[inline(always)]
                    || forward_2x2(d, xp, o),
                );
            }
            return;
        }
        let kw = d.kw;
        for (oh, row) in o.chunks_exact_mut(d.wo).enumerate() {
            if kw == 2 {
                for (ow, v) in row.iter_mut().enumerate() {
                    *v = window_max(d, 2, xp, oh, ow);
                }
            } else {
                for (ow, v) in row.iter_mut().enumerate() {
                    *v = window_max(d, kw, xp, oh, ow);
                }
            }
        }
    });
    Ok(store)
}

/// 2x2 windows at stride 2, the case with its own kernels each way.
fn halves(d: &PoolDims) -> bool {
    (d.kh, d.kw, d.sh, d.sw) == (2, 2, 2, 2)
}

/// `window_max`'s order step: `v` replaces `m` when greater, or when it is a NaN.
#[inline(always)]
fn step<T: PoolReal>(m: T, v: T) -> T {
    #[allow(clippy::eq_op)]
    let take = v > m || v != v;
    T::pick(take, v, m)
}

/// The 2x2, stride 2 forward (every CNN's pooling), spelled out so that the compiler
/// vectorises it (under `with_best_simd`): the generic window loop ran one window at a time,
/// 8 % of a CNN step.
#[inline(always)]
pub(crate) fn forward_2x2<T: PoolReal>(d: &PoolDims, x: &[T], o: &mut [T]) {
    for (oh, row) in o.chunks_exact_mut(d.wo).enumerate() {
        let r0 = &x[2 * oh * d.w..][..2 * d.wo];
        let r1 = &x[(2 * oh + 1) * d.w..][..2 * d.wo];
        for ((v, a), b) in row
            .iter_mut()
            .zip(r0.chunks_exact(2))
            .zip(r1.chunks_exact(2))
        {
            *v = step(step(step(a[0], a[1]), b[0]), b[1]);
        }
    }
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
    let xs = read::<T>(OP, x.0, x.1, d.planes * hw)?;
    let ys = read::<T>(OP, y.0, y.1, d.planes * ohw)?;
    let gs = read::<T>(OP, gy.0, gy.1, d.planes * ohw)?;
    let mut store = CpuStorage::for_overwrite(OP, T::DTYPE, d.planes * hw)?;
    let dx = T::slice_mut(&mut store).expect("allocated as T");
    let tiles = (d.kh, d.kw) == (d.sh, d.sw);
    planes(dx, hw, d.planes * hw, |p, dxp| {
        let xp = &xs[p * hw..(p + 1) * hw];
        let (yp, gp) = (&ys[p * ohw..(p + 1) * ohw], &gs[p * ohw..(p + 1) * ohw]);
        if halves(d) {
            if !T::backward_2x2_simd(d, xp, yp, gp, dxp) {
                crate::simd::with_best_simd(
                    #[inline(always)]
                    || backward_2x2(d, xp, yp, gp, dxp),
                );
            }
        } else if tiles {
            tiled(d, xp, yp, gp, dxp);
        } else {
            overlapping(d, xp, yp, gp, dxp);
        }
    });
    Ok(store)
}

/// Each window's gradient share: `g / ties`, or 0 when no element equals the maximum (NaN).
#[inline(always)]
fn share<T: PoolReal>(d: &PoolDims, x: &[T], oh: usize, ow: usize, m: T, g: T) -> T {
    let (r0, c0) = (oh * d.sh, ow * d.sw);
    let mut ties = 0;
    for i in 0..d.kh {
        let row = &x[(r0 + i) * d.w + c0..(r0 + i) * d.w + c0 + d.kw];
        ties += row.iter().filter(|&&v| v == m).count();
    }
    match ties {
        0 => T::default(),
        1 => g,
        t => g / T::count(t),
    }
}

/// Windows that tile the plane (stride == kernel): every input element belongs to at most
/// one window, so each is written once, no accumulation; the cropped edge is zero. Branch
/// free (tie counts by adding comparisons, the writes by masking) because after a ReLU half
/// the comparisons go each way at random; the 2-wide case is spelled out so that its inner
/// loops unroll.
fn tiled<T: PoolReal>(d: &PoolDims, x: &[T], y: &[T], g: &[T], dx: &mut [T]) {
    if d.kw == 2 {
        tiled_rows(d, 2, x, y, g, dx);
    } else {
        tiled_rows(d, d.kw, x, y, g, dx);
    }
}

#[inline(always)]
fn tiled_rows<T: PoolReal>(d: &PoolDims, kw: usize, x: &[T], y: &[T], g: &[T], dx: &mut [T]) {
    let used = d.wo * kw;
    let mut ties = vec![0u32; d.wo];
    let mut shares = vec![T::default(); d.wo];
    for oh in 0..d.ho {
        let (yr, gr) = (&y[oh * d.wo..][..d.wo], &g[oh * d.wo..][..d.wo]);
        let rows = oh * d.kh * d.w;
        ties.fill(0);
        for i in 0..d.kh {
            let xr = &x[rows + i * d.w..][..used];
            for ((win, &m), t) in xr.chunks_exact(kw).zip(yr).zip(ties.iter_mut()) {
                *t += win.iter().map(|&v| (v == m) as u32).sum::<u32>();
            }
        }
        for ((s, &t), &gv) in shares.iter_mut().zip(&ties).zip(gr) {
            // No element equals a NaN maximum: its window passes nothing back.
            *s = T::keep(t != 0, gv / T::count(t.max(1) as usize));
        }
        for i in 0..d.kh {
            let r = rows + i * d.w;
            let (xr, dr) = (&x[r..r + d.w], &mut dx[r..r + d.w]);
            for (((xw, dw), &m), &s) in xr[..used]
                .chunks_exact(kw)
                .zip(dr[..used].chunks_exact_mut(kw))
                .zip(yr)
                .zip(&shares)
            {
                for (a, &v) in dw.iter_mut().zip(xw) {
                    *a = T::keep(v == m, s);
                }
            }
            dr[used..].fill(T::default());
        }
    }
    dx[d.ho * d.kh * d.w..].fill(T::default());
}

/// `tiled` for 2x2 windows at stride 2, one output row's two input rows at a time with no
/// scratch: the same shares (`g / ties`, nothing for a NaN maximum) and the same masked writes,
/// vectorised under `with_best_simd`.
#[inline(always)]
pub(crate) fn backward_2x2<T: PoolReal>(d: &PoolDims, x: &[T], y: &[T], g: &[T], dx: &mut [T]) {
    let used = 2 * d.wo;
    for oh in 0..d.ho {
        let (yr, gr) = (&y[oh * d.wo..][..d.wo], &g[oh * d.wo..][..d.wo]);
        let r = 2 * oh * d.w;
        let (x0, x1) = (&x[r..][..used], &x[r + d.w..][..used]);
        let (d0, d1) = dx[r..r + 2 * d.w].split_at_mut(d.w);
        for ((((dw0, dw1), (a, b)), &m), &gv) in d0[..used]
            .chunks_exact_mut(2)
            .zip(d1[..used].chunks_exact_mut(2))
            .zip(x0.chunks_exact(2).zip(x1.chunks_exact(2)))
            .zip(yr)
            .zip(gr)
        {
            let e = [a[0] == m, a[1] == m, b[0] == m, b[1] == m];
            let t = e.iter().map(|&q| q as u32).sum::<u32>();
            let s = T::keep(t != 0, gv / T::count(t.max(1) as usize));
            dw0[0] = T::keep(e[0], s);
            dw0[1] = T::keep(e[1], s);
            dw1[0] = T::keep(e[2], s);
            dw1[1] = T::keep(e[3], s);
        }
        d0[used..].fill(T::default());
        d1[used..].fill(T::default());
    }
    dx[d.ho * 2 * d.w..].fill(T::default());
}

/// Overlapping or gapped windows: shares accumulate into a zeroed plane.
fn overlapping<T: PoolReal>(d: &PoolDims, x: &[T], y: &[T], g: &[T], dx: &mut [T]) {
    dx.fill(T::default());
    for oh in 0..d.ho {
        for ow in 0..d.wo {
            let k = oh * d.wo + ow;
            let m = y[k];
            let s = share(d, x, oh, ow, m, g[k]);
            let (r0, c0) = (oh * d.sh, ow * d.sw);
            for i in 0..d.kh {
                let at = (r0 + i) * d.w + c0;
                for (a, &v) in dx[at..at + d.kw].iter_mut().zip(&x[at..at + d.kw]) {
                    if v == m {
                        *a = *a + s;
                    }
                }
            }
        }
    }
}
