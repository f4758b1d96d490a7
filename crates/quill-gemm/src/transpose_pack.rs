//! The transposing copy at the heart of packing: `n` contiguous source runs (rows of a
//! row-major A, or columns of a transposed B) written across a panel `w` values wide, so that
//! depth step `kk` holds run `i`'s value `kk` at `dst[kk * w + i]`. Done one value at a time this
//! is a strided scatter that costs a third of a 128^3 product; for f32 on x86-64 with AVX it
//! runs as 4 x 8 register transposes instead, or one 6 x 8 transpose for the six-wide panels
//! of the AVX2 kernel. (quill-cpu's `transpose` has 8x8 and 16x16 blocks for `compact`; a panel is
//! only 6 or 12 values wide, too narrow for those.)

/// Writes `dst[kk * w + i] = runs[i][kk]` for `i < runs.len()`, `kk < kc`, and returns
/// whether it did (false: no SIMD path here; the caller copies value by value). Panics if a
/// run is shorter than `kc`, `dst` shorter than `kc * w`, or there are more runs than `w`.
///
/// `ahead`, when not 0, is how many values past each run the caller's next panel's run
/// starts: its cache lines are prefetched while this panel is copied. The runs of a
/// row-major A are rows, often a page or more apart and only `kc` values long, too short for
/// the hardware prefetchers to learn (docs/perf-log/2026-11-28.md).
pub(crate) fn f32_runs(
    dst: &mut [f32],
    runs: &[&[f32]],
    kc: usize,
    w: usize,
    ahead: isize,
) -> bool {
    assert!(
        runs.len() <= w && dst.len() >= kc * w,
        "transpose_pack: panel too small"
    );
    assert!(
        runs.iter().all(|r| r.len() >= kc),
        "transpose_pack: run shorter than kc"
    );
    #[cfg(target_arch = "x86_64")]
    if runs.len() == 6 && w == 6 && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: AVX was detected; the asserts above are the function's bounds contract.
        unsafe { avx_six(dst, runs, kc, ahead) };
        return true;
    }
    #[cfg(target_arch = "x86_64")]
    if runs.len() >= 4 && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: AVX was detected; the asserts above are the function's bounds contract.
        unsafe { avx(dst, runs, kc, w, ahead) };
        return true;
    }
    false
}

/// While copying steps `kk..kk + 16` of each run, fetches one line of the next panel's run
/// (`ahead` values on; 0: none).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse")]
#[inline]
fn prefetch_next(runs: &[&[f32]], ahead: isize, kk: usize) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    if ahead != 0 && kk.is_multiple_of(16) {
        for run in runs {
            let p = run.as_ptr().wrapping_offset(ahead).wrapping_add(kk);
            // A prefetch never faults, so any address will do.
            _mm_prefetch::<_MM_HINT_T0>(p as *const i8);
        }
    }
}

/// Steps `steps` (those past the last whole 8) one value at a time, runs at columns `i0..`.
#[cfg(target_arch = "x86_64")]
fn scalar_steps(
    dst: &mut [f32],
    runs: &[&[f32]],
    steps: std::ops::Range<usize>,
    w: usize,
    i0: usize,
) {
    for kk in steps {
        for (q, run) in runs.iter().enumerate() {
            dst[kk * w + i0 + q] = run[kk];
        }
    }
}

/// # Safety
/// The CPU has AVX; `4 <= runs.len() <= w`, every run holds at least `kc` values and `dst`
/// at least `kc * w`. `ahead` may point anywhere: it is only prefetched.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn avx(dst: &mut [f32], runs: &[&[f32]], kc: usize, w: usize, ahead: isize) {
    use std::arch::x86_64::*;
    let n = runs.len();
    let d = dst.as_mut_ptr();
    let full = kc / 8 * 8;
    // Groups of four runs; the last group ends at run n - 1 and may overlap the one before it,
    // rewriting the same values, so no run count needs a scalar remainder.
    let mut g = 0;
    loop {
        let i0 = g.min(n - 4);
        let r = [runs[i0], runs[i0 + 1], runs[i0 + 2], runs[i0 + 3]];
        for kk in (0..full).step_by(8) {
            prefetch_next(&r, ahead, kk);
            // SAFETY: kk + 8 <= kc values in each run; the stores below write steps kk..kk+8,
            // columns i0..i0+4 <= n <= w, inside the kc * w values of dst.
            unsafe {
                let a = _mm256_loadu_ps(r[0].as_ptr().add(kk));
                let b = _mm256_loadu_ps(r[1].as_ptr().add(kk));
                let c = _mm256_loadu_ps(r[2].as_ptr().add(kk));
                let e = _mm256_loadu_ps(r[3].as_ptr().add(kk));
                let t0 = _mm256_unpacklo_ps(a, b);
                let t1 = _mm256_unpackhi_ps(a, b);
                let t2 = _mm256_unpacklo_ps(c, e);
                let t3 = _mm256_unpackhi_ps(c, e);
                let u = [
                    _mm256_shuffle_ps::<0x44>(t0, t2),
                    _mm256_shuffle_ps::<0xEE>(t0, t2),
                    _mm256_shuffle_ps::<0x44>(t1, t3),
                    _mm256_shuffle_ps::<0xEE>(t1, t3),
                ];
                for (s, v) in u.iter().enumerate() {
                    _mm_storeu_ps(d.add((kk + s) * w + i0), _mm256_castps256_ps128(*v));
                    _mm_storeu_ps(d.add((kk + s + 4) * w + i0), _mm256_extractf128_ps::<1>(*v));
                }
            }
        }
        scalar_steps(dst, &r, full..kc, w, i0);
        if i0 + 4 >= n {
            break;
        }
        g += 4;
    }
}

/// Six runs into a panel six wide (the AVX2 f32 kernel's A panels). Eight steps of six runs
/// are 48 contiguous values, written in one pass from six loads by twelve 4-value stores,
/// where [`avx`]'s two overlapping groups of four load eight rows and write sixteen 4-value
/// pieces in two passes over the panel; it matters most to products with few columns, whose
/// A pack serves only a few B panels (docs/perf-log/2026-11-29.md).
///
/// # Safety
/// The CPU has AVX; `runs.len() == 6`, every run holds at least `kc` values and `dst` at
/// least `kc * 6`. `ahead` may point anywhere: it is only prefetched.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn avx_six(dst: &mut [f32], runs: &[&[f32]], kc: usize, ahead: isize) {
    use std::arch::x86_64::*;
    let r: [&[f32]; 6] = std::array::from_fn(|i| runs[i]);
    let d = dst.as_mut_ptr();
    let full = kc / 8 * 8;
    for kk in (0..full).step_by(8) {
        prefetch_next(&r, ahead, kk);
        // SAFETY: kk + 8 <= kc values in each run; the stores write values kk*6..(kk+8)*6 <=
        // kc * 6 of dst.
        unsafe {
            let a = [
                _mm256_loadu_ps(r[0].as_ptr().add(kk)),
                _mm256_loadu_ps(r[1].as_ptr().add(kk)),
                _mm256_loadu_ps(r[2].as_ptr().add(kk)),
                _mm256_loadu_ps(r[3].as_ptr().add(kk)),
                _mm256_loadu_ps(r[4].as_ptr().add(kk)),
                _mm256_loadu_ps(r[5].as_ptr().add(kk)),
            ];
            // Pairs (run 2q, run 2q+1) at steps 0,1 | 4,5 (lo) and 2,3 | 6,7 (hi), as 64-bit
            // elements e0 e1 | e2 e3.
            // Written out, not in closures: a closure does not inherit `avx`, so one was
            // called (not inlined), its vectors passed through memory.
            let lo_pairs = [
                _mm256_unpacklo_ps(a[0], a[1]),
                _mm256_unpacklo_ps(a[2], a[3]),
                _mm256_unpacklo_ps(a[4], a[5]),
            ];
            let hi_pairs = [
                _mm256_unpackhi_ps(a[0], a[1]),
                _mm256_unpackhi_ps(a[2], a[3]),
                _mm256_unpackhi_ps(a[4], a[5]),
            ];
            for (half, pairs) in [lo_pairs, hi_pairs].into_iter().enumerate() {
                let p0 = _mm256_castps_pd(pairs[0]);
                let p1 = _mm256_castps_pd(pairs[1]);
                let p2 = _mm256_castps_pd(pairs[2]);
                // Steps 2h, 2h + 1 (lane 0) and 2h + 4, 2h + 5 (lane 1), twelve values each:
                // p0.e0 p1.e0 p2.e0 p0.e1 p1.e1 p2.e1, as three 128-bit thirds u, v, w.
                let u = _mm256_castpd_ps(_mm256_unpacklo_pd(p0, p1));
                let v = _mm256_castpd_ps(_mm256_shuffle_pd::<0b1010>(p2, p0));
                let w = _mm256_castpd_ps(_mm256_unpackhi_pd(p1, p2));
                let lo = d.add((kk + 2 * half) * 6);
                let hi4 = d.add((kk + 4 + 2 * half) * 6);
                _mm_storeu_ps(lo, _mm256_castps256_ps128(u));
                _mm_storeu_ps(lo.add(4), _mm256_castps256_ps128(v));
                _mm_storeu_ps(lo.add(8), _mm256_castps256_ps128(w));
                _mm_storeu_ps(hi4, _mm256_extractf128_ps::<1>(u));
                _mm_storeu_ps(hi4.add(4), _mm256_extractf128_ps::<1>(v));
                _mm_storeu_ps(hi4.add(8), _mm256_extractf128_ps::<1>(w));
            }
        }
    }
    scalar_steps(dst, &r, full..kc, 6, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every run count from 4 to 16 into panels as wide or wider (six into six takes
    /// `avx_six`), depths around the 8-step
    /// blocks, against the value-by-value definition; panel values past the runs stay as
    /// they were. Prefetch offsets, some far outside any buffer, change nothing.
    #[test]
    fn matches_the_scalar_copy() {
        for n in 4..=16 {
            for w in [n, n + 3] {
                for (kc, ahead) in [(1, 0), (7, 3), (8, 0), (9, -40), (16, 1 << 40), (31, 0)] {
                    let src: Vec<Vec<f32>> = (0..n)
                        .map(|i| (0..kc + 2).map(|k| (i * 1000 + k) as f32).collect())
                        .collect();
                    // Runs start at an offset of 1, so loads are unaligned.
                    let runs: Vec<&[f32]> = src.iter().map(|r| &r[1..kc + 1]).collect();
                    let mut got = vec![-1.0; kc * w + 5];
                    if !f32_runs(&mut got, &runs, kc, w, ahead) {
                        // Only a machine without the SIMD path may decline.
                        #[cfg(target_arch = "x86_64")]
                        assert!(!std::arch::is_x86_feature_detected!("avx"));
                        continue;
                    }
                    for kk in 0..kc {
                        for i in 0..w {
                            let want = if i < n { src[i][kk + 1] } else { -1.0 };
                            assert_eq!(got[kk * w + i], want, "n {n} w {w} kc {kc} ({kk}, {i})");
                        }
                    }
                    assert!(got[kc * w..].iter().all(|&x| x == -1.0));
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "run shorter than kc")]
    fn short_run_is_caught() {
        let r = [1.0f32; 8];
        let runs = [&r[..], &r[..], &r[..], &r[..7]];
        let mut dst = [0.0; 64];
        f32_runs(&mut dst, &runs, 8, 4, 0);
    }
}
