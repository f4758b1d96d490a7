//! Micro-kernels: `C[mr x nr] (=|+=) A_panel * B_panel` over `kc` steps of packed panels
//! (A: `MR` values per step, B: `NR` values per step, zero-padded past the matrix edge).
//! The AVX-512 and AVX2+FMA kernels are stamped from one macro, so the code that runs only on
//! AVX-512 machines is the same text as the code tested everywhere else; only the tile shape
//! and the intrinsics differ. The portable kernel is plain Rust that LLVM vectorises.

use super::gemm::Real;

/// A micro-kernel's operands. `a` holds `kc * MR` packed values; depth step `p` of B is the
/// `NR` values at `b + p * bs` (`bs` is `NR` for a packed panel, B's row stride when B is read
/// in place) (`P` is `T`, or a bf16 pair for the bf16 kernel); `c` points at the tile's
/// top-left element of a row-major matrix with row stride `ldc`, of which the kernel touches
/// `mr` rows and `nr` columns. `first` overwrites `c`, otherwise it accumulates. A direct
/// kernel (one that reads A unpacked) instead finds A's element (i, p) at
/// `a + i * ars + p * acs` for `i < mr`.
pub(crate) struct Tile<T, P = T> {
    pub kc: usize,
    pub a: *const P,
    pub ars: isize,
    pub acs: isize,
    pub b: *const P,
    pub bs: isize,
    pub c: *mut T,
    pub ldc: usize,
    pub first: bool,
    pub mr: usize,
    pub nr: usize,
    /// Null, or (only for a kernel whose `Gemm` says it narrows, on a product's last depth
    /// block) where the tile's final sums go as bf16 bits, at the same `ldc`, instead of `c`.
    pub narrow: *mut u16,
}

/// What a fusing kernel (`Gemm::fused`) needs to pack its B panel itself while it multiplies:
/// step `s` reads the `DEPTH` rows of B (1 for f32 and f64; 2 for bf16, which it pairs) from
/// byte `src + DEPTH * s * rs` on, each row `rs` bytes after the one before, `NR` source
/// values each (steps `s >= whole` read only their first row and take the others as zero),
/// and stores the step at `out + s * NR`, the panel the later row tiles then read.
pub(crate) struct Fuse<P> {
    pub src: *const u8,
    pub rs: isize,
    pub whole: usize,
    pub out: *mut P,
}

/// A kernel that packs its B panel as it goes (see [`Fuse`]); its tile's `b` and `bs` go
/// unread.
///
/// # Safety
/// As [`MicroKernel`] for `t.a`, `t.c` and `t.narrow`, with a full `NR`-wide tile; for every
/// step `s < t.kc`, the `NR` source values of each row that [`Fuse`] says step `s` reads are
/// valid for reads, and `f.out + s * NR` for writes of `NR` values that nothing else reads or
/// writes meanwhile.
pub(crate) type FusedKernel<T, P = T> = unsafe fn(&Tile<T, P>, &Fuse<P>);

/// # Safety
/// `t.a` is valid for reads of `kc * MR` values, `t.b + p * t.bs` of `NR` values for every
/// `p < kc` (for a direct kernel:
/// `t.a` is valid for reads at `a + i * ars + p * acs` for every `i < mr`, `p < kc`, and
/// `1 <= mr`); `t.c` is valid for reads and writes of `mr` rows of `nr` values at stride
/// `ldc`, with `mr <= MR`, `nr <= NR`; the CPU has the kernel's target features.
pub(crate) type MicroKernel<T, P = T> = unsafe fn(&Tile<T, P>);

/// Which micro-kernel family runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// AMX tiles for bf16 (32x32 micro-tile, `amx.rs`); f32 and f64 run the AVX-512 kernels.
    Amx,
    /// AVX-512F: f32 12x32, f64 12x16 tiles.
    Avx512,
    /// AVX2 + FMA: f32 6x16, f64 6x8 tiles.
    Avx2,
    /// Portable Rust: f32 4x16, f64 4x8 tiles.
    Generic,
}

impl Kernel {
    /// Every family, fastest first ([`Kernel::best`] takes the first one available).
    pub const ALL: [Kernel; 4] = [Kernel::Amx, Kernel::Avx512, Kernel::Avx2, Kernel::Generic];

    /// Whether this CPU (and, for AMX, the OS, which must grant the tile state) can run the
    /// family. Always false off x86-64 except for `Generic`.
    pub fn is_available(self) -> bool {
        match self {
            Kernel::Amx => super::amx::available(),
            #[cfg(target_arch = "x86_64")]
            // Its narrowest stampings are AVX2 + FMA code (every AVX-512 CPU has both).
            Kernel::Avx512 => {
                is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx2")
                    && is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
            Kernel::Generic => true,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The fastest kernel this CPU runs.
    pub fn best() -> Kernel {
        Kernel::ALL
            .into_iter()
            .find(|k| k.is_available())
            .unwrap_or(Kernel::Generic)
    }

    /// Whether the environment variable `REQUIRE_KERNELS` (comma-separated names as
    /// `QUILL_MATMUL_KERNEL` spells them, plus `avx512bf16` for the bf16 dot-product path)
    /// names this kernel: tests that would skip it on a CPU without it fail instead, so that
    /// a run on a machine meant to have it never passes by skipping (as `REQUIRE_CUDA=1` does
    /// for the GPU).
    pub fn required(self) -> bool {
        required(self.name())
    }

    /// The kernel's name as `QUILL_MATMUL_KERNEL` and `REQUIRE_KERNELS` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Amx => "amx",
            Kernel::Avx512 => "avx512",
            Kernel::Avx2 => "avx2",
            Kernel::Generic => "generic",
        }
    }

    /// The kernels this CPU runs, for test suites, each one it lacks noted on stderr; an
    /// error names one it lacks that `REQUIRE_KERNELS` asks for ([`Kernel::required`]).
    pub fn testable() -> Result<Vec<Kernel>, String> {
        let mut here = Vec::new();
        for k in Kernel::ALL {
            if k.is_available() {
                here.push(k);
            } else if k.required() {
                return Err(lacks(k.name()));
            } else {
                eprintln!("note: no {} here; that kernel is not exercised", k.name());
            }
        }
        Ok(here)
    }

    /// The kernel whose [`Kernel::name`] is `s`, ignoring ASCII case (how
    /// `QUILL_MATMUL_KERNEL` is read); `None` for any other string.
    pub fn parse(s: &str) -> Option<Kernel> {
        Kernel::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
    }
}

/// Whether `REQUIRE_KERNELS` names `name` (see [`Kernel::required`]).
fn required(name: &str) -> bool {
    std::env::var("REQUIRE_KERNELS")
        .is_ok_and(|v| v.split(',').any(|s| s.trim().eq_ignore_ascii_case(name)))
}

/// The failure of a run whose `REQUIRE_KERNELS` names `name`, which this CPU lacks.
fn lacks(name: &str) -> String {
    format!("REQUIRE_KERNELS names {name}; this CPU lacks it")
}

/// For a test about to skip the path `name` (as `REQUIRE_KERNELS` spells it) that this CPU
/// lacks: fails when `REQUIRE_KERNELS` names it, else notes `what` was not run.
#[cfg(test)]
pub(crate) fn skip(name: &str, what: &str) {
    assert!(!required(name), "{}", lacks(name));
    eprintln!("note: no {name} here; {what} not run");
}

/// Stamps a SIMD micro-kernel family: `R` rows (at most `$mr`, the packed A panel's height) by
/// `V` vectors (at most `$nv`) of `$lanes` lanes. Accumulators live in a fixed array that LLVM
/// keeps in registers (the loops have constant trip counts). The full `$mr` x `$nv` stamping
/// does the bulk; the shorter and narrower ones serve a matrix's last row tile and last column
/// panel (`gemm::Stamps`), so that 100 x 100 pays for 100 x 100 and not 108 x 128. Packed B is
/// read at stride `bs` whatever `V`, so every stamping shares one packing.
/// `DIRECT` reads A unpacked through its strides (rows past `mr` re-read row `mr - 1`, so the
/// loop keeps its constant shape without reading outside A; their sums are never stored).
/// With `fused $fused`, also the family's fusing kernel ([`FusedKernel`], full `$mr` rows):
/// B's steps read from B's rows and stored to the panel as they are used. Its loads and
/// stores then overlap the tile's FMAs instead of running as a packing pass of their own,
/// whose stores the kernel reloaded through L2 (on a Zen 4, AVX2 f32, one thread, that pass
/// had been 7 % of a 128 x 784 @ 784 x 512 product's samples, 1.65x OpenBLAS's B copy).
#[cfg(target_arch = "x86_64")]
macro_rules! simd_kernel {
    ($name:ident $(fused $fused:ident)?, $feat:literal, $t:ty, $mr:literal, $nv:literal,
     $lanes:literal, $zero:ident, $load:ident, $store:ident, $set1:ident, $fma:ident,
     $add:ident) => {
        /// # Safety
        /// See [`MicroKernel`], with `mr <= R <= MR` and `nr <= V * lanes`; the CPU must
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
        /// See [`FusedKernel`], with `t.nr == NR`; the CPU must support the features named in
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
        /// The contract of the kernel it serves: [`MicroKernel`], with `FUSE`
        /// [`FusedKernel`] for `*f` (then `R` and `V` are the full tile's).
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
            // row pointers already crowd the registers (unrolled, 64^3 ran 0.75-0.9x).
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
// The AVX-512 families' narrowest stampings (`gemm::Stamps`: an edge of at most 8 f32 or 4 f64
// columns): half vectors on the packed panels' MR of 12. Zen 4 runs a 512-bit FMA as two
// halves, one per cycle, and 256-bit ones two per cycle, so a 16-lane stamping for a 4-column
// edge did four times the work it needed, not twice.
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
/// See [`MicroKernel`].
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
