//! Explicit AVX2 folds of one contiguous run for the hottest reductions: f32 / f64 sum, max
//! and min. The generic `simd::fold_lanes` leaves the vectorising to LLVM, whose SLP pass packs
//! its 32 accumulators two to an xmm register (a quarter of the AVX2 width: 23 GB/s from L1
//! where these reach 80). Each function returns `None` where the CPU lacks AVX2, and the caller
//! falls back to the generic fold.
//!
//! The accumulation order matches `fold_lanes`: 32 f32 (16 f64) lanes, combined as a tree, so
//! the error bound of `exec::BLOCK` still holds.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

#[inline]
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// What a fold does with each vector: add it, or take the max / min (NaN tracked apart).
#[derive(Clone, Copy, PartialEq)]
enum Fold {
    Add,
    Max,
    Min,
}

macro_rules! fast_fold {
    ($name:ident, $t:ty, $w:expr, $set1:ident, $load:ident, $add:ident, $max:ident, $min:ident,
     $cmp:ident, $or:ident, $mask:ident, $store:ident, $vt:ty) => {
        /// Folds `x` with `f` over four vectors of accumulators starting at `init`; for max / min
        /// a NaN anywhere makes the result NaN (NumPy's `max`).
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        unsafe fn $name(x: &[$t], f: Fold, init: $t) -> $t {
            const W: usize = $w;
            let mut acc: [$vt; 4] = [$set1(init); 4];
            let mut nan = $set1(0.0);
            let mut chunks = x.chunks_exact(4 * W);
            for c in &mut chunks {
                let p = c.as_ptr();
                for (k, a) in acc.iter_mut().enumerate() {
                    // SAFETY: `c` holds exactly 4 * W elements, so `p + k * W .. p + (k + 1) * W`
                    // lies inside it; `loadu` needs no alignment.
                    let v = unsafe { $load(p.add(k * W)) };
                    *a = match f {
                        Fold::Add => $add(*a, v),
                        Fold::Max => {
                            nan = $or(nan, $cmp::<_CMP_UNORD_Q>(v, v));
                            $max(v, *a)
                        }
                        Fold::Min => {
                            nan = $or(nan, $cmp::<_CMP_UNORD_Q>(v, v));
                            $min(v, *a)
                        }
                    };
                }
            }
            let comb = |a: $vt, b: $vt| match f {
                Fold::Add => $add(a, b),
                Fold::Max => $max(a, b),
                Fold::Min => $min(a, b),
            };
            let v = comb(comb(acc[0], acc[1]), comb(acc[2], acc[3]));
            let mut lanes = [0.0 as $t; W];
            // SAFETY: `lanes` holds exactly W elements, one vector; `storeu` needs no alignment.
            unsafe { $store(lanes.as_mut_ptr(), v) };
            let scalar = |a: $t, b: $t| match f {
                Fold::Add => a + b,
                Fold::Max => super::kernels::max_nan(a, b),
                Fold::Min => super::kernels::min_nan(a, b),
            };
            let mut r = tree(&mut lanes, &scalar);
            for &e in chunks.remainder() {
                r = scalar(r, e);
            }
            if f != Fold::Add && $mask(nan) != 0 {
                return <$t>::NAN;
            }
            r
        }
    };
}

/// Pairs `v`'s halves until one value is left (`v.len()` a power of two).
#[inline(always)]
fn tree<T: Copy>(v: &mut [T], op: &impl Fn(T, T) -> T) -> T {
    let mut w = v.len() / 2;
    while w > 0 {
        for j in 0..w {
            v[j] = op(v[j], v[j + w]);
        }
        w /= 2;
    }
    v[0]
}

fast_fold!(
    fold_f32,
    f32,
    8,
    _mm256_set1_ps,
    _mm256_loadu_ps,
    _mm256_add_ps,
    _mm256_max_ps,
    _mm256_min_ps,
    _mm256_cmp_ps,
    _mm256_or_ps,
    _mm256_movemask_ps,
    _mm256_storeu_ps,
    __m256
);
fast_fold!(
    fold_f64,
    f64,
    4,
    _mm256_set1_pd,
    _mm256_loadu_pd,
    _mm256_add_pd,
    _mm256_max_pd,
    _mm256_min_pd,
    _mm256_cmp_pd,
    _mm256_or_pd,
    _mm256_movemask_pd,
    _mm256_storeu_pd,
    __m256d
);

macro_rules! entry {
    ($t:ty, $fold:ident, $sum:ident, $max:ident, $min:ident) => {
        /// The sum of `x` (from -0.0, so that a sum of -0.0s stays -0.0).
        pub fn $sum(x: &[$t]) -> Option<$t> {
            run(x, Fold::Add, -0.0)
        }
        /// The NaN-propagating max of `x` (-inf when empty).
        pub fn $max(x: &[$t]) -> Option<$t> {
            run(x, Fold::Max, <$t>::NEG_INFINITY)
        }
        /// The NaN-propagating min of `x` (+inf when empty).
        pub fn $min(x: &[$t]) -> Option<$t> {
            run(x, Fold::Min, <$t>::INFINITY)
        }
    };
}

trait Run: Sized {
    fn run(x: &[Self], f: Fold, init: Self) -> Option<Self>;
}

impl Run for f32 {
    fn run(x: &[f32], f: Fold, init: f32) -> Option<f32> {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: AVX2 was detected just above.
            return Some(unsafe { fold_f32(x, f, init) });
        }
        let _ = (x, f, init);
        None
    }
}

impl Run for f64 {
    fn run(x: &[f64], f: Fold, init: f64) -> Option<f64> {
        #[cfg(target_arch = "x86_64")]
        if has_avx2() {
            // SAFETY: AVX2 was detected just above.
            return Some(unsafe { fold_f64(x, f, init) });
        }
        let _ = (x, f, init);
        None
    }
}

fn run<T: Run>(x: &[T], f: Fold, init: T) -> Option<T> {
    T::run(x, f, init)
}

entry!(f32, fold_f32, sum_f32, max_f32, min_f32);
entry!(f64, fold_f64, sum_f64, max_f64, min_f64);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length around the vector and chunk edges, against a plain f64 fold.
    #[test]
    fn matches_scalar_at_every_edge() {
        if !has_avx2() {
            return;
        }
        for n in 0..100usize {
            let x: Vec<f32> = (0..n).map(|i| ((i * 37 % 11) as f32) - 5.5).collect();
            let want: f64 = x.iter().map(|&v| v as f64).sum();
            assert_eq!(sum_f32(&x).unwrap() as f64, want, "n={n}");
            let mx = x.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(max_f32(&x).unwrap(), mx, "n={n}");
            let mn = x.iter().cloned().fold(f32::INFINITY, f32::min);
            assert_eq!(min_f32(&x).unwrap(), mn, "n={n}");
            let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
            assert_eq!(sum_f64(&xd).unwrap(), want, "n={n}");
            assert_eq!(max_f64(&xd).unwrap(), mx as f64, "n={n}");
            assert_eq!(min_f64(&xd).unwrap(), mn as f64, "n={n}");
        }
    }

    /// A NaN in any lane, or in the tail, wins max and min; -0.0 sums stay -0.0.
    #[test]
    fn nan_anywhere_and_signed_zero() {
        if !has_avx2() {
            return;
        }
        for n in [1usize, 7, 31, 32, 33, 64, 95] {
            for at in 0..n {
                let mut x = vec![1.0f32; n];
                x[at] = f32::NAN;
                assert!(max_f32(&x).unwrap().is_nan(), "n={n} at={at}");
                assert!(min_f32(&x).unwrap().is_nan(), "n={n} at={at}");
                let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
                assert!(max_f64(&xd).unwrap().is_nan(), "n={n} at={at}");
            }
            let z = vec![-0.0f32; n];
            assert!(sum_f32(&z).unwrap().is_sign_negative());
        }
        assert_eq!(max_f32(&[]).unwrap(), f32::NEG_INFINITY);
        assert_eq!(sum_f64(&[]).unwrap().to_bits(), (-0.0f64).to_bits());
    }
}
