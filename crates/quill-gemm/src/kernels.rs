//! Micro-kernels: `C[mr x nr] (=|+=) A_panel * B_panel` over `kc` steps of packed panels
//! (A: `MR` values per step, B: `NR` values per step, zero-padded past the matrix edge).
//! The AVX-512 and AVX2+FMA kernels are stamped from one macro, so the code that runs only on
//! AVX-512 machines is the same text as the code tested everywhere else; only the tile shape
//! and the intrinsics differ. The portable kernel is plain Rust that LLVM vectorises. At the end,
//! each of f32 and f64 lists its kernels of every family (`Family`), which the selection table
//! (`select.rs`) sizes and combines.

use crate::types::{Family, GenericKernel, KernelSet, Real, Tile};
#[cfg(target_arch = "x86_64")]
use crate::types::{Fuse, SimdFamily, Stamps};

/// Stamps a SIMD micro-kernel family: `R` rows (at most `$mr`, the packed A panel's height) by
/// `V` vectors (at most `$nv`) of `$lanes` lanes. Accumulators live in a fixed array that LLVM
/// keeps in registers (the loops have constant trip counts). The full `$mr` x `$nv` stamping
/// does the bulk; the shorter and narrower ones serve a matrix's last row tile and last column
/// panel (`types::Stamps`), so that 100 x 100 pays for 100 x 100 and not 108 x 128. Packed B is
/// read at stride `bs` whatever `V`, so every stamping shares one packing.
/// `DIRECT` reads A unpacked through its strides (rows past `mr` re-read row `mr - 1`, so the
/// loop keeps its constant shape without reading outside A; their sums are never stored).
/// With `fused $fused`, also the family's fusing kernel ([`FusedKernel`](crate::types::FusedKernel), full `$mr` rows):
/// B's steps read from B's rows and stored to the panel as they are used. Its loads and
/// stores then overlap the tile's FMAs instead of running as a packing pass of their own,
/// whose stores the kernel reloaded through L2 (docs/perf-log/2026-11-30.md).
#[cfg(target_arch = "x86_64")]
macro_rules! simd_kernel {
    ($name:ident $(fused $fused:ident)?, $feat:literal, $t:ty, $mr:literal, $nv:literal,
     $lanes:literal, $zero:ident, $load:ident, $store:ident, $set1:ident, $fma:ident,
     $add:ident) => {
        /// # Safety
        /// See [`MicroKernel`](crate::types::MicroKernel), with `mr <= R <= MR` and `nr <= V * lanes`; the CPU must
        /// support the features named in `target_feature`.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn $name<const DIRECT: bool, const R: usize, const V: usize>(
            t: &Tile<$t>,
        ) {
            simd_kernel!(@body $feat, $t, $mr, $nv, $lanes, $zero, $load, $store, $set1, $fma,
                $add);
            // SAFETY: the caller's contract; without FUSE the `Fuse` goes unread.
            unsafe { body::<DIRECT, R, V, false>(t, std::ptr::null()) }
        }
        $(
        /// # Safety
        /// See [`FusedKernel`](crate::types::FusedKernel), with `t.nr == NR`; the CPU must support the features named in
        /// `target_feature`.
        #[target_feature(enable = $feat)]
        pub(crate) unsafe fn $fused(t: &Tile<$t>, f: &Fuse<$t>) {
            simd_kernel!(@body $feat, $t, $mr, $nv, $lanes, $zero, $load, $store, $set1, $fma,
                $add);
            // SAFETY: the caller's contract, `f` included.
            unsafe { body::<false, $mr, $nv, true>(t, f) }
        }
        )?
    };
    (@body $feat:literal, $t:ty, $mr:literal, $nv:literal, $lanes:literal, $zero:ident,
     $load:ident, $store:ident, $set1:ident, $fma:ident, $add:ident) => {
        /// The kernel: B's steps from `t.b` or, with `FUSE`, from B's rows through `*f`,
        /// stored to its panel as they are read.
        ///
        /// # Safety
        /// The contract of the kernel it serves: [`MicroKernel`](crate::types::MicroKernel), with `FUSE`
        /// [`FusedKernel`](crate::types::FusedKernel) for `*f` (then `R` and `V` are the full tile's).
        #[target_feature(enable = $feat)]
        #[inline]
        unsafe fn body<const DIRECT: bool, const R: usize, const V: usize, const FUSE: bool>(
            t: &Tile<$t>,
            f: *const Fuse<$t>,
        ) {
            use std::arch::x86_64::*;
            const { assert!(R >= 1 && R <= $mr && V >= 1 && V <= $nv) };
            const { assert!(!FUSE || (R == $mr && V == $nv && !DIRECT)) };
            let nr_max = V * $lanes;
            let rows: [*const $t; R] = std::array::from_fn(|i| {
                t.a.wrapping_offset(i.min(t.mr.max(1) - 1) as isize * t.ars)
            });
            // The fusing operands in locals: through the raw pointer, LLVM would reload them
            // after each store to the panel, which might alias them.
            let (src, rs, out) = if FUSE {
                // SAFETY: with FUSE, `f` points at a valid `Fuse` (the caller's contract).
                let f = unsafe { &*f };
                (f.src, f.rs, f.out)
            } else {
                (std::ptr::null(), 0, std::ptr::null_mut())
            };
            let mut acc = [[$zero(); V]; R];
            // Start fetching the C tile now: its rows are far apart (often in one L1 set) and
            // it comes from L2 or beyond; the loads at the end then find it in L1.
            for i in 0..t.mr {
                let row = t.c.wrapping_add(i * t.ldc) as *const i8;
                _mm_prefetch::<_MM_HINT_T0>(row);
                _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(nr_max * size_of::<$t>() - 1));
            }
            // One depth step: B's vectors times each A value, into the accumulators.
            let step = |acc: &mut [[_; V]; R], p: usize| {
                // SAFETY: step p < kc reads the V * lanes B values at b + p*bs (without
                // FUSE) or B's row at byte src + p*rs (with FUSE, writing them at out +
                // p*NR), and A values p*MR..(p+1)*MR, valid by the caller's contract.
                unsafe {
                    let bp = if FUSE {
                        src.offset(p as isize * rs).cast::<$t>()
                    } else {
                        t.b.offset(p as isize * t.bs)
                    };
                    let mut bv = [$zero(); V];
                    for (v, x) in bv.iter_mut().enumerate() {
                        *x = $load(bp.add(v * $lanes));
                        if FUSE {
                            $store(out.add(p * nr_max + v * $lanes), *x);
                        }
                    }
                    // Wrapping: in a direct kernel `a` is not a panel and this goes unused.
                    let ap = t.a.wrapping_add(p * $mr);
                    for (i, row) in acc.iter_mut().enumerate() {
                        // A direct read: row i (or mr - 1) at depth p, inside A by the
                        // caller's contract for direct kernels.
                        let ai = if DIRECT {
                            $set1(*rows[i].offset(p as isize * t.acs))
                        } else {
                            $set1(*ap.add(i))
                        };
                        for (x, bx) in row.iter_mut().zip(&bv) {
                            *x = $fma(ai, *bx, *x);
                        }
                    }
                }
            };
            // Four steps per trip: the loop's own counter and pointer updates are then a
            // small share of the issue slots the FMAs need. Not for the direct kernel, whose
            // row pointers already crowd the registers (unrolled, it ran slower).
            let quads = if DIRECT { 0 } else { t.kc / 4 * 4 };
            for p in (0..quads).step_by(4) {
                for u in 0..4 {
                    step(&mut acc, p + u);
                }
            }
            for p in quads..t.kc {
                step(&mut acc, p);
            }
            if t.mr == R && t.nr == nr_max {
                for (i, row) in acc.iter().enumerate() {
                    for (v, x) in row.iter().enumerate() {
                        // SAFETY: a full tile: row i < R = mr and columns v*lanes.. < V*lanes
                        // = nr lie in the mr x nr block the caller lets us read and write.
                        unsafe {
                            let p = t.c.add(i * t.ldc + v * $lanes);
                            let y = if t.first { *x } else { $add(*x, $load(p)) };
                            $store(p, y);
                        }
                    }
                }
                return;
            }
            // An edge tile: spill to a local tile (constant indices into `acc`: a run-time
            // bound there would keep the accumulators in memory for the whole kernel,
            // measured at half speed), then write whole vectors of the mr x nr part where the
            // columns allow and single values past them.
            let mut tile = [[[0 as $t; $lanes]; V]; R];
            for (row, out) in acc.iter().zip(tile.iter_mut()) {
                for (x, lanes) in row.iter().zip(out.iter_mut()) {
                    // SAFETY: `lanes` holds exactly one vector.
                    unsafe { $store(lanes.as_mut_ptr(), *x) };
                }
            }
            let whole = t.nr / $lanes * $lanes;
            for (i, row) in tile.iter().enumerate().take(t.mr) {
                let row = row.as_flattened();
                for j in (0..whole).step_by($lanes) {
                    // SAFETY: row i < mr and columns j..j + lanes <= nr lie in the caller's
                    // block; j + lanes <= nr <= V * lanes inside the tile row.
                    unsafe {
                        let p = t.c.add(i * t.ldc + j);
                        let x = $load(row.as_ptr().add(j));
                        let y = if t.first { x } else { $add(x, $load(p)) };
                        $store(p, y);
                    }
                }
                for (j, &y) in row[whole..t.nr].iter().enumerate() {
                    // SAFETY: i < mr and whole + j < nr, inside the caller's block.
                    unsafe {
                        let p = t.c.add(i * t.ldc + whole + j);
                        *p = if t.first { y } else { *p + y };
                    }
                }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
simd_kernel!(
    avx2_f32 fused avx2_f32_fused,
    "avx2,fma",
    f32,
    6,
    2,
    8,
    _mm256_setzero_ps,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_set1_ps,
    _mm256_fmadd_ps,
    _mm256_add_ps
);
#[cfg(target_arch = "x86_64")]
simd_kernel!(
    avx2_f64 fused avx2_f64_fused,
    "avx2,fma",
    f64,
    6,
    2,
    4,
    _mm256_setzero_pd,
    _mm256_loadu_pd,
    _mm256_storeu_pd,
    _mm256_set1_pd,
    _mm256_fmadd_pd,
    _mm256_add_pd
);
#[cfg(target_arch = "x86_64")]
simd_kernel!(
    avx512_f32 fused avx512_f32_fused,
    "avx512f",
    f32,
    12,
    2,
    16,
    _mm512_setzero_ps,
    _mm512_loadu_ps,
    _mm512_storeu_ps,
    _mm512_set1_ps,
    _mm512_fmadd_ps,
    _mm512_add_ps
);
// The AVX-512 families' narrowest stampings (`types::Stamps`: an edge of at most 8 f32 or 4 f64
// columns): half vectors on the packed panels' MR of 12. A core that runs a 512-bit FMA as two
// halves, one per cycle, and 256-bit ones two per cycle (AMD's Zen 4) would otherwise do four
// times the work a 4-column edge needs, not twice.
#[cfg(target_arch = "x86_64")]
simd_kernel!(
    avx512_f32_half,
    "avx2,fma",
    f32,
    12,
    1,
    8,
    _mm256_setzero_ps,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_set1_ps,
    _mm256_fmadd_ps,
    _mm256_add_ps
);
#[cfg(target_arch = "x86_64")]
simd_kernel!(
    avx512_f64_half,
    "avx2,fma",
    f64,
    12,
    1,
    4,
    _mm256_setzero_pd,
    _mm256_loadu_pd,
    _mm256_storeu_pd,
    _mm256_set1_pd,
    _mm256_fmadd_pd,
    _mm256_add_pd
);
#[cfg(target_arch = "x86_64")]
simd_kernel!(
    avx512_f64 fused avx512_f64_fused,
    "avx512f",
    f64,
    12,
    2,
    8,
    _mm512_setzero_pd,
    _mm512_loadu_pd,
    _mm512_storeu_pd,
    _mm512_set1_pd,
    _mm512_fmadd_pd,
    _mm512_add_pd
);

/// The portable kernel: `MR x NR` accumulators in an array, no intrinsics. `DIRECT` reads A
/// through its strides, as the SIMD kernels do.
///
/// # Safety
/// See [`MicroKernel`](crate::types::MicroKernel).
pub(crate) unsafe fn generic<T: Real, const MR: usize, const NR: usize, const DIRECT: bool>(
    t: &Tile<T>,
) {
    let mut acc = [[T::default(); NR]; MR];
    let mut ap = [T::default(); MR];
    for p in 0..t.kc {
        // SAFETY: the caller guarantees NR readable B values at b + p*bs for p < kc.
        let bp = unsafe { std::slice::from_raw_parts(t.b.offset(p as isize * t.bs), NR) };
        for (i, x) in ap.iter_mut().enumerate() {
            // SAFETY: packed: p*MR + i < kc*MR values; direct: row min(i, mr - 1) < mr at
            // depth p < kc, both readable by the caller's contract.
            *x = unsafe {
                if DIRECT {
                    *t.a.wrapping_offset(
                        i.min(t.mr.max(1) - 1) as isize * t.ars + p as isize * t.acs,
                    )
                } else {
                    *t.a.add(p * MR + i)
                }
            };
        }
        for (row, &ai) in acc.iter_mut().zip(&ap) {
            for (x, &bj) in row.iter_mut().zip(bp) {
                *x = *x + ai * bj;
            }
        }
    }
    for (i, row) in acc.iter().enumerate().take(t.mr) {
        for (j, &y) in row.iter().enumerate().take(t.nr) {
            // SAFETY: i < mr and j < nr, inside the caller's block.
            unsafe {
                let p = t.c.add(i * t.ldc + j);
                *p = if t.first { y } else { *p + y };
            }
        }
    }
}

/// The [`Stamps`] of SIMD kernel `$k`, whose MR is `$mr` and whose vectors hold `$lanes`; with
/// `$half`, a kernel of the same MR whose one vector holds `$lanes / 2`, for the narrowest
/// edges.
#[cfg(target_arch = "x86_64")]
macro_rules! stamps {
    ($k:path, $mr:literal, $lanes:literal) => {
        stamps!($k, $mr, $lanes, $k, $lanes)
    };
    ($k:path, $mr:literal, $lanes:literal, half $h:path) => {
        stamps!($k, $mr, $lanes, $h, $lanes / 2)
    };
    ($k:path, $mr:literal, $lanes:literal, $h:path, $hl:expr) => {{
        use $h as h;
        use $k as k;
        const R1: usize = $mr / 3;
        const R2: usize = 2 * $mr / 3;
        Stamps {
            rows: [R1, R2, $mr],
            cols: [$hl, $lanes, 2 * $lanes],
            packed: [
                [h::<false, R1, 1>, k::<false, R1, 1>, k::<false, R1, 2>],
                [h::<false, R2, 1>, k::<false, R2, 1>, k::<false, R2, 2>],
                [h::<false, $mr, 1>, k::<false, $mr, 1>, k::<false, $mr, 2>],
            ],
            direct: [
                [h::<true, R1, 1>, k::<true, R1, 1>, k::<true, R1, 2>],
                [h::<true, R2, 1>, k::<true, R2, 1>, k::<true, R2, 2>],
                [h::<true, $mr, 1>, k::<true, $mr, 1>, k::<true, $mr, 2>],
            ],
        }
    }};
}

/// `Family` for `$t`: the AVX-512 kernels (12 rows, vectors of `$l` lanes, half vectors at the
/// narrowest edges), the AVX2 ones (6 rows, vectors of `$h` lanes) and the portable 4 x `$l`.
macro_rules! kernel_set {
    ($t:ty, $l:literal, $h:literal, $avx512:ident, $half:ident, $fused512:ident, $avx2:ident,
     $fused2:ident) => {
        impl Family for $t {
            fn kernels() -> KernelSet<$t> {
                KernelSet {
                    #[cfg(target_arch = "x86_64")]
                    avx512: SimdFamily {
                        mr: 12,
                        nr: 2 * $l,
                        stamps: stamps!(self::$avx512, 12, $l, half self::$half),
                        fused: $fused512,
                    },
                    #[cfg(target_arch = "x86_64")]
                    avx2: SimdFamily {
                        mr: 6,
                        nr: 2 * $h,
                        stamps: stamps!(self::$avx2, 6, $h),
                        fused: $fused2,
                    },
                    generic: GenericKernel {
                        mr: 4,
                        nr: $l,
                        packed: generic::<$t, 4, $l, false>,
                        direct: generic::<$t, 4, $l, true>,
                    },
                }
            }
        }
    };
}

kernel_set!(
    f32,
    16,
    8,
    avx512_f32,
    avx512_f32_half,
    avx512_f32_fused,
    avx2_f32,
    avx2_f32_fused
);
kernel_set!(
    f64,
    8,
    4,
    avx512_f64,
    avx512_f64_half,
    avx512_f64_fused,
    avx2_f64,
    avx2_f64_fused
);
