//! The BLIS loop nest for one product `C = A @ B` (C row-major, fresh): columns in blocks of NC,
//! depth in blocks of KC (B's KC x NC block packed once and shared by the threads), rows in
//! blocks of about MC (each thread packs its own MC x KC block of A), then NR-wide and MR-tall
//! micro-tiles. Block sizes come from the tile shape and the cache sizes read at run time
//! (`cache.rs`): a B micro-panel (KC x NR) fills half of L1d, and each row tile of the A block
//! (MC x KC, in L2) sweeps a run of as many panels as L1d holds (at least one) before the next
//! row tile starts, while the B block (KC x NC) stays in L3. KC is raised where the C tile is
//! large (AVX-512: 512 steps) and for AMX, which reads its tiles from L2 nearly as fast
//! (2048-deep blocks: `Gemm::for_steps`). When m is too small to give every thread row blocks,
//! or the product is at most about 645^3, or its B so narrow that the nest would not share its
//! packing, each thread takes a stripe of its own instead (one meeting per product): of rows
//! or of columns, whichever packs less (`Gemm::split`). One-thread products up to about 100^3
//! skip the nest: B is packed whole and a direct kernel reads A through its strides. Products
//! with few rows (up to 36) read a unit-stride B in place instead of packing it. A kernel that
//! narrows (bf16: AMX, `vdpbf16ps`) writes its last depth block's tiles straight to the bf16
//! result; C then only carries sums between depth blocks. A kernel with a fusing form
//! (`Gemm::fused`: AVX2 and AVX-512 f32 and f64, `vdpbf16ps`) packs B's panels itself on one
//! thread, as the first row tile multiplies them; with AVX2 also those of few rows' B.
//! The SIMD kernels come in shorter and narrower stampings (`Stamps`: thirds of MR, one or
//! two vectors) for a matrix's last row tile and column panel, so an edge costs about what it
//! computes, and threads' shares of rows need only be multiples of the shortest stamping.
//! This file holds the sizes, the kernel choice and the split between threads; the nest itself
//! is `gemm/nest.rs`, the unit tests `gemm/tests.rs`.

use super::active_kernel;
use super::cache::CacheSizes;
use super::kernels::{self, FusedKernel, Kernel, MicroKernel, Tile};
use super::pack::{Mat, Pack};
use crate::par;
use std::cell::Cell;
use std::ops::{Add, Mul};
use std::thread::LocalKey;

mod nest;

#[cfg(test)]
thread_local! {
    /// Row tiles run by a fusing kernel on this thread, for tests to see that it ran.
    pub(crate) static FUSED_TILES: Cell<usize> = const { Cell::new(0) };
}

/// The element types the GEMM computes in.
pub(crate) trait Real:
    bytemuck::Pod + Default + Send + Sync + Add<Output = Self> + Mul<Output = Self>
{
}
impl Real for f32 {}
impl Real for f64 {}

/// A micro-kernel and its block sizes. `T` is the output (and accumulator) type, `P` the
/// packed operand type: `T` itself, or `u32` bf16 pairs for the bf16 kernel.
#[derive(Clone, Copy)]
pub(crate) struct Gemm<T, P = T> {
    mr: usize,
    nr: usize,
    /// Depth per block, in depth values (a multiple of the packing's `DEPTH`).
    kc: usize,
    /// Depth values per packed step: the packing's `DEPTH` (1, or 2 for bf16 pairs).
    depth: usize,
    mc: usize,
    nc: usize,
    /// Bytes of packed B panels a row tile runs through before the next row tile starts (L1d's
    /// size); less than two panels means panel by panel, each down its column of row tiles.
    sweep: usize,
    kernel: MicroKernel<T, P>,
    /// The same kernel reading A unpacked, for products too small to repay packing A.
    direct: Option<MicroKernel<T, P>>,
    /// Shorter and narrower stampings of the kernel for a matrix's last row tile and column
    /// panel, so that a 64-row product's 4-row edge does not cost a whole 12-row tile.
    stamps: Option<Stamps<T, P>>,
    /// The kernel can round its last depth block's sums to bf16 and store them itself
    /// (`Tile::narrow`), so a bf16 product needs no separate pass over an f32 result.
    narrows: bool,
    /// The same kernel packing its B panel as it goes, for a one-thread product (or stripe)
    /// whose B its packing can read in place (`Pack::fuse_source`) with rows fewer than
    /// `fuse_below` bytes apart.
    fused: Option<FusedKernel<T, P>>,
    fuse_below: usize,
    /// Rows of A from which a one-thread product that would read B in place (`b_in_place`)
    /// has the fusing kernel pack it instead (`Gemm::fuses_few_rows`).
    fuse_rows: usize,
}

impl<T, P> Gemm<T, P> {
    /// A kernel with an `mr x nr` tile whose packed steps each cover `depth` depth values, with
    /// block sizes derived from this machine's caches.
    pub(crate) fn derived(kernel: MicroKernel<T, P>, mr: usize, nr: usize, depth: usize) -> Self {
        Self::for_caches(kernel, mr, nr, depth, CacheSizes::get())
    }

    /// The block sizes for caches `c` (the BLIS analytic model, simplified): a B micro-panel
    /// (KC x NR) fills half of L1d, leaving room for the A micro-panel and C tile streaming
    /// through; the A block (MC x KC) half of L2; the shared B block (KC x NC) a quarter of L3.
    /// A kernel call must also be long against its C tile's trip (loaded and stored once per
    /// call, its rows often in one L1 set): at least 32 steps per cache line of the tile. That
    /// lengthens only the AVX-512 tiles (24 lines each, 512 steps): on a 2-core Xeon (Emerald
    /// Rapids), one thread, f32 1024^3 ran 125 GFLOP/s at KC 192 and 142 at 512, while the AVX2
    /// kernel (6 lines) ran alike from 256 to 768. On a Zen 3 (32 KiB L1d, 512 KiB L2) this
    /// gives the hand-tuned AVX2 f32 sizes (KC 256, MC 252); on a Zen 4 (32 KiB, 1 MiB, as
    /// CPUID reports them) AVX-512 f32 gets KC 512, MC 252.
    pub(crate) fn for_caches(
        kernel: MicroKernel<T, P>,
        mr: usize,
        nr: usize,
        depth: usize,
        c: CacheSizes,
    ) -> Self {
        let l1 = c.l1d / 2 / (nr * size_of::<P>());
        let tile_lines = (mr * nr * size_of::<T>()).div_ceil(64);
        // A multiple of 16 steps: AMX tiles take 16 pairs at a time, so only a product's last
        // depth block is padded.
        let steps = (l1.max(32 * tile_lines) / 16 * 16).clamp(32, 512);
        Self::for_steps(kernel, mr, nr, depth, steps, c)
    }

    /// Depth blocks of `steps` packed steps whatever L1 holds (a kernel that streams both
    /// micro-panels from L2 and loses more to C's trips between depth blocks), the A and B
    /// blocks sized for them as in [`Gemm::for_caches`].
    pub(crate) fn for_steps(
        kernel: MicroKernel<T, P>,
        mr: usize,
        nr: usize,
        depth: usize,
        steps: usize,
        c: CacheSizes,
    ) -> Self {
        let sz = size_of::<P>();
        let mc = (c.l2 / 2 / (steps * sz) / mr * mr).clamp(mr, 1024 / mr * mr);
        let nc = (c.l3 / 4 / (steps * sz) / nr * nr).clamp(nr, 4096);
        Gemm {
            mr,
            nr,
            kc: steps * depth,
            depth,
            mc,
            nc,
            sweep: c.l1d,
            kernel,
            direct: None,
            stamps: None,
            narrows: false,
            fused: None,
            fuse_below: 0,
            fuse_rows: usize::MAX,
        }
    }

    /// This GEMM with `k` as its direct (unpacked-A) kernel.
    pub(crate) fn with_direct(self, k: MicroKernel<T, P>) -> Self {
        Gemm {
            direct: Some(k),
            ..self
        }
    }

    /// This GEMM with its kernel's edge stampings (`kernel` and `direct` become the full ones).
    pub(crate) fn with_stamps(self, stamps: Stamps<T, P>) -> Self {
        debug_assert!(stamps.rows[2] == self.mr && stamps.cols[2] == self.nr);
        Gemm {
            kernel: stamps.packed[2][2],
            direct: Some(stamps.direct[2][2]),
            stamps: Some(stamps),
            ..self
        }
    }

    /// The granule of a thread's share of rows: the shortest stamping's height, so that shares
    /// come out nearly equal (256 rows on 2 threads: 128 each, ten tiles and an 8-row edge,
    /// not 132 and 124), or MR without stampings.
    fn row_unit(&self) -> usize {
        self.stamps.as_ref().map_or(self.mr, |s| s.rows[0])
    }

    /// The kernel for an `mr x nr` tile: the smallest stamping that covers it, or `full` (the
    /// GEMM's packed or direct kernel) when there are no stampings.
    fn kernel_for(
        &self,
        full: MicroKernel<T, P>,
        direct: bool,
        mr: usize,
        nr: usize,
    ) -> MicroKernel<T, P> {
        let Some(s) = &self.stamps else {
            return full;
        };
        let (r, c) = s.index(mr, nr);
        if direct {
            s.direct[r][c]
        } else {
            s.packed[r][c]
        }
    }

    /// This GEMM with `k` as its fusing kernel (`Gemm::fused`), for B's rows fewer than
    /// `below` bytes apart, and for B that a product of at least `rows` rows would otherwise
    /// read in place (`usize::MAX`: never).
    pub(crate) fn with_fused(self, k: FusedKernel<T, P>, below: usize, rows: usize) -> Self {
        Gemm {
            fused: Some(k),
            fuse_below: below,
            fuse_rows: rows,
            ..self
        }
    }

    /// This GEMM without its fusing kernel, for tests to compare against.
    #[cfg(test)]
    pub(crate) fn without_fused(self) -> Self {
        Gemm {
            fused: None,
            ..self
        }
    }

    /// This GEMM, its kernel honouring `Tile::narrow`.
    pub(crate) fn with_narrow(self) -> Self {
        Gemm {
            narrows: true,
            ..self
        }
    }

    /// The micro-tile's width: columns of C per B panel.
    pub(crate) fn nr(&self) -> usize {
        self.nr
    }

    /// Whether [`Gemm::run_direct_a`] takes an f32 / f64 product with `n` columns.
    pub(crate) fn reads_a_direct(&self, n: usize) -> bool {
        self.direct.is_some() && n <= self.nc
    }

    /// Whether [`Gemm::run_narrow`] may be called.
    pub(crate) fn narrows(&self) -> bool {
        self.narrows
    }

    /// `[mr, nr, kc, mc, nc]`, for tests.
    #[cfg(test)]
    pub(crate) fn sizes(&self) -> [usize; 5] {
        [self.mr, self.nr, self.kc, self.mc, self.nc]
    }
}

/// A SIMD kernel stamped for thirds of its MR rows and for half a vector (where the family has
/// a half-width stamping, else one vector again), one vector and both of its two vectors of
/// columns (`kernels::simd_kernel`): `packed[r][c]` computes `rows[r]` x `cols[c]` tiles.
#[derive(Clone, Copy)]
pub(crate) struct Stamps<T, P> {
    rows: [usize; 3],
    cols: [usize; 3],
    packed: [[MicroKernel<T, P>; 3]; 3],
    direct: [[MicroKernel<T, P>; 3]; 3],
}

impl<T, P> Stamps<T, P> {
    /// Which stamping (`[rows][columns]`) serves an `mr x nr` tile: the smallest that covers it.
    fn index(&self, mr: usize, nr: usize) -> (usize, usize) {
        let r = self.rows.iter().position(|&r| mr <= r).unwrap_or(2);
        let c = self.cols.iter().position(|&c| nr <= c).unwrap_or(2);
        (r, c)
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

/// Rows from which the AVX2 kernels (6-row tiles) pack a few-row product's B as the first row
/// tile multiplies instead of reading it in place (`Gemm::fuses_few_rows`): three row tiles.
/// One and two (8 and 12 rows) ran 1.01x.
#[cfg(target_arch = "x86_64")]
const AVX2_FUSE_ROWS: usize = 2 * 6 + 1;

/// The f32 GEMM for the active kernel.
pub(crate) fn select_f32() -> Gemm<f32> {
    match active_kernel() {
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 | Kernel::Amx => {
            Gemm::derived(kernels::avx512_f32::<false, 12, 2>, 12, 32, 1)
                .with_stamps(stamps!(
                    kernels::avx512_f32,
                    12,
                    16,
                    half kernels::avx512_f32_half
                ))
                // Few rows keep reading B in place: 30 to 36 rows packed by the fusing
                // kernel ran 0.98-1.05x (Zen 4, one and two threads, k 512 to 784).
                .with_fused(kernels::avx512_f32_fused, usize::MAX, usize::MAX)
        }
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => Gemm::derived(kernels::avx2_f32::<false, 6, 2>, 6, 16, 1)
            .with_stamps(stamps!(kernels::avx2_f32, 6, 8))
            // Rows a page or more apart defeat the prefetchers; from them the fusing
            // kernel's 12 FMAs a step could not hide its loads of B (on a Zen 4, one thread,
            // 64 x 1024 @ 1024 x 1024 ran 0.95x, 1024^3 0.97x), where `pack_b_block`'s row
            // groups read B at full speed. AVX-512's 24 a step hid them (1.00-1.09x).
            .with_fused(
                kernels::avx2_f32_fused,
                super::pack::ROW_GROUP_STRIDE,
                AVX2_FUSE_ROWS,
            ),
        _ => Gemm::derived(kernels::generic::<f32, 4, 16, false>, 4, 16, 1)
            .with_direct(kernels::generic::<f32, 4, 16, true>),
    }
}

/// The f64 GEMM for the active kernel.
pub(crate) fn select_f64() -> Gemm<f64> {
    match active_kernel() {
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 | Kernel::Amx => {
            Gemm::derived(kernels::avx512_f64::<false, 12, 2>, 12, 16, 1)
                .with_stamps(stamps!(
                    kernels::avx512_f64,
                    12,
                    8,
                    half kernels::avx512_f64_half
                ))
                // As for f32. Zen 4, two threads, against packing first (two runs):
                // 32 x 512 @ 512 x 512 (rows a page apart, packed) 1.23-1.29x,
                // 1024 x 128 @ 128 x 384 1.08-1.16x, 256^3 1.05-1.07x; few rows read in
                // place: fused, 13 to 36 rows ran 0.91-1.01x.
                .with_fused(kernels::avx512_f64_fused, usize::MAX, usize::MAX)
        }
        // The fusing limits of f32's 6 x 16 tile, whose steps load as many bytes of B for as
        // many FMAs. Zen 4, against packing first (two runs, two threads): 1024 x 128 @
        // 128 x 384 1.02-1.13x, 256^3 1.04-1.06x; rows 4 KiB or more apart fused 0.94-0.97x
        // (one thread); 13 to 36 rows fused instead of read in place 1.00-1.16x (one thread).
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => Gemm::derived(kernels::avx2_f64::<false, 6, 2>, 6, 8, 1)
            .with_stamps(stamps!(kernels::avx2_f64, 6, 4))
            .with_fused(
                kernels::avx2_f64_fused,
                super::pack::ROW_GROUP_STRIDE,
                AVX2_FUSE_ROWS,
            ),
        _ => Gemm::derived(kernels::generic::<f64, 4, 8, false>, 4, 8, 1)
            .with_direct(kernels::generic::<f64, 4, 8, true>),
    }
}

thread_local! {
    static PACK_A: Cell<Vec<f64>> = const { Cell::new(Vec::new()) };
    static PACK_B: Cell<Vec<f64>> = const { Cell::new(Vec::new()) };
}

/// Multiply-adds up to which a one-thread product, or one thread's stripe of a product, skips
/// packing A (about a 100^3 product: A then sits in L1 or L2 and each of its values is used by
/// few B panels, so a copy would not pay). On a Xeon (Emerald Rapids), one thread, raising
/// this from 2^18 made 72^3 to 100^3 and 1000 x 32 x 32 1.08-1.5x faster.
const DIRECT_WORK: usize = 1 << 20;

/// Above this many multiply-adds a product whose B the nest would read in place
/// (`Gemm::b_in_place`: few rows) takes the nest instead of the direct path, which packs all
/// of B: 16 x 256 x 256 ran 0.85x through the direct path.
const DIRECT_FEW_ROWS_WORK: usize = 1 << 18;

/// Multiply-adds up to which a product on several threads is split into stripes (of rows or
/// columns) whatever its shape (about 645^3). A stripe of rows packs all of B on every thread,
/// which only a larger product's nest repays with its shared packing, against two meetings
/// per depth block. The cut was 2^26 while 512^3 ran 1.07-1.12x faster in the nest; once row
/// tiles swept runs of B panels (`Block::rows`), stripes ran faster up to here. On a Zen 4, 2
/// threads, medians of 21 rounds, 2^28 against 2^26: AVX2 kernel 1.02-1.04x at 512^3,
/// 1.02-1.06x at 256 x 784 x 512, 1.01-1.03x at 512 x 784 x 512, 1.06-1.15x at
/// 128 x 784 x 1024; AVX-512 f32 1.00-1.06x at those shapes, bf16 1.22-1.33x at
/// 128 x 784 x 1024 but 0.96-0.97x at 512 x 784 x 512. Above it (768^3, 1024 x 1024 x 512,
/// 1024^3, 1536^3) stripes ran 0.99-1.02x against the nest, a wash.
const STRIPE_WORK: usize = 1 << 28;

/// Values in a depth block of B above which the nest's threads share its packing
/// ([`shares_b_pack`]): a smaller one costs less to pack on one thread than a meeting of all.
/// A large product with so narrow a B takes stripes of rows instead (`Gemm::split`), each
/// thread packing all of B rather than waiting twice per depth block. On a Zen 4, 2 threads,
/// AVX2 kernel (KC 256), rows ran 1.00-1.04x against the nest at m x k x n = 1024 x 784 x 128,
/// 2048 x 1024 x 64, 2048 x 1024 x 128 and 4096 x 512 x 128 (medians of 21 rounds); with
/// AVX-512 (KC 512) the n = 128 shapes, whose depth blocks hold 64 Ki values, ran 0.99x and
/// n = 64 and 32 ran 1.02x, so the cut stays where the nest stops sharing the packing.
const SHARED_B_PACK: usize = 1 << 15;

/// Whether the nest's threads share the packing of a kc x nc block of B.
fn shares_b_pack(kc: usize, nc: usize) -> bool {
    kc * nc > SHARED_B_PACK
}

/// Rows of A up to which a product reads a unit-stride f32 / f64 B in place (see
/// `Gemm::b_in_place`). Measured on a 2-core Xeon (Emerald Rapids), 2 threads, B 512 x 512:
/// 24 to 36 rows ran 1.2-1.4x faster in place with either kernel; from 48 rows (4 AVX-512 or
/// 8 AVX2 tiles per panel) packing was as fast or faster. A kernel that packs B as it
/// multiplies changes that from fewer rows (`Gemm::fuses_few_rows`).
const IN_PLACE_ROWS: usize = 36;
/// B's rows are not read in place when they lie a multiple of this many bytes apart.
const ALIASING_STRIDE: usize = 4096;

/// Scratch larger than this is freed after use instead of kept for the thread's next call.
const KEEP_BYTES: usize = 16 << 20;

/// Runs `f` on a 64-byte aligned scratch slice of `len` values, reusing this thread's buffer.
/// The buffer is taken out of its cell while in use, so a nested call (rayon may run another
/// task here while this one waits) gets a fresh one instead of aliasing it.
pub(crate) fn with_scratch<T: bytemuck::Pod, R>(
    key: &'static LocalKey<Cell<Vec<f64>>>,
    len: usize,
    f: impl FnOnce(&mut [T]) -> R,
) -> R {
    let words = (len * size_of::<T>()).div_ceil(8) + 8;
    let mut v = key.with(Cell::take);
    if v.len() < words {
        v = vec![0.0; words];
    }
    let start = v.as_ptr().align_offset(64).min(8);
    let r = f(&mut bytemuck::cast_slice_mut(&mut v[start..start + words - 8])[..len]);
    if words * 8 <= KEEP_BYTES {
        key.with(|c| c.set(v));
    }
    r
}

/// Handles a product with no work: checks that `c` is m x n, zeroes it for an empty depth
/// (unless adding) and returns true when nothing is left to compute.
fn empty_product<T: Real>([m, n, k]: [usize; 3], c: &mut [T], add: bool) -> bool {
    assert_eq!(c.len(), m * n, "gemm: output buffer does not match m x n");
    if m == 0 || n == 0 {
        return true;
    }
    if k == 0 && !add {
        c.fill(T::default());
    }
    k == 0
}

/// Where C lives: element (i, j) at `ptr + i * ldc + j`. Shared between threads that each
/// write their own row blocks or column stripes, never the same element.
#[derive(Clone, Copy)]
struct Out<T> {
    ptr: *mut T,
    ldc: usize,
    /// Add the product to what C holds instead of overwriting it.
    add: bool,
    /// Null, or the bf16 bits of an m x n result at the same `ldc`: the final sums go there
    /// and C serves only as the accumulator between depth blocks.
    narrow: *mut u16,
}

// SAFETY: an `Out` points into a slice that `Gemm::run` borrows mutably for as long as any copy
// lives, and the threads given copies write disjoint sets of elements (see `run` and `nest`).
unsafe impl<T: Send> Send for Out<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Out<T> {}

impl<T: Copy> Out<T> {
    fn at(self, i: usize, j: usize) -> *mut T {
        self.ptr.wrapping_add(i * self.ldc + j)
    }
    /// The block whose (0, 0) is element (i, j).
    fn shifted(self, i: usize, j: usize) -> Self {
        Out {
            ptr: self.at(i, j),
            narrow: self.narrow_at(i, j),
            ..self
        }
    }
    /// Where element (i, j)'s bf16 result goes (null when there is no narrow output).
    fn narrow_at(self, i: usize, j: usize) -> *mut u16 {
        if self.narrow.is_null() {
            self.narrow
        } else {
            self.narrow.wrapping_add(i * self.ldc + j)
        }
    }
}

impl<T: Real, P: bytemuck::Pod + Send + Sync> Gemm<T, P> {
    /// `c = a @ b` with `a` m x k, `b` k x n, `c` the m x n row-major slice (fully overwritten),
    /// on up to `threads` threads. Every element's sum runs in the same order whatever the
    /// thread count and split, so results are deterministic.
    pub(crate) fn run<SA: Pack<P>, SB: Pack<P>>(
        &self,
        mnk: [usize; 3],
        a: &Mat<SA>,
        b: &Mat<SB>,
        c: &mut [T],
        threads: usize,
    ) {
        self.run_into(mnk, a, b, c, threads, false)
    }

    /// `narrow = bf16(a @ b)`, rounded by the kernel as each tile finishes (the caller
    /// checked [`Gemm::narrows`]); `c` (m x n, contents ignored) holds the f32 sums between
    /// depth blocks.
    pub(crate) fn run_narrow<SA: Pack<P>, SB: Pack<P>>(
        &self,
        mnk: [usize; 3],
        a: &Mat<SA>,
        b: &Mat<SB>,
        c: &mut [T],
        narrow: &mut [u16],
        threads: usize,
    ) {
        assert!(self.narrows, "gemm: this kernel cannot narrow its output");
        assert_eq!(
            narrow.len(),
            c.len(),
            "gemm: narrow output does not match m x n"
        );
        if mnk[2] == 0 {
            narrow.fill(0);
            return;
        }
        self.run_out(mnk, a, b, c, threads, false, narrow.as_mut_ptr())
    }

    /// As [`Gemm::run`], but with `add` the product is added to what `c` holds (a sum of
    /// products, such as a weight gradient over samples, then needs no scratch product and no
    /// separate add).
    pub(crate) fn run_into<SA: Pack<P>, SB: Pack<P>>(
        &self,
        [m, n, k]: [usize; 3],
        a: &Mat<SA>,
        b: &Mat<SB>,
        c: &mut [T],
        threads: usize,
        add: bool,
    ) {
        self.run_out([m, n, k], a, b, c, threads, add, std::ptr::null_mut())
    }

    /// `run_into`, with an optional narrow output (`run_narrow` checked it has `c.len()`
    /// elements and that k > 0).
    #[allow(clippy::too_many_arguments)]
    fn run_out<SA: Pack<P>, SB: Pack<P>>(
        &self,
        [m, n, k]: [usize; 3],
        a: &Mat<SA>,
        b: &Mat<SB>,
        c: &mut [T],
        threads: usize,
        add: bool,
        narrow: *mut u16,
    ) {
        if empty_product([m, n, k], c, add) {
            return;
        }
        let out = Out {
            ptr: c.as_mut_ptr(),
            ldc: n,
            add,
            narrow,
        };
        if threads <= 1 {
            return self.one_thread([m, n, k], a, b, out);
        }
        let costs = [SA::pack_cost(a.rs, a.cs), SB::pack_cost(b.cs, b.rs)];
        match self.split([m, n, k], costs, threads) {
            Split::Rows(per) => par::for_each(threads, threads, |s| {
                let i0 = s * per;
                if i0 < m {
                    let h = per.min(m - i0);
                    self.one_thread([h, n, k], &a.shifted(i0, 0), b, out.shifted(i0, 0));
                }
            }),
            Split::Columns(stripes, per) => par::for_each(stripes, threads, |s| {
                let j0 = s * per;
                if j0 < n {
                    let w = per.min(n - j0);
                    self.one_thread([m, w, k], a, &b.shifted(0, j0), out.shifted(0, j0));
                }
            }),
            Split::Blocks => self.nest([m, n, k], a, b, out, threads),
        }
    }

    /// An m x n x k product (or a thread's stripe of one) on this thread: small ones read A
    /// in place (`unpacked_a`), the rest take the loop nest.
    fn one_thread<SA: Pack<P>, SB: Pack<P>>(
        &self,
        [m, n, k]: [usize; 3],
        a: &Mat<SA>,
        b: &Mat<SB>,
        out: Out<T>,
    ) {
        let work = m * n * k;
        if work <= DIRECT_WORK
            && k <= self.kc
            && n <= self.nc
            && (work <= DIRECT_FEW_ROWS_WORK || self.b_in_place(m, [k, n], b).is_none())
        {
            if let (Some(kernel), Some(ad)) = (self.direct, SA::direct(a.data)) {
                return self.unpacked_a(kernel, [m, n, k], a, ad, b, out);
            }
        }
        self.nest([m, n, k], a, b, out, 1)
    }

    /// How `threads` threads share an m x n x k product whose operands cost `[a, b]` per value
    /// to pack (`Pack::pack_cost`).
    ///
    /// A product small enough that meeting once per depth block (and again to pack B) costs
    /// more than packing one operand once per thread gives each thread a stripe of its own, and
    /// the threads meet once. A stripe of rows packs its rows of A and the whole of B, a stripe
    /// of columns the reverse; the split that packs less per thread wins. Rows need at least
    /// four row tiles per thread to balance; with fewer, even a large product takes columns.
    /// A large product whose B is narrow (`SHARED_B_PACK`) may still take rows.
    fn split(&self, [m, n, k]: [usize; 3], [ca, cb]: [usize; 2], threads: usize) -> Split {
        let (panels, tiles, t) = (n.div_ceil(self.nr), m.div_ceil(self.mr), threads);
        let small = m * n * k <= STRIPE_WORK;
        // The nest's first (and deepest) depth block of B, which it would pack on one thread.
        let narrow_b = !shares_b_pack(self.nest_step(k).min(k), n);
        if t > 1
            && (small || narrow_b)
            && tiles >= 4 * t
            && ca * m * k / t + cb * k * n < ca * m * k + cb * k * n / t
        {
            return Split::Rows(m.div_ceil(t).next_multiple_of(self.row_unit()));
        }
        if t > 1 && (tiles < 4 * t || small) && panels >= 2 {
            let stripes = t.min(panels);
            return Split::Columns(stripes, panels.div_ceil(stripes) * self.nr);
        }
        Split::Blocks
    }

    /// `c (+)= a @ b` on one thread with A read in place by the direct kernel whatever the
    /// product's size, B packed whole once per depth block (blocks of equal depth, at most
    /// KC); `false` (nothing done) when this GEMM has no direct kernel, A's type needs
    /// converting or n exceeds a column block. For callers whose A is laid out so that packing
    /// it would only copy it (a convolution's column matrix, read as its transpose or as rows
    /// that stay in L1 over one depth block).
    pub(crate) fn run_direct_a<SA: Pack<P>, SB: Pack<P>>(
        &self,
        [m, n, k]: [usize; 3],
        a: &Mat<SA>,
        b: &Mat<SB>,
        c: &mut [T],
        add: bool,
    ) -> bool {
        let (Some(kernel), Some(ad)) = (self.direct, SA::direct(a.data)) else {
            return false;
        };
        if n > self.nc || SA::DEPTH != 1 {
            return false;
        }
        if !empty_product([m, n, k], c, add) {
            let out = Out {
                ptr: c.as_mut_ptr(),
                ldc: n,
                add,
                narrow: std::ptr::null_mut(),
            };
            self.unpacked_a(kernel, [m, n, k], a, ad, b, out);
        }
        true
    }

    /// A product that skips the loop nest (one column block): A read in place by the direct
    /// kernel `kernel` (`ad` is `a.data` as `P`), B packed whole once per depth block (blocks
    /// of equal depth, [`Gemm::depth_step`]).
    fn unpacked_a<SA: Pack<P>, SB: Pack<P>>(
        &self,
        kernel: MicroKernel<T, P>,
        [m, n, k]: [usize; 3],
        a: &Mat<SA>,
        ad: &[P],
        b: &Mat<SB>,
        out: Out<T>,
    ) {
        let step = self.depth_step(k, 1);
        for pc in (0..k).step_by(step) {
            let block = Out {
                add: out.add || pc > 0,
                ..out
            };
            let (ak, bk) = (a.shifted(0, pc), b.shifted(pc, 0));
            self.unpacked_block(kernel, [m, n, step.min(k - pc)], &ak, ad, &bk, block);
        }
    }

    /// The depth of a product's blocks: as equal as multiples of `unit` allow, at most KC
    /// (with KC 512, 600 deep runs as 304 + 296, not 512 + 88, whose thin block would still
    /// sweep all of C).
    fn depth_step(&self, k: usize, unit: usize) -> usize {
        k.div_ceil(k.div_ceil(self.kc))
            .next_multiple_of(unit)
            .min(self.kc)
    }

    /// The depth of the nest's blocks: whole AMX tiles (16 packed steps) in every block but
    /// the last.
    fn nest_step(&self, k: usize) -> usize {
        self.depth_step(k, 16 * self.depth)
    }

    /// The depth blocks the loop nest splits a depth of `k` into, for tests to count tiles by.
    #[cfg(test)]
    pub(crate) fn depth_blocks(&self, k: usize) -> usize {
        k.div_ceil(self.nest_step(k))
    }

    /// One depth block (at most KC) of [`Gemm::unpacked_a`].
    fn unpacked_block<SA: Pack<P>, SB: Pack<P>>(
        &self,
        kernel: MicroKernel<T, P>,
        [m, n, k]: [usize; 3],
        a: &Mat<SA>,
        ad: &[P],
        b: &Mat<SB>,
        out: Out<T>,
    ) {
        let (mr, nr) = (self.mr, self.nr);
        debug_assert!(SA::DEPTH == 1 && k <= self.kc && n <= self.nc && m > 0);
        // A layout that passed its checks always lies in its buffer (`ad` is A's buffer).
        assert!(
            ad.len() == a.data.len() && a.holds([0, 0], [m, k]),
            "gemm: A's strides leave its buffer"
        );
        // A row-major B's full panels are read where they lie, only a partial last one is
        // packed: the whole product sits in L2 and a copy of B would only be read again.
        let in_place = self.b_readable([k, n], b);
        let whole = in_place.map_or(0, |_| n / nr * nr);
        let panel_len = k * nr;
        with_scratch(
            &PACK_B,
            (n - whole).div_ceil(nr) * panel_len,
            |bp: &mut [P]| {
                SB::pack_b_block(bp, b, 0, k, whole, n - whole, nr);
                for ir in (0..m).step_by(mr) {
                    // A pointer of the whole slice, since negative strides reach below row ir.
                    let arow = ad.as_ptr().wrapping_offset(a.at_signed(ir, 0));
                    for jr in (0..n).step_by(nr) {
                        let (bptr, bs) = match in_place {
                            // Derived from the whole buffer: a negative row stride reaches below.
                            Some(data) if jr < whole => {
                                (data.as_ptr().wrapping_offset(b.at_signed(0, jr)), b.rs)
                            }
                            _ => (bp[(jr - whole) / nr * panel_len..].as_ptr(), nr as isize),
                        };
                        let t = Tile {
                            kc: k,
                            a: arow,
                            ars: a.rs,
                            acs: a.cs,
                            b: bptr,
                            bs,
                            c: out.at(ir, jr),
                            ldc: out.ldc,
                            first: !out.add,
                            mr: mr.min(m - ir),
                            nr: nr.min(n - jr),
                            narrow: out.narrow_at(ir, jr),
                        };
                        // SAFETY: B's step p is NR values at `bptr + p * bs`: a packed panel of
                        // k*NR values, or for jr < whole elements (p, jr + j), j < NR, all inside
                        // the k x n matrix (jr + NR <= whole <= n), whose corners `b_readable`
                        // checked lie in the buffer (f32 / f64, DEPTH 1). A's elements (ir + i, p)
                        // for i < mr, p < k lie in `ad` (the corners checked above) and `arow`,
                        // derived from the whole of `ad`, points at (ir, 0). The tile
                        // covers rows ir.. < m and columns jr.. < n of the m x n block at `out`,
                        // which `run` borrows mutably. The kernel was chosen for this CPU, and
                        // `kernel_for` picks a stamping that covers mr x nr.
                        unsafe { self.kernel_for(kernel, true, t.mr, t.nr)(&t) };
                    }
                }
            },
        )
    }

    /// B's values, when the kernels should read B where it lies instead of packing it: f32 or
    /// f64 with unit column stride, and at most `IN_PLACE_ROWS` rows of A, so that each B
    /// panel serves too few micro-tiles to repay its copy (a 32 x 512 @ 512 x 512 product
    /// spent a fifth of its time packing B).
    fn b_in_place<'b, SB: Pack<P>>(
        &self,
        m: usize,
        [k, n]: [usize; 2],
        b: &Mat<'b, SB>,
    ) -> Option<&'b [P]> {
        if m > IN_PLACE_ROWS {
            return None;
        }
        self.b_readable([k, n], b)
    }

    /// Whether a one-thread product of `m` rows whose B `b_in_place` would have read where it
    /// lies has the fusing kernel pack B's panels instead: from `fuse_rows` rows, where B's
    /// rows are near enough for it (`fuse_below`). Read in place, each row tile streams its
    /// panel's rows from L2 again; packed as the first tile multiplies, the others read one
    /// contiguous panel. On a Zen 4 with the AVX2 kernel, against reading in place (medians
    /// of 11 rounds): 13 to 32 rows, k 128 to 1000, n 256 to 2000, ran 0.99-1.26x (most
    /// 1.05-1.2x) on one and two threads, 36 rows 0.95-1.12x from run to run; 8 and 12 rows
    /// (one and two tiles) 1.01x.
    pub(super) fn fuses_few_rows<SB: Pack<P>>(
        &self,
        m: usize,
        [k, n]: [usize; 2],
        b: &Mat<SB>,
    ) -> bool {
        m >= self.fuse_rows
            && self
                .fuse_source(b, [0, k, 0, n / self.nr * self.nr])
                .is_some()
    }

    /// Where the fusing kernel reads a block of B (`Pack::fuse_source`: element (p0, j0) and
    /// the row stride in bytes), when this GEMM has one and B's rows are fewer than
    /// `fuse_below` bytes apart.
    pub(super) fn fuse_source<SB: Pack<P>>(
        &self,
        b: &Mat<SB>,
        block: [usize; 4],
    ) -> Option<(*const u8, isize)> {
        self.fused?;
        SB::fuse_source(b, block).filter(|&(_, rs)| rs.unsigned_abs() < self.fuse_below)
    }

    /// B's values when the kernels can read its full panels where they lie: f32 or f64 with
    /// unit column stride, at least one full panel wide, its k x n box inside the buffer.
    fn b_readable<'b, SB: Pack<P>>(&self, [k, n]: [usize; 2], b: &Mat<'b, SB>) -> Option<&'b [P]> {
        if b.cs != 1 || n < self.nr || k == 0 {
            return None;
        }
        // Rows a multiple of a page apart map a panel's column onto a few cache sets, too few
        // to hold its depth: read in place, 32 x 512 @ 512 x 1024 ran 1.8x slower than packed
        // (8 to 48 rows, 1024 or 2048 columns: 1.4-1.9x; 1000 columns read in place as fast).
        let row_bytes = b.rs.unsigned_abs() * size_of::<P>();
        if k > 1 && row_bytes != 0 && row_bytes.is_multiple_of(ALIASING_STRIDE) {
            return None;
        }
        let data = SB::direct(b.data)?;
        // A layout that passed its checks always lies in its buffer.
        b.holds([0, 0], [k, n]).then_some(data)
    }
}

/// How a product's threads share it (`Gemm::split`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Split {
    /// One stripe of this many rows per thread.
    Rows(usize),
    /// This many stripes of this many columns.
    Columns(usize, usize),
    /// The loop nest's row blocks, B packed by all threads together per depth block.
    Blocks,
}

#[cfg(test)]
mod tests;
