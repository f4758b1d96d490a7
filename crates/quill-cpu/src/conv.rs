//! 2-D convolution on the CPU (NCHW input, (O, C / groups, kh, kw) weight, stride, zero
//! padding, dilation, groups), as im2col + the packed GEMM of `matmul`, one sample at a time
//! so that the column matrix (C / groups * kh * kw, Ho * Wo) of one sample stays in cache:
//!
//! - forward: `Y[n, g] = W[g] @ col(x[n, g])`, written straight into the NCHW output;
//! - input gradient: `dx[n, g] = col2im(W[g]^T @ dY[n, g])`;
//! - weight gradient: `dW[g] = sum_n dY[n, g] @ col(x[n, g])^T`, each thread summing its own
//!   samples, the partial sums added at the end; with fewer than 16 taps (a first layer on
//!   1-channel images) as dot products of rows instead of a GEMM.
//!
//! When the output channels fill the GEMM's micro-tile columns (`Geom::transposed`), the
//! forward and the weight gradient run transposed, with output channels as the GEMM's
//! columns and the column matrix read in place as A by the direct kernel:
//! `Y^T = col^T @ W^T` (then one small transpose into NCHW) and `dW^T += col @ dY^T`. Both
//! GEMMs reduce over pixels or taps, the column matrix's long dimension, and the straight
//! form had to transpose the whole column matrix to pack it (the weight gradient) or ran
//! 32 output channels in 12-row tiles (the forward); transposed, only the (og, hw) gradient
//! is repacked, and the tiles are full. They run by blocks of output rows (`Geom::block_rows`):
//! im2col writes a block's column matrix, sized to L2, and the kernel reads it from there,
//! with `W^T` transposed once per call and read in place as B. Written whole, the ResNet 3x3
//! layer's (64 x 56 x 56) 7 MB column matrix left L2, and the straight form then packed all
//! of it again: 1.2-1.7x slower forward and weight gradient.
//!
//! Depthwise layers (one input channel per group) skip the GEMM for a direct stencil
//! (`depthwise.rs`).
//!
//! Threads split the batch (each GEMM then runs on one thread); a single sample gives its
//! GEMMs all the threads instead. A 1x1 kernel with stride 1 and no padding needs no column
//! matrix: the input is already one. Where a row of the column matrix is a plane shifted by
//! one constant offset (the input itself for "same" layers, its stride phases for strided
//! ones), im2col is one copy per row and col2im one add per row (`im2col.rs`).

mod depthwise;
mod im2col;

use crate::storage::read;
use crate::{CpuElement, CpuStorage};
use im2col::{col2im, im2col, Source};
use quill_core::{ConvDims, DType, Result};
use quill_gemm::{select, with_scratch, CacheSizes, Cvt, Gemm, Mat, Real};
use std::cell::Cell;

/// Multiply-adds below which a call stays on one thread.
const GRAIN: usize = 1 << 17;

/// Column-matrix rows (taps, `C / groups * kh * kw`) below which the weight gradient is dot
/// products rather than a GEMM: with so few output columns the GEMM fills few lanes of its
/// 16- or 32-wide micro-tile and transposes the column matrix to pack it (a 1-channel 3x3
/// layer ran at 8 GFLOP/s).
const FEW_TAPS: usize = 16;

/// `acc[o, t] += sum_p gy[o, p] col[t, p]` over rows of `hw`: each a dot product of two
/// contiguous rows, in 16 lanes (vectorised under `with_best_simd`) added up in a fixed order.
#[inline(always)]
fn dots<T: Real>(gy: &[T], col: &[T], hw: usize, acc: &mut [T]) {
    const L: usize = 16;
    if hw == 0 {
        return;
    }
    let taps = col.len() / hw;
    for (grow, arow) in gy.chunks_exact(hw).zip(acc.chunks_exact_mut(taps)) {
        for (crow, a) in col.chunks_exact(hw).zip(arow.iter_mut()) {
            let mut lanes = [T::default(); L];
            let (gc, cc) = (grow.chunks_exact(L), crow.chunks_exact(L));
            let tail = gc
                .remainder()
                .iter()
                .zip(cc.remainder())
                .fold(T::default(), |s, (&x, &y)| s + x * y);
            for (x, y) in gc.zip(cc) {
                for i in 0..L {
                    lanes[i] = lanes[i] + x[i] * y[i];
                }
            }
            *a = *a + lanes.iter().fold(tail, |s, &v| s + v);
        }
    }
}

/// The float types the kernels compute in.
pub(crate) trait ConvReal: Real + CpuElement + Cvt<Self> {
    fn gemm() -> Gemm<Self>;
}
impl ConvReal for f32 {
    fn gemm() -> Gemm<f32> {
        select::<f32>()
    }
}
impl ConvReal for f64 {
    fn gemm() -> Gemm<f64> {
        select::<f64>()
    }
}

/// The sizes every kernel derives from `ConvDims`.
#[derive(Clone, Copy)]
struct Geom {
    d: ConvDims,
    /// Channels and output channels per group.
    cg: usize,
    og: usize,
    /// Rows of one group's column matrix: cg * kh * kw.
    kk: usize,
    /// Input and output pixels per channel.
    hw_in: usize,
    hw: usize,
    /// The column matrix is the input itself (1x1 kernel, stride 1, no padding).
    direct: bool,
}

/// Output pixels times output channels of one group per transposed GEMM: a block of output
/// rows whose result (pixels, og) stays in L2, since the direct kernel sweeps all of the
/// result once per depth block instead of blocking it.
const TRANSPOSED_MAX: usize = 1 << 16;

impl Geom {
    fn new(d: &ConvDims) -> Geom {
        let g = d.spec.groups;
        let (cg, og) = (d.c / g, d.o / g);
        let s = &d.spec;
        Geom {
            d: *d,
            cg,
            og,
            kk: cg * d.kh * d.kw,
            hw_in: d.h * d.w,
            hw: d.ho * d.wo,
            direct: (d.kh, d.kw) == (1, 1) && s.stride == (1, 1) && s.padding == (0, 0),
        }
    }
    /// Multiply-adds of the whole convolution.
    fn work(&self) -> usize {
        self.d.n * self.d.o * self.kk * self.hw
    }
    /// Whether the forward and weight gradient run transposed (see the module header): on
    /// one thread per GEMM, with output channels that fill `nr`-wide tiles (all full, or at
    /// least four so the last one's waste is small), on a kernel that reads A in place.
    fn transposed(&self, gemm: &Gemm<impl Real>, threads: usize) -> bool {
        let nr = gemm.nr();
        threads == 1
            && (self.og.is_multiple_of(nr) || self.og >= 4 * nr)
            && gemm.reads_a_direct(self.og)
    }
    /// Output rows per transposed GEMM: a result within [`TRANSPOSED_MAX`] and a column matrix
    /// within L2, which im2col writes and the kernel then reads while it is still there (the
    /// ResNet 3x3 layer's 7 MB column matrix had been written whole, then packed whole).
    fn block_rows(&self, size: usize) -> usize {
        let by_result = TRANSPOSED_MAX / (self.og * self.d.wo).max(1);
        let by_col = CacheSizes::get().l2 / (self.kk * self.d.wo * size).max(1);
        by_result.min(by_col).clamp(1, self.d.ho.max(1))
    }
    /// Whether to split the batch across threads (else one sample's GEMMs use them all).
    fn threads(&self) -> (bool, usize) {
        let t = crate::par::threads();
        if t < 2 || self.work() < GRAIN {
            (false, 1)
        } else if self.d.n >= 2 {
            (true, 1)
        } else {
            (false, t)
        }
    }
}

/// `dst[c * ld + r] = src[r * cols + c]` for `r < rows`, `c < cols`: the (rows, cols)
/// row-major `src` transposed into rows `ld` apart, by the tiled transpose copy (by bits).
fn transpose_into<T: Real>(src: &[T], dst: &mut [T], rows: usize, cols: usize, ld: usize) {
    use crate::transpose::Word;
    let (ld, c) = (ld as isize, cols as isize);
    if size_of::<T>() == 4 {
        let s: &[u32] = bytemuck::cast_slice(src);
        u32::tile(bytemuck::cast_slice_mut(dst), 0, ld, s, 0, 1, c, cols, rows);
    } else {
        let s: &[u64] = bytemuck::cast_slice(src);
        u64::tile(bytemuck::cast_slice_mut(dst), 0, ld, s, 0, 1, c, cols, rows);
    }
}

fn float_dtype(op: &'static str, s: &CpuStorage) -> Result<DType> {
    match s.dtype() {
        d @ (DType::F32 | DType::F64) => Ok(d),
        d => Err(quill_core::backend::unsupported(op, "cpu", d)),
    }
}

thread_local! {
    /// The per-thread scratch of [`per_sample`] and the weight gradient's column matrix.
    static SCRATCH: Cell<Vec<f64>> = const { Cell::new(Vec::new()) };
}

/// Runs `body(sample, out_chunk, scratch)` for every sample, the output cut into `per`-sized
/// chunks; threads split the samples when `split`. `scratch` (`scratch_len` values, contents
/// unspecified: every user writes what it reads) is the running thread's reused buffer. A
/// fresh zeroed vector per task had spent 3 % of a dilated 3x3 layer's forward in
/// `memset`; a pooled one (huge pages) made 56x56 layers 5-15 % slower, whose column-matrix
/// rows lie 12.5 KB apart, which physically contiguous pages map onto few cache sets.
fn per_sample<T: Real>(
    out: &mut [T],
    per: usize,
    split: bool,
    scratch_len: usize,
    body: impl Fn(usize, &mut [T], &mut [T]) + Sync + Send,
) {
    if per == 0 {
        return;
    }
    let one = |n: usize, o: &mut [T]| with_scratch(&SCRATCH, scratch_len, |s| body(n, o, s));
    if split {
        crate::par::for_each_chunk(out, per, crate::par::threads(), one);
    } else {
        with_scratch(&SCRATCH, scratch_len, |s| {
            for (n, o) in out.chunks_mut(per).enumerate() {
                body(n, o, s);
            }
        });
    }
}

/// The forward: (n, o, ho, wo) from contiguous `x` and `w`.
pub fn forward(
    x: (&CpuStorage, usize),
    w: (&CpuStorage, usize),
    dims: &ConvDims,
) -> Result<CpuStorage> {
    match float_dtype("conv2d", x.0)? {
        DType::F32 => forward_t::<f32>(x, w, dims),
        _ => forward_t::<f64>(x, w, dims),
    }
}

fn forward_t<T: ConvReal>(
    x: (&CpuStorage, usize),
    w: (&CpuStorage, usize),
    dims: &ConvDims,
) -> Result<CpuStorage> {
    const OP: &str = "conv2d";
    let g = Geom::new(dims);
    let d = &g.d;
    let xs = read::<T>(OP, x.0, x.1, d.n * d.c * g.hw_in)?;
    let ws = read::<T>(OP, w.0, w.1, d.o * g.kk)?;
    let mut store = CpuStorage::for_overwrite(OP, T::DTYPE, d.n * d.o * g.hw)?;
    let out = T::slice_mut(&mut store).expect("allocated as T");
    if depthwise::applies(&g) {
        depthwise::forward(&g, xs, ws, out);
        return Ok(store);
    }
    let gemm = T::gemm();
    let (split, t) = g.threads();
    // A 1x1 layer's direct GEMM already writes NCHW from the input in place.
    if !g.direct && g.transposed(&gemm, t) {
        forward_transposed(&g, &gemm, xs, ws, out, split)?;
        return Ok(store);
    }
    let col_len = if g.direct { 0 } else { g.kk * g.hw };
    per_sample(
        out,
        d.o * g.hw,
        split,
        col_len + g.planes_len(),
        |n, y, scratch| {
            let xn = &xs[n * d.c * g.hw_in..(n + 1) * d.c * g.hw_in];
            let (col, planes) = scratch.split_at_mut(col_len);
            for gi in 0..d.spec.groups {
                let xg = &xn[gi * g.cg * g.hw_in..(gi + 1) * g.cg * g.hw_in];
                let cols: &[T] = if g.direct {
                    xg
                } else {
                    im2col(&g, &Source::new(&g, xg, planes), col, 0..d.ho);
                    col
                };
                let yg = &mut y[gi * g.og * g.hw..(gi + 1) * g.og * g.hw];
                let a = Mat::new(ws, gi * g.og * g.kk, g.kk as isize, 1);
                let b = Mat::new(cols, 0, g.hw as isize, 1);
                gemm.run([g.og, g.hw, g.kk], &a, &b, yg, t);
            }
        },
    );
    Ok(store)
}

/// The forward transposed (see the module header), one block of output rows at a time:
/// `Y^T (pixels, og) = col^T (pixels, kk) @ W^T (kk, og)`, with the block's column matrix read
/// in place as A and `W^T`, transposed once per call, read in place as B.
fn forward_transposed<T: ConvReal>(
    g: &Geom,
    gemm: &Gemm<T>,
    xs: &[T],
    ws: &[T],
    out: &mut [T],
    split: bool,
) -> Result<()> {
    let d = &g.d;
    // Every value is written by the transpose.
    let mut wt = crate::pool::take::<T>("conv2d", ws.len())?;
    for (src, dst) in ws
        .chunks_exact(g.og * g.kk)
        .zip(wt.chunks_exact_mut(g.og * g.kk))
    {
        transpose_into(src, dst, g.og, g.kk, g.og);
    }
    let rows = g.block_rows(size_of::<T>());
    let col_len = g.kk * rows * d.wo;
    per_sample(
        out,
        d.o * g.hw,
        split,
        col_len + rows * d.wo * g.og + g.planes_len(),
        |n, y, scratch| {
            let (col, rest) = scratch.split_at_mut(col_len);
            let (yt, planes) = rest.split_at_mut(rows * d.wo * g.og);
            let xn = &xs[n * d.c * g.hw_in..(n + 1) * d.c * g.hw_in];
            for gi in 0..d.spec.groups {
                let xg = &xn[gi * g.cg * g.hw_in..(gi + 1) * g.cg * g.hw_in];
                let yg = &mut y[gi * g.og * g.hw..(gi + 1) * g.og * g.hw];
                let b = Mat::new(&wt, gi * g.kk * g.og, g.og as isize, 1);
                let src = Source::new(g, xg, planes);
                for r0 in (0..d.ho).step_by(rows) {
                    let r1 = (r0 + rows).min(d.ho);
                    let m = (r1 - r0) * d.wo;
                    im2col(g, &src, &mut col[..g.kk * m], r0..r1);
                    let a = Mat::new(&col[..g.kk * m], 0, 1, m as isize);
                    let done =
                        gemm.run_direct_a([m, g.og, g.kk], &a, &b, &mut yt[..m * g.og], false);
                    assert!(done, "conv2d: Geom::transposed checked the direct kernel");
                    transpose_into(&yt[..m * g.og], &mut yg[r0 * d.wo..], m, g.og, g.hw);
                }
            }
        },
    );
    crate::pool::give(wt);
    Ok(())
}

/// The input gradient (n, c, h, w) from contiguous `gy` and `w`.
pub fn backward_input(
    gy: (&CpuStorage, usize),
    w: (&CpuStorage, usize),
    dims: &ConvDims,
) -> Result<CpuStorage> {
    match float_dtype("conv2d_backward_input", gy.0)? {
        DType::F32 => backward_input_t::<f32>(gy, w, dims),
        _ => backward_input_t::<f64>(gy, w, dims),
    }
}

fn backward_input_t<T: ConvReal>(
    gy: (&CpuStorage, usize),
    w: (&CpuStorage, usize),
    dims: &ConvDims,
) -> Result<CpuStorage> {
    const OP: &str = "conv2d_backward_input";
    let g = Geom::new(dims);
    let d = &g.d;
    let gys = read::<T>(OP, gy.0, gy.1, d.n * d.o * g.hw)?;
    let ws = read::<T>(OP, w.0, w.1, d.o * g.kk)?;
    let mut store = CpuStorage::for_overwrite(OP, T::DTYPE, d.n * d.c * g.hw_in)?;
    let dx = T::slice_mut(&mut store).expect("allocated as T");
    if depthwise::applies(&g) {
        depthwise::backward_input(&g, gys, ws, dx);
        return Ok(store);
    }
    let gemm = T::gemm();
    let (split, t) = g.threads();
    let col_len = if g.direct { 0 } else { g.kk * g.hw };
    per_sample(
        dx,
        d.c * g.hw_in,
        split,
        col_len + g.planes_len(),
        |n, dxn, scratch| {
            let (col, planes) = scratch.split_at_mut(col_len);
            if !g.direct {
                // col2im accumulates; the direct path's GEMM overwrites.
                dxn.fill(T::default());
            }
            let gyn = &gys[n * d.o * g.hw..(n + 1) * d.o * g.hw];
            for gi in 0..d.spec.groups {
                // W[g]^T: (kk, og), column-major in the weight's rows.
                let a = Mat::new(ws, gi * g.og * g.kk, 1, g.kk as isize);
                let b = Mat::new(gyn, gi * g.og * g.hw, g.hw as isize, 1);
                let dxg = &mut dxn[gi * g.cg * g.hw_in..(gi + 1) * g.cg * g.hw_in];
                if g.direct {
                    gemm.run([g.kk, g.hw, g.og], &a, &b, dxg, t);
                } else {
                    gemm.run([g.kk, g.hw, g.og], &a, &b, col, t);
                    col2im(&g, col, dxg, planes);
                }
            }
        },
    );
    Ok(store)
}

/// The weight gradient (o, c / groups, kh, kw) from contiguous `x` and `gy`.
pub fn backward_weight(
    x: (&CpuStorage, usize),
    gy: (&CpuStorage, usize),
    dims: &ConvDims,
) -> Result<CpuStorage> {
    match float_dtype("conv2d_backward_weight", x.0)? {
        DType::F32 => backward_weight_t::<f32>(x, gy, dims),
        _ => backward_weight_t::<f64>(x, gy, dims),
    }
}

fn backward_weight_t<T: ConvReal>(
    x: (&CpuStorage, usize),
    gy: (&CpuStorage, usize),
    dims: &ConvDims,
) -> Result<CpuStorage> {
    const OP: &str = "conv2d_backward_weight";
    let g = Geom::new(dims);
    let d = &g.d;
    let xs = read::<T>(OP, x.0, x.1, d.n * d.c * g.hw_in)?;
    let gys = read::<T>(OP, gy.0, gy.1, d.n * d.o * g.hw)?;
    if depthwise::applies(&g) {
        return Ok(T::wrap(depthwise::backward_weight(&g, xs, gys)));
    }
    let gemm = T::gemm();
    let (split, t) = g.threads();
    let len = d.o * g.kk;
    let tr = g.kk >= FEW_TAPS && g.transposed(&gemm, t);
    let rows = if tr {
        g.block_rows(size_of::<T>())
    } else {
        d.ho
    };
    // The samples `range` summed into `acc`: (o, kk), zeroed; transposed, per group (kk, og),
    // with any contents, which the range's first GEMM per group overwrites.
    let sum_samples = |range: std::ops::Range<usize>, acc: &mut [T]| {
        let first = range.start;
        let col_len = if g.direct { 0 } else { g.kk * rows * d.wo };
        with_scratch(&SCRATCH, col_len + g.planes_len(), |scratch: &mut [T]| {
            let (col, planes) = scratch.split_at_mut(col_len);
            for n in range {
                let xn = &xs[n * d.c * g.hw_in..(n + 1) * d.c * g.hw_in];
                let gyn = &gys[n * d.o * g.hw..(n + 1) * d.o * g.hw];
                for gi in 0..d.spec.groups {
                    let xg = &xn[gi * g.cg * g.hw_in..(gi + 1) * g.cg * g.hw_in];
                    let part = gi * g.og * g.kk..(gi + 1) * g.og * g.kk;
                    let gyg = &gyn[gi * g.og * g.hw..(gi + 1) * g.og * g.hw];
                    let src = Source::new(&g, xg, planes);
                    if tr {
                        // dW^T (kk, og) += col (kk, pixels) @ dY^T (pixels, og), by blocks of
                        // output rows.
                        for r0 in (0..d.ho).step_by(rows) {
                            let r1 = (r0 + rows).min(d.ho);
                            let m = (r1 - r0) * d.wo;
                            // A 1x1 layer's column matrix is the input itself.
                            let a = if g.direct {
                                Mat::new(xg, r0 * d.wo, g.hw as isize, 1)
                            } else {
                                im2col(&g, &src, &mut col[..g.kk * m], r0..r1);
                                Mat::new(&col[..g.kk * m], 0, m as isize, 1)
                            };
                            let b = Mat::new(gyg, r0 * d.wo, 1, g.hw as isize);
                            let sum = &mut acc[part.clone()];
                            let add = n > first || r0 > 0;
                            let done = gemm.run_direct_a([g.kk, g.og, m], &a, &b, sum, add);
                            assert!(done, "conv2d: Geom::transposed checked the direct kernel");
                        }
                        continue;
                    }
                    let cols = if g.direct {
                        xg
                    } else {
                        im2col(&g, &src, col, 0..d.ho);
                        &*col
                    };
                    let dst = &mut acc[part];
                    if g.kk < FEW_TAPS {
                        crate::simd::with_best_simd(
                            #[inline(always)]
                            || dots(gyg, cols, g.hw, dst),
                        );
                        continue;
                    }
                    // col^T: (hw, kk), column-major in the column matrix's rows.
                    let b = Mat::new(cols, 0, 1, g.hw as isize);
                    let a = Mat::new(gyg, 0, g.hw as isize, 1);
                    gemm.run_into([g.og, g.kk, g.hw], &a, &b, dst, t, true);
                }
            }
        });
    };
    // One partial sum per stretch of samples; a transposed one starts unwritten (zeroed only
    // if no GEMM will write it). Zeroing a fresh 1.2 MB sum per sample had been 6 % of a
    // stride-2 layer's weight gradient.
    let partial = |range: std::ops::Range<usize>| {
        let mut acc = if tr {
            crate::pool::take::<T>(OP, len)?
        } else {
            crate::pool::take_zeroed::<T>(OP, len)?
        };
        if tr && (range.is_empty() || g.hw == 0) {
            acc.fill(T::default());
        }
        sum_samples(range, &mut acc);
        Ok::<_, quill_core::Error>(acc)
    };
    let mut parts: Vec<Vec<T>> = if split {
        // Four parts a thread: one slowed by a busy sibling core hands parts over.
        let threads = crate::par::threads();
        let per = d.n.div_ceil((4 * threads).min(d.n));
        crate::par::map(d.n.div_ceil(per), threads, |p| {
            partial(p * per..((p + 1) * per).min(d.n))
        })
        .into_iter()
        .collect::<Result<_>>()?
    } else {
        vec![partial(0..d.n)?]
    };
    // The parts added in a fixed order (the same sums whatever the threads), in parallel over
    // stretches of the weights.
    let mut sum = parts.remove(0);
    crate::par::for_each_chunk(&mut sum, 1 << 14, crate::par::threads(), |i, dst| {
        for p in &parts {
            for (a, &v) in dst.iter_mut().zip(&p[i << 14..]) {
                *a = *a + v;
            }
        }
    });
    parts.into_iter().for_each(crate::pool::give);
    if !tr || len == 0 {
        return Ok(T::wrap(sum));
    }
    let mut dw = crate::pool::take::<T>(OP, len)?;
    for (dst, src) in dw.chunks_mut(g.og * g.kk).zip(sum.chunks(g.og * g.kk)) {
        transpose_into(src, dst, g.kk, g.og, g.kk);
    }
    crate::pool::give(sum);
    Ok(T::wrap(dw))
}
