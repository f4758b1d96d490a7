//! The bf16 GEMM on CPUs with AVX512_BF16: operands stay bf16 and are packed as pairs along
//! the depth (one `u32` holds `x[p]` in its low half and `x[p + 1]` in its high half, an odd
//! depth padded with a zero), so that `vdpbf16ps` multiplies a broadcast pair of A by 16 pairs
//! of B and adds both products into f32 accumulators. The loop nest is `gemm.rs`'s; only the
//! packing (here) and the micro-kernel differ. Other CPUs widen bf16 to f32 while packing.

use super::gemm::Gemm;
use super::kernels::Tile;
use super::pack::{Mat, Pack};
use half::bf16;

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
            step[rows..].fill(0);
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
            // Row-major B: interleave two contiguous rows, in the widest SIMD this CPU has
            // (baseline SSE2 unpacks took a tenth of a 512^3 AMX product).
            crate::simd::with_best_simd(
                #[inline(always)]
                || {
                    for (s, step) in dst.chunks_exact_mut(nr).enumerate() {
                        let lo0 = b.shifted(p0 + 2 * s, j0).off;
                        let lo = &b.data[lo0..lo0 + cols];
                        if 2 * s + 1 < kc {
                            let hi0 = b.shifted(p0 + 2 * s + 1, j0).off;
                            let hi = &b.data[hi0..hi0 + cols];
                            for ((x, &l), &h) in step.iter_mut().zip(lo).zip(hi) {
                                *x = pair(l, Some(h));
                            }
                        } else {
                            for (x, &l) in step.iter_mut().zip(lo) {
                                *x = pair(l, None);
                            }
                        }
                        step[cols..].fill(0);
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
            step[cols..].fill(0);
        }
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
        super::pack::by_panels(dst, b, p0, kc, j0, cols, nr);
    }

    const DEPTH: usize = 2;
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
    crate::simd::with_best_simd(
        #[inline(always)]
        || {
            for s in 0..steps {
                let lo0 = b.shifted(p0 + 2 * s, j0).off;
                let lo = &b.data[lo0..lo0 + cols];
                let hi = (2 * s + 1 < kc).then(|| {
                    let hi0 = b.shifted(p0 + 2 * s + 1, j0).off;
                    &b.data[hi0..hi0 + cols]
                });
                for (q, panel) in dst.chunks_exact_mut(panel_len).enumerate() {
                    let j = q * nr;
                    let w = nr.min(cols - j);
                    let step = &mut panel[s * nr..(s + 1) * nr];
                    match hi {
                        Some(hi) => {
                            for ((x, &l), &h) in
                                step.iter_mut().zip(&lo[j..j + w]).zip(&hi[j..j + w])
                            {
                                *x = pair(l, Some(h));
                            }
                        }
                        None => {
                            for (x, &l) in step.iter_mut().zip(&lo[j..j + w]) {
                                *x = pair(l, None);
                            }
                        }
                    }
                    step[w..].fill(0);
                }
            }
            for panel in dst.chunks_exact_mut(panel_len) {
                panel[steps * nr..].fill(0);
            }
        },
    );
}

/// The bf16 GEMM for this CPU when it has AVX512_BF16 and the AVX-512 kernel family is the
/// active one (so `with_kernel` can route bf16 to the widening path too).
pub(crate) fn select() -> Option<Gemm<f32, u32>> {
    #[cfg(target_arch = "x86_64")]
    if super::active_kernel() == super::Kernel::Avx512 && is_x86_feature_detected!("avx512bf16") {
        return Some(Gemm::derived(avx512bf16, 12, 32, 2));
    }
    None
}

/// `C[mr x nr] (=|+=) A * B` over `t.kc` pair steps: 12 rows by two 16-lane f32 vectors.
///
/// # Safety
/// See [`super::kernels::MicroKernel`] (`t.a` holds `kc * 12` pairs, `t.b + s * t.bs` 32 pairs per step `s`); the CPU
/// must have AVX512F and AVX512_BF16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bf16")]
pub(crate) unsafe fn avx512bf16(t: &Tile<f32, u32>) {
    use std::arch::x86_64::*;
    const MR: usize = 12;
    const NR: usize = 32;
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    for i in 0..t.mr {
        let row = t.c.wrapping_add(i * t.ldc) as *const i8;
        _mm_prefetch::<_MM_HINT_T0>(row);
        _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(NR * 4 - 1));
    }
    for s in 0..t.kc {
        // SAFETY: step s < kc reads the NR B pairs at b + s*bs and A pairs s*MR..(s+1)*MR,
        // valid by the caller's contract; __m512bh is 32 bf16, the bits of 16 u32 pairs.
        unsafe {
            let bp = t.b.offset(s as isize * t.bs);
            let b0: __m512bh = std::mem::transmute(_mm512_loadu_si512(bp.cast()));
            let b1: __m512bh = std::mem::transmute(_mm512_loadu_si512(bp.add(16).cast()));
            let ap = t.a.add(s * MR);
            for (i, row) in acc.iter_mut().enumerate() {
                let ai: __m512bh = std::mem::transmute(_mm512_set1_epi32(*ap.add(i) as i32));
                row[0] = _mm512_dpbf16_ps(row[0], ai, b0);
                row[1] = _mm512_dpbf16_ps(row[1], ai, b1);
            }
        }
    }
    if t.mr == MR && t.nr == NR {
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
    // An edge tile: spill to a local tile, then touch only the mr x nr part.
    let mut tile = [0f32; MR * NR];
    for (i, row) in acc.iter().enumerate() {
        for (v, x) in row.iter().enumerate() {
            // SAFETY: i * NR + v * 16 + 16 <= MR * NR, inside `tile`.
            unsafe { _mm512_storeu_ps(tile.as_mut_ptr().add(i * NR + v * 16), *x) };
        }
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
