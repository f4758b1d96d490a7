//! The bf16 GEMM on CPUs with AVX512_BF16: operands stay bf16 and are packed as pairs along the
//! depth (one `u32` holds `x[p]` in its low half and `x[p + 1]` in its high half, an odd depth
//! padded with a zero), so that `vdpbf16ps` multiplies a broadcast pair of A by 16 pairs of B and
//! adds both products into f32 accumulators. The loop nest is `gemm/nest.rs`'s; only the packing
//! (here) and the micro-kernel differ. The kernel rounds a product's finished tiles to bf16 itself
//! (`narrow_rows`, which `amx.rs` shares). Other CPUs widen bf16 to f32 while packing.

use crate::types::{Mat, Pack, Tile};
use half::bf16;
use quill_par::simd::with_best_simd;

/// Two consecutive depth values packed for `vdpbf16ps`; `None` past the end is zero.
#[inline(always)]
fn pair(lo: bf16, hi: Option<bf16>) -> u32 {
    lo.to_bits() as u32 | (hi.map_or(0, bf16::to_bits) as u32) << 16
}

impl Pack<u32> for bf16 {
    /// `dst[s * mr + i] = pair(a[i0 + i, p0 + 2s], a[i0 + i, p0 + 2s + 1])`, rows past `rows`
    /// zero; `kc` counts depth values, the panel holds `kc.div_ceil(2)` steps.
    fn pack_a(
        dst: &mut [u32],
        a: &Mat<bf16>,
        i0: usize,
        rows: usize,
        p0: usize,
        kc: usize,
        mr: usize,
    ) {
        let steps = kc.div_ceil(2);
        let dst = &mut dst[..steps * mr];
        if a.cs == 1 {
            if pairs_transposed(dst, a, [i0, rows, p0, kc, mr]) {
                return;
            }
            // Row-major A: each row's depth run is contiguous, its pairs adjacent. Whole pairs
            // go through `chunks_exact` zipped with the panel's steps (no index arithmetic to
            // check); an odd last value pairs with zero.
            for i in 0..rows {
                let s0 = a.shifted(i0 + i, p0).off;
                let row = &a.data[s0..s0 + kc];
                let pairs = row.chunks_exact(2);
                let odd = pairs.remainder().first().copied();
                let mut steps = dst.chunks_exact_mut(mr);
                // `pairs` first: zip stops on it without taking a step the odd value needs.
                for (two, step) in pairs.zip(steps.by_ref()) {
                    step[i] = pair(two[0], Some(two[1]));
                }
                if let (Some(x), Some(step)) = (odd, steps.next()) {
                    step[i] = pair(x, None);
                }
            }
            if rows < mr {
                for step in dst.chunks_exact_mut(mr) {
                    step[rows..].fill(0);
                }
            }
            return;
        }
        for (s, step) in dst.chunks_exact_mut(mr).enumerate() {
            let p = p0 + 2 * s;
            for (i, x) in step[..rows].iter_mut().enumerate() {
                let hi = (2 * s + 1 < kc).then(|| a.get(i0 + i, p + 1));
                *x = pair(a.get(i0 + i, p), hi);
            }
            if rows < mr {
                step[rows..].fill(0);
            }
        }
    }

    /// `dst[s * nr + j] = pair(b[p0 + 2s, j0 + j], b[p0 + 2s + 1, j0 + j])`, columns past
    /// `cols` zero.
    fn pack_b(
        dst: &mut [u32],
        b: &Mat<bf16>,
        p0: usize,
        kc: usize,
        j0: usize,
        cols: usize,
        nr: usize,
    ) {
        let steps = kc.div_ceil(2);
        let dst = &mut dst[..steps * nr];
        if b.cs == 1 {
            // Row-major B: interleave two contiguous rows, a whole panel's depth in one run of
            // `vpermt2w` pairs where it can, else step by step in the widest SIMD this CPU has
            // (baseline SSE2 unpacks took a tenth of a 512^3 AMX product).
            let whole = kc / 2;
            let lo0 = b.shifted(p0, j0).off;
            let runs = whole > 0 && cols == PAIR_RUN && nr == PAIR_RUN && {
                let hi0 = b.shifted(p0 + 1, j0).off;
                pair_runs(dst, nr, b.data, [lo0, hi0], 2 * b.rs, whole)
            };
            let first = if runs { whole } else { 0 };
            with_best_simd(
                #[inline(always)]
                || {
                    for (s, step) in dst.chunks_exact_mut(nr).enumerate().skip(first) {
                        let lo0 = b.shifted(p0 + 2 * s, j0).off;
                        let hi = (2 * s + 1 < kc).then(|| {
                            let hi0 = b.shifted(p0 + 2 * s + 1, j0).off;
                            &b.data[hi0..hi0 + cols]
                        });
                        pair_step(step, &b.data[lo0..lo0 + cols], hi);
                    }
                },
            );
            return;
        }
        for (s, step) in dst.chunks_exact_mut(nr).enumerate() {
            let p = p0 + 2 * s;
            let odd_end = 2 * s + 1 >= kc;
            for (j, x) in step[..cols].iter_mut().enumerate() {
                let hi = (!odd_end).then(|| b.get(p + 1, j0 + j));
                *x = pair(b.get(p, j0 + j), hi);
            }
            if cols < nr {
                step[cols..].fill(0);
            }
        }
    }

    fn fuse_source(b: &Mat<bf16>, block: [usize; 4]) -> Option<(*const u8, isize)> {
        if !wide_pairs() {
            return None;
        }
        crate::pack::rows_in_place(b, block)
    }

    fn pack_b_block(
        dst: &mut [u32],
        b: &Mat<bf16>,
        p0: usize,
        kc: usize,
        j0: usize,
        cols: usize,
        nr: usize,
    ) {
        if b.cs == 1 {
            pairs_by_rows(dst, b, [p0, kc, j0, cols, nr], kc.div_ceil(2) * nr);
            return;
        }
        crate::pack::by_panels(dst, b, p0, kc, j0, cols, nr);
    }

    const DEPTH: usize = 2;
}

/// One B panel step from two rows of B: `step[j] = pair(lo[j], hi[j])` (a zero high half
/// without `hi`, past the depth), the columns past `lo` zero. The tail is cleared only when
/// there is one: an empty `fill` still called `memset`, once per step and panel, 4 % of a
/// 32 x 512 @ 512 x 512 product.
#[inline(always)]
fn pair_step(step: &mut [u32], lo: &[bf16], hi: Option<&[bf16]>) {
    match hi {
        Some(hi) => {
            for ((x, &l), &h) in step.iter_mut().zip(lo).zip(hi) {
                *x = pair(l, Some(h));
            }
        }
        None => {
            for (x, &l) in step.iter_mut().zip(lo) {
                *x = pair(l, None);
            }
        }
    }
    if lo.len() < step.len() {
        step[lo.len()..].fill(0);
    }
}

/// Rows of B ahead of its step that the fusing kernel prefetches.
const FUSE_AHEAD: usize = 16;

/// The width of the steps [`pair_runs`] writes.
const PAIR_RUN: usize = 32;

/// `count` pair steps of 32 columns in one run: step `i` goes to `dst[i * dst_step..][..32]`
/// and pairs the 32 values from `data[lo + i * src_step]` on (low halves) with those from
/// `data[hi + i * src_step]` on. Two `vpermt2w` per step, where the CPU has AVX-512BW; false,
/// with nothing written, elsewhere or where a step would fall outside `dst` or `data`. Step by
/// step through slices and `pair_step`, the bounds checks, stack reloads and call setup cost
/// several times the step's own moves (docs/perf-log/2026-11-29.md).
fn pair_runs(
    dst: &mut [u32],
    dst_step: usize,
    data: &[bf16],
    [lo, hi]: [usize; 2],
    src_step: isize,
    count: usize,
) -> bool {
    let Some(last) = count.checked_sub(1) else {
        return true;
    };
    let fits_dst = last
        .checked_mul(dst_step)
        .and_then(|e| e.checked_add(PAIR_RUN))
        .is_some_and(|e| e <= dst.len());
    // Both ends of a source run (a negative step runs backwards), each with 32 values.
    let fits_data = |s: usize| {
        let end = isize::try_from(last)
            .ok()
            .and_then(|l| l.checked_mul(src_step))
            .and_then(|d| isize::try_from(s).ok()?.checked_add(d));
        end.and_then(|e| usize::try_from(e).ok())
            .is_some_and(|e| s.max(e).saturating_add(PAIR_RUN) <= data.len())
    };
    if !wide_pairs() || !fits_dst || !fits_data(lo) || !fits_data(hi) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX-512BW was detected (`wide_pairs`); step i < count writes dst[i * dst_step..
    // + 32] and reads data[lo + i * src_step.. + 32] and data[hi + ..], inside both slices
    // because the first and last steps are (checked above) and offsets are linear in i.
    unsafe {
        interleave_run(
            dst.as_mut_ptr(),
            dst_step,
            data.as_ptr().add(lo),
            data.as_ptr().add(hi),
            src_step,
            count,
        );
    }
    true
}

/// Whether [`pair_runs`] has its `vpermt2w` form here.
fn wide_pairs() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx512bw")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The `vpermt2w` index vectors that pair two rows of 32 bf16: for the pairs of columns 0..16
/// and 16..32, each 16-bit lane picks lane j of the low row and then lane j (32 + j) of the
/// high one.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
fn pair_lanes() -> [std::arch::x86_64::__m512i; 2] {
    use std::arch::x86_64::*;
    const fn lanes(from: i16) -> [i16; 32] {
        let mut v = [0i16; 32];
        let mut j = 0;
        while j < 16 {
            v[2 * j] = from + j as i16;
            v[2 * j + 1] = 32 + from + j as i16;
            j += 1;
        }
        v
    }
    const FIRST: [i16; 32] = lanes(0);
    const SECOND: [i16; 32] = lanes(16);
    // SAFETY: each table is 64 bytes, what an unaligned 512-bit load reads.
    unsafe {
        [
            _mm512_loadu_si512(FIRST.as_ptr().cast()),
            _mm512_loadu_si512(SECOND.as_ptr().cast()),
        ]
    }
}

/// [`pair_runs`]'s loop: `vpermt2w` picks, for each 16-bit lane of the output, lane j of the
/// low row and then lane j of the high one.
///
/// # Safety
/// The CPU has AVX-512F and AVX-512BW; for every `i < count`, `dst + i * dst_step` is valid for
/// writes of 32 values and `lo + i * src_step`, `hi + i * src_step` for reads of 32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn interleave_run(
    dst: *mut u32,
    dst_step: usize,
    lo: *const bf16,
    hi: *const bf16,
    src_step: isize,
    count: usize,
) {
    use std::arch::x86_64::*;
    // SAFETY: every step's loads and stores lie where the contract says (unaligned forms).
    unsafe {
        let [first, second] = pair_lanes();
        for i in 0..count {
            let d = i as isize * src_step;
            let l = _mm512_loadu_si512(lo.offset(d).cast());
            let h = _mm512_loadu_si512(hi.offset(d).cast());
            let o = dst.add(i * dst_step);
            _mm512_storeu_si512(o.cast(), _mm512_permutex2var_epi16(l, first, h));
            _mm512_storeu_si512(o.add(16).cast(), _mm512_permutex2var_epi16(l, second, h));
        }
    }
}

/// `Pack::pack_a` for a row-major A whose rows' runs all start 4-byte aligned: each run's
/// pairs are then already the `u32` words the panel holds, so packing is `pack::transposed`'s
/// f32 transpose of those words (loads, shuffles and stores only, so every bit pattern comes
/// through; rows past `rows` zeroed there), where value by value it was a scatter. An odd
/// last value pairs with zero after the transpose. False, with nothing written, when a run is misaligned (an odd start) or this CPU
/// has no such transpose for the row count.
fn pairs_transposed(dst: &mut [u32], a: &Mat<bf16>, [i0, rows, p0, kc, mr]: [usize; 5]) -> bool {
    let (whole, steps) = (kc / 2, kc.div_ceil(2));
    let run = |i: usize| {
        let s0 = a.shifted(i0 + i, p0).off;
        bytemuck::try_cast_slice::<bf16, f32>(&a.data[s0..s0 + 2 * whole])
    };
    if rows == 0 || rows > mr || whole == 0 || (0..rows).any(|i| run(i).is_err()) {
        return false;
    }
    // The next panel's rows, in words, when they keep the parity (else no prefetch).
    let ahead = if a.rs % 2 == 0 {
        mr as isize * a.rs / 2
    } else {
        0
    };
    let dst = &mut dst[..steps * mr];
    let words: &mut [f32] = bytemuck::cast_slice_mut(dst);
    // Every run was checked above, so the fallback (an empty run) is never taken.
    let runs = |i: usize| run(i).unwrap_or(&[]);
    if !crate::pack::transposed(words, rows, whole, mr, ahead, runs) {
        return false;
    }
    if whole < steps {
        let last = &mut dst[whole * mr..][..rows];
        for (i, x) in last.iter_mut().enumerate() {
            *x = pair(a.get(i0 + i, p0 + kc - 1), None);
        }
    }
    true
}

/// The pair panels of a row-major B block (depth `p0..p0 + kc`, columns `j0..j0 + cols`),
/// panel `q` at `dst[q * panel_len..]`, steps past the depth (up to `panel_len / nr`) and
/// columns past `cols` zero. Walks B row pair by row pair, so its reads run along B's rows
/// (panel by panel they jumped a row's length every 64 bytes: a seventh of a 1024^3 AMX
/// product).
pub(super) fn pairs_by_rows(
    dst: &mut [u32],
    b: &Mat<bf16>,
    [p0, kc, j0, cols, nr]: [usize; 5],
    panel_len: usize,
) {
    let panels = cols.div_ceil(nr);
    let dst = &mut dst[..panels * panel_len];
    let steps = kc.div_ceil(2);
    // Whole panels go in one run of `vpermt2w` pairs per row pair, where the CPU has them.
    let full = if nr == PAIR_RUN { cols / nr } else { 0 };
    with_best_simd(
        #[inline(always)]
        || {
            for s in 0..steps {
                let lo0 = b.shifted(p0 + 2 * s, j0).off;
                let hi0 = (2 * s + 1 < kc).then(|| b.shifted(p0 + 2 * s + 1, j0).off);
                let runs = full > 0
                    && hi0.is_some_and(|hi0| {
                        pair_runs(
                            &mut dst[s * nr..],
                            panel_len,
                            b.data,
                            [lo0, hi0],
                            nr as isize,
                            full,
                        )
                    });
                let lo = &b.data[lo0..lo0 + cols];
                let hi = hi0.map(|hi0| &b.data[hi0..hi0 + cols]);
                let first = if runs { full } else { 0 };
                for (q, panel) in dst.chunks_exact_mut(panel_len).enumerate().skip(first) {
                    let j = q * nr;
                    let w = nr.min(cols - j);
                    let step = &mut panel[s * nr..(s + 1) * nr];
                    pair_step(step, &lo[j..j + w], hi.map(|hi| &hi[j..j + w]));
                }
            }
            for panel in dst.chunks_exact_mut(panel_len) {
                panel[steps * nr..].fill(0);
            }
        },
    );
}

/// The features the kernel and [`narrow_rows`] need (every CPU with AVX512_BF16 so far has
/// AVX-512BW).
pub(crate) fn narrows_here() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// `C[mr x nr] (=|+=) A * B` over `t.kc` pair steps: 12 rows by two 16-lane f32 vectors. With
/// `t.narrow` set (a product's last depth block) the sums, plus C's unless `t.first`, go to
/// the bf16 output instead, and C is not written: a separate pass rounding an f32 result had
/// been 5 % of a 1024^3 product.
///
/// # Safety
/// See `MicroKernel` (`t.a` holds `kc * 12` pairs, `t.b + s * t.bs` 32 pairs
/// per step `s`; a non-null `t.narrow` is valid for writes of `mr` rows of `nr` values at
/// stride `ldc`); the CPU has AVX512F, AVX-512BW and AVX512_BF16 ([`narrows_here`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
pub(crate) unsafe fn avx512bf16(t: &Tile<f32, u32>) {
    // SAFETY: the caller's contract is `kernel`'s without a `Fuse`.
    unsafe { kernel::<false>(t, std::ptr::null()) }
}

/// [`avx512bf16`] packing its B panel from B's rows as it goes (`Gemm::fused`): the first row
/// tile of a one-thread product's panel reads B where it lies, two rows a step, pairs them with
/// two `vpermt2w` and stores the panel for the row tiles after it. Those loads, shuffles and
/// stores then overlap the tile's 24 dot products a step instead of running as a packing pass
/// of their own, whose stores the kernel reloaded through L2 or L3 (docs/perf-log/2026-11-29.md).
///
/// # Safety
/// See `FusedKernel` (12 x 32 tiles), with the CPU features of
/// [`avx512bf16`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
pub(crate) unsafe fn avx512bf16_fused(t: &Tile<f32, u32>, f: &crate::types::Fuse<u32>) {
    // SAFETY: the caller's contract, `f` included.
    unsafe { kernel::<true>(t, f) }
}

/// The bf16 kernel's body: B's steps from the packed panel, or with `FUSE` from B's rows
/// through `f`, which it packs as it goes.
///
/// # Safety
/// [`avx512bf16`]'s contract, and with `FUSE` [`avx512bf16_fused`]'s for `*f`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
#[inline]
unsafe fn kernel<const FUSE: bool>(t: &Tile<f32, u32>, f: *const crate::types::Fuse<u32>) {
    use std::arch::x86_64::*;
    const MR: usize = 12;
    const NR: usize = 32;
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    // Fetch what the end writes: C, or the bf16 output alone when this first depth block is
    // also the last (C is then neither read nor written).
    let (out, bytes) = if t.first && !t.narrow.is_null() {
        (t.narrow as *const i8, 2)
    } else {
        (t.c as *const i8, 4)
    };
    for i in 0..t.mr {
        let row = out.wrapping_add(i * t.ldc * bytes);
        _mm_prefetch::<_MM_HINT_T0>(row);
        _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(NR * bytes - 1));
    }
    let lanes = pair_lanes();
    for s in 0..t.kc {
        // SAFETY: step s < kc reads the NR B pairs at b + s*bs (without FUSE) or B's rows at
        // src + 2s*rs and, for s < whole, the next (with FUSE, writing the NR pairs at out +
        // s*NR), and A pairs s*MR..(s+1)*MR, all valid by the caller's contract; a prefetch
        // reads nothing, so its address may lie anywhere. __m512bh is 32 bf16, the bits of 16
        // u32 pairs.
        unsafe {
            let [b0, b1] = if FUSE {
                let f = &*f;
                let lo = f.src.offset(2 * s as isize * f.rs);
                // Rows a page or more apart defeat the hardware prefetchers.
                let ahead = lo.wrapping_offset(FUSE_AHEAD as isize * f.rs);
                _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_offset(f.rs).cast());
                let l = _mm512_loadu_si512(lo.cast());
                let h = if s < f.whole {
                    _mm512_loadu_si512(lo.offset(f.rs).cast())
                } else {
                    _mm512_setzero_si512()
                };
                let p0 = _mm512_permutex2var_epi16(l, lanes[0], h);
                let p1 = _mm512_permutex2var_epi16(l, lanes[1], h);
                _mm512_storeu_si512(f.out.add(s * NR).cast(), p0);
                _mm512_storeu_si512(f.out.add(s * NR + 16).cast(), p1);
                [p0, p1]
            } else {
                let bp = t.b.offset(s as isize * t.bs);
                [
                    _mm512_loadu_si512(bp.cast()),
                    _mm512_loadu_si512(bp.add(16).cast()),
                ]
            };
            let b0: __m512bh = std::mem::transmute(b0);
            let b1: __m512bh = std::mem::transmute(b1);
            let ap = t.a.add(s * MR);
            for (i, row) in acc.iter_mut().enumerate() {
                let ai: __m512bh = std::mem::transmute(_mm512_set1_epi32(*ap.add(i) as i32));
                row[0] = _mm512_dpbf16_ps(row[0], ai, b0);
                row[1] = _mm512_dpbf16_ps(row[1], ai, b1);
            }
        }
    }
    if t.mr == MR && t.nr == NR && t.narrow.is_null() {
        for (i, row) in acc.iter().enumerate() {
            for (v, x) in row.iter().enumerate() {
                // SAFETY: a full tile: row i < MR and columns v*16..v*16+16 <= NR lie in the
                // mr x nr block the caller lets us read and write.
                unsafe {
                    let p = t.c.add(i * t.ldc + v * 16);
                    let y = if t.first {
                        *x
                    } else {
                        _mm512_add_ps(*x, _mm512_loadu_ps(p))
                    };
                    _mm512_storeu_ps(p, y);
                }
            }
        }
        return;
    }
    // An edge tile or a narrowed one: spill to a local tile, then touch only the mr x nr part.
    let mut tile = [0f32; MR * NR];
    for (i, row) in acc.iter().enumerate() {
        for (v, x) in row.iter().enumerate() {
            // SAFETY: i * NR + v * 16 + 16 <= MR * NR, inside `tile`.
            unsafe { _mm512_storeu_ps(tile.as_mut_ptr().add(i * NR + v * 16), *x) };
        }
    }
    if !t.narrow.is_null() {
        let o = Narrow {
            out: t.narrow,
            c: t.c,
            ldc: t.ldc,
            mr: t.mr,
            nr: t.nr,
            add_c: !t.first,
        };
        // SAFETY: `tile` holds MR >= mr rows of 32; `narrow` (and `c`, read when not `first`)
        // hold mr rows of nr values at stride ldc by the contract, which also has the CPU
        // features `narrow_rows` needs.
        unsafe { narrow_rows(&tile, &o) };
        return;
    }
    for i in 0..t.mr {
        for j in 0..t.nr {
            // SAFETY: i < mr and j < nr, inside the caller's block.
            unsafe {
                let p = t.c.add(i * t.ldc + j);
                let y = tile[i * NR + j];
                *p = if t.first { y } else { *p + y };
            }
        }
    }
}

/// Where a narrowed tile's `mr x nr` sums go (see [`Tile::narrow`]).
pub(super) struct Narrow {
    pub(super) out: *mut u16,
    /// Earlier depth blocks' sums, added first when `add_c`.
    pub(super) c: *const f32,
    pub(super) ldc: usize,
    pub(super) mr: usize,
    pub(super) nr: usize,
    pub(super) add_c: bool,
}

/// Rounds the tile's `mr x nr` sums (plus C's, with `add_c`) to bf16 into `o.out`, a row
/// of 32 at a time by `vcvtne2ps2bf16`: round to nearest even like `to_bf16`, NaNs quieted
/// alike, but denormals flush to zero, as `tdpbf16ps` and `vdpbf16ps` already flush their own
/// sums (so only a sum of two depth blocks can tell). A fifth of the instructions of
/// `to_bf16`'s integer rounding, which had been a quarter of a 1024 x 128 x 384 product.
///
/// # Safety
/// `o.out` (and `o.c` with `add_c`) is valid for `mr` rows of `nr` values at stride `ldc`,
/// written (read) by no one else now; `tile` holds at least `mr` rows of 32 sums; `1 <= nr <=
/// 32`; the CPU has AVX-512F, AVX-512BW and AVX512_BF16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
pub(super) unsafe fn narrow_rows(tile: &[f32], o: &Narrow) {
    use std::arch::x86_64::*;
    const NR: usize = 32;
    debug_assert!(o.mr * NR <= tile.len() && (1..=NR).contains(&o.nr));
    let mask: __mmask32 = u32::MAX >> (NR - o.nr);
    let (lo_mask, hi_mask) = (mask as __mmask16, (mask >> 16) as __mmask16);
    for (i, sums) in tile.chunks_exact(NR).take(o.mr).enumerate() {
        // SAFETY: `sums` holds 32 values. C's row i (read with `add_c`) and the output's are
        // valid for `nr` values by the contract, and the masks touch no lane past `nr` (a
        // masked-off lane is never accessed, so it cannot fault).
        unsafe {
            let mut lo = _mm512_loadu_ps(sums.as_ptr());
            let mut hi = _mm512_loadu_ps(sums.as_ptr().add(16));
            if o.add_c {
                let c = o.c.wrapping_add(i * o.ldc);
                lo = _mm512_add_ps(lo, _mm512_maskz_loadu_ps(lo_mask, c));
                hi = _mm512_add_ps(hi, _mm512_maskz_loadu_ps(hi_mask, c.wrapping_add(16)));
            }
            // The second operand fills the low half.
            let bits: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo));
            let out = o.out.wrapping_add(i * o.ldc).cast::<i16>();
            _mm512_mask_storeu_epi16(out, mask, bits);
        }
    }
}

#[cfg(test)]
mod tests;
