//! The f32 2x2 / stride 2 max pool in AVX-512 intrinsics, both ways. The portable loops in
//! `maxpool.rs` only vectorise across an output row, and a CNN's rows are short (14 and 7
//! outputs at MNIST's sizes): LLVM's 16-wide loop never ran and the rows went scalar. Here
//! each step takes up to 16 outputs of a row under a lane mask and de-interleaves the two
//! input rows' even and odd columns with `vpermt2ps` (the backward writes its shares back
//! interleaved the same way), so a 14-wide row is one step. Same rules and bits as the
//! portable loops: the forward's maximum in the same order (a NaN wins), the backward's
//! gradient divided by the window's number of elements equal to the maximum, nothing for a
//! NaN one.

use quill_core::PoolDims;

/// Whether a plane's slices match the dims the kernels index with: `x` (and `dx`) `h * w`,
/// `y` (and `g`) `ho * wo`, the windows inside the plane.
fn fits(d: &PoolDims, x: usize, y: usize) -> bool {
    x == d.h * d.w && y == d.ho * d.wo && 2 * d.ho <= d.h && 2 * d.wo <= d.w
}

/// The forward of one plane into `y` when the CPU has AVX-512F; false (nothing written)
/// otherwise.
pub(crate) fn forward_2x2(d: &PoolDims, x: &[f32], y: &mut [f32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if fits(d, x.len(), y.len()) && std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected just above; `fits` checked the slice lengths
            // against the dims the kernel indexes with.
            unsafe { x86::forward_2x2(d, x, y) };
            return true;
        }
    }
    let _ = (d, x, y);
    false
}

/// The backward of one plane into `dx` when the CPU has AVX-512F; false (nothing written)
/// otherwise. `x` and `dx` hold the plane's `h * w` values, `y` and `g` its `ho * wo`.
pub(crate) fn backward_2x2(d: &PoolDims, x: &[f32], y: &[f32], g: &[f32], dx: &mut [f32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let fits = fits(d, x.len(), y.len()) && dx.len() == x.len() && g.len() == y.len();
        if fits && std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected just above; the slice lengths were checked against
            // the dims the kernel indexes with.
            unsafe { x86::backward_2x2(d, x, y, g, dx) };
            return true;
        }
    }
    let _ = (d, x, y, g, dx);
    false
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use quill_core::PoolDims;
    use std::arch::x86_64::*;

    /// The low `n` lanes (n <= 16).
    fn lanes(n: usize) -> __mmask16 {
        ((1u32 << n.min(16)) - 1) as __mmask16
    }

    /// Lane masks for `n <= 16` outputs: the outputs, and the first and second 16 of their
    /// `2 n` input columns.
    fn masks(n: usize) -> (__mmask16, __mmask16, __mmask16) {
        (lanes(n), lanes(2 * n), lanes((2 * n).saturating_sub(16)))
    }

    /// The four elements of windows `ow..ow + n` whose top-left input is at `p` (rows `w`
    /// apart), in window order: top-left, top-right, bottom-left, bottom-right, one lane per
    /// window. `kl` / `kh` are `masks(n)`'s input masks; lanes past `n` are zero.
    ///
    /// # Safety
    /// AVX-512F must be available; the `2 n` values at `p` and at `p + w` must be readable.
    #[target_feature(enable = "avx512f")]
    unsafe fn windows(p: *const f32, w: usize, kl: __mmask16, kh: __mmask16) -> [__m512; 4] {
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        // SAFETY: the caller's bounds; masked-off lanes are not read (AVX-512 suppresses
        // their faults).
        let row = |q: *const f32| unsafe {
            let (a, b) = (
                _mm512_maskz_loadu_ps(kl, q),
                _mm512_maskz_loadu_ps(kh, q.add(16)),
            );
            (
                _mm512_permutex2var_ps(a, even, b),
                _mm512_permutex2var_ps(a, odd, b),
            )
        };
        // SAFETY: `p + w` is the second row, readable by the caller's contract.
        let ((tl, tr), (bl, br)) = (row(p), row(unsafe { p.add(w) }));
        [tl, tr, bl, br]
    }

    /// # Safety
    /// AVX-512F must be available; `x.len() == h * w`, `y.len() == ho * wo`, `2 * ho <= h`
    /// and `2 * wo <= w`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn forward_2x2(d: &PoolDims, x: &[f32], y: &mut [f32]) {
        let (w, wo) = (d.w, d.wo);
        // `maxpool::step`: v replaces m when greater or a NaN.
        let step = |m: __m512, v: __m512| {
            let take =
                _mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, m) | _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
            _mm512_mask_blend_ps(take, m, v)
        };
        let xp = x.as_ptr();
        for oh in 0..d.ho {
            let r = 2 * oh * w;
            let mut ow = 0;
            while ow < wo {
                let n = (wo - ow).min(16);
                let (km, kl, kh) = masks(n);
                // SAFETY: input columns 2 ow..2 (ow + n) of rows r and r + w, outputs
                // oh wo + ow..+ n: in bounds as 2 (ow + n) <= w, r + 2 w <= h w and
                // ow + n <= wo; masked-off lanes are not touched.
                let [tl, tr, bl, br] = unsafe { windows(xp.add(r + 2 * ow), w, kl, kh) };
                let m = step(step(step(tl, tr), bl), br);
                // SAFETY: the output lanes argued above.
                unsafe { _mm512_mask_storeu_ps(y.as_mut_ptr().add(oh * wo + ow), km, m) };
                ow += n;
            }
        }
    }

    /// # Safety
    /// AVX-512F must be available; `x.len() == dx.len() == h * w`, `y.len() == g.len() ==
    /// ho * wo`, `2 * ho <= h` and `2 * wo <= w`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn backward_2x2(
        d: &PoolDims,
        x: &[f32],
        y: &[f32],
        g: &[f32],
        dx: &mut [f32],
    ) {
        let (w, wo) = (d.w, d.wo);
        let low = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        let high = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
        let one = _mm512_set1_ps(1.0);
        let (xp, dp) = (x.as_ptr(), dx.as_mut_ptr());
        for oh in 0..d.ho {
            let r = 2 * oh * w;
            let mut ow = 0;
            while ow < wo {
                let n = (wo - ow).min(16);
                // Outputs ow..ow + n read and write input columns 2 ow..2 (ow + n) of rows r
                // and r + w: in bounds as 2 (ow + n) <= 2 wo <= w and r + 2 w <= 2 ho w <= h w.
                // Masked-off lanes are neither loaded nor stored (AVX-512 suppresses their
                // faults).
                let (km, kl, kh) = masks(n);
                let at = oh * wo + ow;
                // SAFETY: these loads stay in the bounds argued above.
                let (m, gv) = unsafe {
                    (
                        _mm512_maskz_loadu_ps(km, y.as_ptr().add(at)),
                        _mm512_maskz_loadu_ps(km, g.as_ptr().add(at)),
                    )
                };
                let eq = |v: __m512| _mm512_mask_cmp_ps_mask::<_CMP_EQ_OQ>(km, v, m);
                // SAFETY: the windows' inputs, in bounds as argued above.
                let e = unsafe { windows(xp.add(r + 2 * ow), w, kl, kh) }.map(eq);
                let mut t = _mm512_maskz_mov_ps(e[0], one);
                for &k in &e[1..] {
                    t = _mm512_add_ps(t, _mm512_maskz_mov_ps(k, one));
                }
                // g / ties where some element equals the maximum, else 0 (a NaN maximum).
                let s = _mm512_maskz_div_ps(e[0] | e[1] | e[2] | e[3], gv, t);
                for (row, (ke, ko)) in [(0, (e[0], e[1])), (w, (e[2], e[3]))] {
                    let (se, so) = (_mm512_maskz_mov_ps(ke, s), _mm512_maskz_mov_ps(ko, s));
                    // SAFETY: the input gradient's columns 2 ow..2 (ow + n) of this row, in
                    // bounds as argued above; masked-off lanes are not stored.
                    unsafe {
                        let q = dp.add(r + row + 2 * ow);
                        _mm512_mask_storeu_ps(q, kl, _mm512_permutex2var_ps(se, low, so));
                        _mm512_mask_storeu_ps(q.add(16), kh, _mm512_permutex2var_ps(se, high, so));
                    }
                }
                ow += n;
            }
            // A column past the last window (odd w) gets nothing.
            for row in [r, r + w] {
                dx[row + 2 * wo..row + w].fill(0.0);
            }
        }
        // Likewise a row past the last window (odd h).
        dx[2 * d.ho * w..].fill(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::{backward_2x2, forward_2x2};
    use quill_core::PoolDims;

    fn dims(h: usize, w: usize) -> PoolDims {
        PoolDims {
            planes: 1,
            h,
            w,
            kh: 2,
            kw: 2,
            sh: 2,
            sw: 2,
            ho: h / 2,
            wo: w / 2,
        }
    }

    /// Few distinct values (ties in most windows, ReLU-like zeros), NaNs sprinkled in.
    fn plane(h: usize, w: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
        (0..h * w)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                match s % 17 {
                    0 => f32::NAN,
                    1 => -f32::NAN,
                    k if k < 8 => 0.0,
                    k => (k % 4) as f32 - 1.5,
                }
            })
            .collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|f| f.to_bits()).collect()
    }

    /// Bit for bit the portable loops (NaN payloads included: the two NaNs below differ),
    /// over row lengths around the 16-lane steps, and the backward's cells past an odd edge
    /// zeroed even when the output buffer starts dirty.
    #[test]
    fn matches_portable_loop_bits() {
        for (i, (h, w)) in [
            (2, 2),
            (4, 28),
            (14, 14),
            (5, 33),
            (3, 64),
            (6, 65),
            (2, 70),
            (7, 3),
        ]
        .into_iter()
        .enumerate()
        {
            let d = dims(h, w);
            let x = plane(h, w, i as u32);
            let mut y = vec![f32::MAX; d.ho * d.wo];
            crate::maxpool::forward_2x2(&d, &x, &mut y);
            let mut got_y = vec![f32::MAX; y.len()];
            if !forward_2x2(&d, &x, &mut got_y) {
                eprintln!("no AVX-512F on this CPU: the portable loops alone are tested");
                return;
            }
            assert_eq!(bits(&got_y), bits(&y), "forward {h}x{w}");
            let g: Vec<f32> = (0..y.len()).map(|k| 0.1 + k as f32 * 0.37).collect();
            let mut want = vec![f32::MAX; h * w];
            crate::maxpool::backward_2x2(&d, &x, &y, &g, &mut want);
            let mut got = vec![f32::MAX; h * w];
            assert!(backward_2x2(&d, &x, &y, &g, &mut got));
            assert_eq!(bits(&got), bits(&want), "backward {h}x{w}");
        }
    }

    /// Slices that do not match the dims are refused, not read past.
    #[test]
    fn refuses_short_slices() {
        let d = dims(4, 6);
        let (x, y) = (vec![1.0f32; 24], vec![1.0f32; 6]);
        assert!(!forward_2x2(&d, &x[..23], &mut y.clone()));
        assert!(!forward_2x2(&d, &x, &mut y.clone()[..5]));
        let mut dx = vec![0.0f32; 24];
        assert!(!backward_2x2(&d, &x[..23], &y, &y, &mut dx));
        assert!(!backward_2x2(&d, &x, &y[..5], &y, &mut dx));
        assert!(!backward_2x2(&d, &x, &y, &y, &mut dx[..20]));
        let wide = PoolDims { wo: 4, ..d };
        assert!(!backward_2x2(&wide, &x, &[1.0; 8], &[1.0; 8], &mut dx));
    }
}
