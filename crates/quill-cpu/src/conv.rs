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
//! matrix: the input is already one. With unit strides and "same" padding (as many output as
//! input columns) a row of the column matrix is the image shifted by one constant offset, so
//! im2col is one copy per row and col2im one add per row, with the padding taps zeroed.

mod depthwise;

use crate::matmul::{select_f32, select_f64, with_scratch, CacheSizes, Cvt, Gemm, Mat, Real};
use crate::storage::read;
use crate::{CpuElement, CpuStorage};
use quill_core::{ConvDims, DType, Result};
use rayon::prelude::*;
use std::cell::Cell;
use std::ops::Range;

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
        select_f32()
    }
}
impl ConvReal for f64 {
    fn gemm() -> Gemm<f64> {
        select_f64()
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
        let t = rayon::current_num_threads();
        if t < 2 || self.work() < GRAIN {
            (false, 1)
        } else if self.d.n >= 2 {
            (true, 1)
        } else {
            (false, t)
        }
    }
    /// For kernel column `j`: the offset of its first tap from the output column and the
    /// output columns `lo..hi` whose tap lands inside the input row.
    fn cols(&self, j: usize) -> (isize, usize, usize) {
        let (sw, pw, dw) = (
            self.d.spec.stride.1,
            self.d.spec.padding.1,
            self.d.spec.dilation.1,
        );
        let off = (j * dw) as isize - pw as isize;
        span(off, sw, self.d.w, self.d.wo)
    }
}

/// The outputs `lo..hi` (of `count`) whose tap `o * step + off` lies in `0..len`.
fn span(off: isize, step: usize, len: usize, count: usize) -> (isize, usize, usize) {
    let s = step as isize;
    let lo = if off >= 0 { 0 } else { (-off + s - 1) / s } as usize;
    let end = len as isize - off;
    let hi = if end <= 0 { 0 } else { (end + s - 1) / s } as usize;
    let lo = lo.min(count);
    (off, lo, hi.clamp(lo, count))
}

/// Writes the column matrix (kk, pixels) of output rows `out_rows` of one group of one sample:
/// row (c, i, j) holds tap (i, j) of channel `c` for each of those output pixels, zero where
/// it falls in the padding.
fn im2col<T: Real>(g: &Geom, x: &[T], col: &mut [T], out_rows: Range<usize>) {
    let d = &g.d;
    let (sh, sw) = d.spec.stride;
    let (ph, dh) = (d.spec.padding.0, d.spec.dilation.0);
    let (r0, nrows) = (out_rows.start, out_rows.len());
    let mut rows = col.chunks_exact_mut(nrows * d.wo);
    for c in 0..g.cg {
        let xc = &x[c * g.hw_in..(c + 1) * g.hw_in];
        for i in 0..d.kh {
            let (offh, lo_h, hi_h) = span((i * dh) as isize - ph as isize, sh, d.h, d.ho);
            // The same span, relative to the block's first output row.
            let lo_b = lo_h.saturating_sub(r0).min(nrows);
            let hi_b = hi_h.saturating_sub(r0).clamp(lo_b, nrows);
            let offh_b = offh + (r0 * sh) as isize;
            for j in 0..d.kw {
                let (offw, lo, hi) = g.cols(j);
                let row = rows.next().expect("kk rows of the block's pixels");
                if (sh, sw) == (1, 1) && d.wo == d.w {
                    shifted_copy(row, xc, d.w, (offh_b, lo_b, hi_b), (offw, lo, hi));
                    continue;
                }
                for (ob, dst) in row.chunks_exact_mut(d.wo).enumerate() {
                    let oh = r0 + ob;
                    if oh < lo_h || oh >= hi_h {
                        dst.fill(T::default());
                        continue;
                    }
                    let ih = (oh * sh) as isize + offh;
                    let src = &xc[ih as usize * d.w..(ih as usize + 1) * d.w];
                    dst[..lo].fill(T::default());
                    dst[hi..].fill(T::default());
                    let first = (lo * sw) as isize + offw;
                    if sw == 1 {
                        let a = first as usize;
                        dst[lo..hi].copy_from_slice(&src[a..a + hi - lo]);
                    } else {
                        for (k, v) in dst[lo..hi].iter_mut().enumerate() {
                            *v = src[first as usize + k * sw];
                        }
                    }
                }
            }
        }
    }
}

/// One row of the column matrix for unit strides and as many output as input columns (a
/// "same" convolution): output pixel (oh, ow) reads input pixel (oh + offh, ow + offw), a
/// constant shift in the flat image, so the rows `lo_h..hi_h` that land inside the input are
/// one copy, after which the columns outside `lo..hi` (which picked up a neighbouring row's
/// pixels, or lie past the copy) are zeroed. A copy (and two fills) per output row had spent
/// more time in `memmove` / `memset` calls than in moving a 14-pixel row.
fn shifted_copy<T: Real>(
    row: &mut [T],
    xc: &[T],
    w: usize,
    (offh, lo_h, hi_h): (isize, usize, usize),
    (offw, lo, hi): (isize, usize, usize),
) {
    let Some((a, b, src)) = shift_span(w, (offh, lo_h, hi_h), (offw, lo, hi)) else {
        row.fill(T::default());
        return;
    };
    row[a..b].copy_from_slice(&xc[src..src + (b - a)]);
    row[..lo_h * w].fill(T::default());
    row[hi_h * w..].fill(T::default());
    zero_columns(&mut row[lo_h * w..hi_h * w], w, lo, hi);
}

/// For [`shifted_copy`] / [`shifted_add`]: the span `a..b` of the column-matrix row from the
/// first in-range tap to the last, and the image index that `a` maps to; `None` when no tap
/// lands inside the image.
fn shift_span(
    w: usize,
    (offh, lo_h, hi_h): (isize, usize, usize),
    (offw, lo, hi): (isize, usize, usize),
) -> Option<(usize, usize, usize)> {
    if lo_h >= hi_h || lo >= hi {
        return None;
    }
    // (lo_h + offh, lo + offw) is inside the input: `span` picked lo_h and lo so.
    let at = (lo_h as isize + offh) * w as isize + lo as isize + offw;
    Some((lo_h * w + lo, (hi_h - 1) * w + hi, at as usize))
}

/// Zeroes columns `..lo` and `hi..` of the `w`-wide rows in `rows`. Column by column: those are
/// a pixel or two per row, and per-row `fill`s each became a `memset` call (a tenth of the
/// conv layer's time).
fn zero_columns<T: Real>(rows: &mut [T], w: usize, lo: usize, hi: usize) {
    for k in (0..lo).chain(hi..w) {
        for x in rows.iter_mut().skip(k).step_by(w) {
            *x = T::default();
        }
    }
}

/// The adjoint of [`shifted_copy`]: the column-matrix row's entries whose taps fall in the
/// padding are zeroed (the row is scratch), then the rows `lo_h..hi_h` are added onto the
/// input's pixels in one pass along the constant shift.
fn shifted_add<T: Real>(
    row: &mut [T],
    xc: &mut [T],
    w: usize,
    (offh, lo_h, hi_h): (isize, usize, usize),
    (offw, lo, hi): (isize, usize, usize),
) {
    let Some((a, b, dst)) = shift_span(w, (offh, lo_h, hi_h), (offw, lo, hi)) else {
        return;
    };
    zero_columns(&mut row[lo_h * w..hi_h * w], w, lo, hi);
    for (x, &y) in xc[dst..dst + (b - a)].iter_mut().zip(&row[a..b]) {
        *x = *x + y;
    }
}

/// The adjoint of `im2col`: adds each entry of the column matrix back onto the input pixel
/// it was read from (taps in the padding are dropped).
fn col2im<T: Real>(g: &Geom, col: &mut [T], dx: &mut [T]) {
    let d = &g.d;
    let (sh, sw) = d.spec.stride;
    let (ph, dh) = (d.spec.padding.0, d.spec.dilation.0);
    let mut rows = col.chunks_exact_mut(g.hw);
    for c in 0..g.cg {
        let xc = &mut dx[c * g.hw_in..(c + 1) * g.hw_in];
        for i in 0..d.kh {
            let (offh, lo_h, hi_h) = span((i * dh) as isize - ph as isize, sh, d.h, d.ho);
            for j in 0..d.kw {
                let (offw, lo, hi) = g.cols(j);
                let row = rows.next().expect("kk rows of hw");
                if (sh, sw) == (1, 1) && d.wo == d.w {
                    shifted_add(row, xc, d.w, (offh, lo_h, hi_h), (offw, lo, hi));
                    continue;
                }
                for oh in lo_h..hi_h {
                    let src = &row[oh * d.wo..(oh + 1) * d.wo];
                    let ih = ((oh * sh) as isize + offh) as usize;
                    let dst = &mut xc[ih * d.w..(ih + 1) * d.w];
                    let first = ((lo * sw) as isize + offw) as usize;
                    if sw == 1 {
                        for (a, &b) in dst[first..first + hi - lo].iter_mut().zip(&src[lo..hi]) {
                            *a = *a + b;
                        }
                    } else {
                        for (k, &b) in src[lo..hi].iter().enumerate() {
                            let a = &mut dst[first + k * sw];
                            *a = *a + b;
                        }
                    }
                }
            }
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
/// fresh zeroed vector per rayon job had spent 3 % of a dilated 3x3 layer's forward in
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
    let one = |(n, o): (usize, &mut [T])| with_scratch(&SCRATCH, scratch_len, |s| body(n, o, s));
    if split {
        out.par_chunks_mut(per).enumerate().for_each(one);
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
    let mut store = CpuStorage::for_overwrite(T::DTYPE, d.n * d.o * g.hw);
    let out = T::slice_mut(&mut store).expect("allocated as T");
    if depthwise::applies(&g) {
        depthwise::forward(&g, xs, ws, out);
        return Ok(store);
    }
    let gemm = T::gemm();
    let (split, t) = g.threads();
    // A 1x1 layer's direct GEMM already writes NCHW from the input in place.
    if !g.direct && g.transposed(&gemm, t) {
        forward_transposed(&g, &gemm, xs, ws, out, split);
        return Ok(store);
    }
    let col_len = if g.direct { 0 } else { g.kk * g.hw };
    per_sample(out, d.o * g.hw, split, col_len, |n, y, col| {
        let xn = &xs[n * d.c * g.hw_in..(n + 1) * d.c * g.hw_in];
        for gi in 0..d.spec.groups {
            let xg = &xn[gi * g.cg * g.hw_in..(gi + 1) * g.cg * g.hw_in];
            let cols: &[T] = if g.direct {
                xg
            } else {
                im2col(&g, xg, col, 0..d.ho);
                col
            };
            let yg = &mut y[gi * g.og * g.hw..(gi + 1) * g.og * g.hw];
            let a = Mat::new(ws, gi * g.og * g.kk, g.kk as isize, 1);
            let b = Mat::new(cols, 0, g.hw as isize, 1);
            gemm.run([g.og, g.hw, g.kk], &a, &b, yg, t);
        }
    });
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
) {
    let d = &g.d;
    let mut wt = vec![T::default(); ws.len()];
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
        col_len + rows * d.wo * g.og,
        |n, y, scratch| {
            let (col, yt) = scratch.split_at_mut(col_len);
            let xn = &xs[n * d.c * g.hw_in..(n + 1) * d.c * g.hw_in];
            for gi in 0..d.spec.groups {
                let xg = &xn[gi * g.cg * g.hw_in..(gi + 1) * g.cg * g.hw_in];
                let yg = &mut y[gi * g.og * g.hw..(gi + 1) * g.og * g.hw];
                let b = Mat::new(&wt, gi * g.kk * g.og, g.og as isize, 1);
                for r0 in (0..d.ho).step_by(rows) {
                    let r1 = (r0 + rows).min(d.ho);
                    let m = (r1 - r0) * d.wo;
                    im2col(g, xg, &mut col[..g.kk * m], r0..r1);
                    let a = Mat::new(&col[..g.kk * m], 0, 1, m as isize);
                    let done =
                        gemm.run_direct_a([m, g.og, g.kk], &a, &b, &mut yt[..m * g.og], false);
                    assert!(done, "conv2d: Geom::transposed checked the direct kernel");
                    transpose_into(&yt[..m * g.og], &mut yg[r0 * d.wo..], m, g.og, g.hw);
                }
            }
        },
    );
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
    let mut store = CpuStorage::for_overwrite(T::DTYPE, d.n * d.c * g.hw_in);
    let dx = T::slice_mut(&mut store).expect("allocated as T");
    if depthwise::applies(&g) {
        depthwise::backward_input(&g, gys, ws, dx);
        return Ok(store);
    }
    let gemm = T::gemm();
    let (split, t) = g.threads();
    let scratch = if g.direct { 0 } else { g.kk * g.hw };
    per_sample(dx, d.c * g.hw_in, split, scratch, |n, dxn, col| {
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
                col2im(&g, col, dxg);
            }
        }
    });
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
    // The samples `range` summed into `acc` (o, kk, zeroed), with `col` as scratch; transposed,
    // into `acc_t` (per group kk x og), added onto `acc` at the end.
    let sum_samples = |range: std::ops::Range<usize>, acc: &mut [T]| {
        let mut acc_t = vec![T::default(); if tr { len } else { 0 }];
        let col_len = if g.direct { 0 } else { g.kk * rows * d.wo };
        with_scratch(&SCRATCH, col_len, |col: &mut [T]| {
            for n in range {
                let xn = &xs[n * d.c * g.hw_in..(n + 1) * d.c * g.hw_in];
                let gyn = &gys[n * d.o * g.hw..(n + 1) * d.o * g.hw];
                for gi in 0..d.spec.groups {
                    let xg = &xn[gi * g.cg * g.hw_in..(gi + 1) * g.cg * g.hw_in];
                    let part = gi * g.og * g.kk..(gi + 1) * g.og * g.kk;
                    let gyg = &gyn[gi * g.og * g.hw..(gi + 1) * g.og * g.hw];
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
                                im2col(&g, xg, &mut col[..g.kk * m], r0..r1);
                                Mat::new(&col[..g.kk * m], 0, m as isize, 1)
                            };
                            let b = Mat::new(gyg, r0 * d.wo, 1, g.hw as isize);
                            let sum = &mut acc_t[part.clone()];
                            let done = gemm.run_direct_a([g.kk, g.og, m], &a, &b, sum, true);
                            assert!(done, "conv2d: Geom::transposed checked the direct kernel");
                        }
                        continue;
                    }
                    let cols = if g.direct {
                        xg
                    } else {
                        im2col(&g, xg, col, 0..d.ho);
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
        if tr {
            let mut sum = vec![T::default(); g.og * g.kk];
            for (dst, src) in acc.chunks_mut(g.og * g.kk).zip(acc_t.chunks(g.og * g.kk)) {
                transpose_into(src, &mut sum, g.kk, g.og, g.kk);
                for (a, &v) in dst.iter_mut().zip(&sum) {
                    *a = *a + v;
                }
            }
        }
    };
    let mut dw = vec![T::default(); len];
    if split {
        // Four parts a thread: one slowed by a busy sibling core hands parts over.
        let parts = (4 * rayon::current_num_threads()).min(d.n);
        let per = d.n.div_ceil(parts);
        let partials: Vec<Vec<T>> = (0..d.n.div_ceil(per))
            .into_par_iter()
            .map(|p| {
                let mut acc = vec![T::default(); len];
                sum_samples(p * per..((p + 1) * per).min(d.n), &mut acc);
                acc
            })
            .collect();
        for p in &partials {
            for (s, &v) in dw.iter_mut().zip(p) {
                *s = *s + v;
            }
        }
    } else if d.n > 0 {
        sum_samples(0..d.n, &mut dw);
    }
    Ok(T::wrap(dw))
}
