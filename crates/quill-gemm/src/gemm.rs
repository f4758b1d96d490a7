//! The BLIS loop nest for one product `C = A @ B` (C row-major, fresh): columns in blocks of NC,
//! depth in blocks of KC (B's KC x NC block packed once and shared by the threads), rows in
//! blocks of about MC (each thread packs its own MC x KC block of A), then NR-wide and MR-tall
//! micro-tiles. Block sizes come from the tile shape and the cache sizes read at run time
//! (`cache.rs`): a B micro-panel (KC x NR) fills half of L1d, and each row tile of the A block
//! (MC x KC, in L2) sweeps a run of as many panels as L1d holds (at least one) before the next
//! row tile starts, while the B block (KC x NC) stays in L3. KC is raised where the C tile is
//! large (AVX-512: 512 steps) and for AMX, which reads its tiles from L2 nearly as fast
//! (2048-deep blocks: `Gemm::for_steps`); the numbers behind these choices are `tuning.rs`'s
//! data. When m is too small to give every thread row blocks,
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
//! This file holds the sizes and the split between threads; the kernel choice is `select.rs`,
//! the nest itself `gemm/nest.rs`, the paths reading an operand in place `gemm/direct.rs`, the
//! unit tests `gemm/tests.rs`.

use crate::cache::CacheSizes;
use crate::tuning::{
    Depth, Tuning, ALIASING_STRIDE, DIRECT_FEW_ROWS_WORK, DIRECT_WORK, IN_PLACE_ROWS, MAX_STEPS,
    SHARED_B_PACK, STEPS_PER_C_LINE, STRIPE_WORK,
};
use crate::types::{FusedKernel, Mat, MicroKernel, Pack, Real, Stamps, Tile};
use quill_par as par;
use std::cell::Cell;
use std::thread::LocalKey;

mod direct;
mod nest;

#[cfg(test)]
thread_local! {
    /// Row tiles run by a fusing kernel on this thread, for tests to see that it ran.
    pub(crate) static FUSED_TILES: Cell<usize> = const { Cell::new(0) };
}

/// A micro-kernel and its block sizes: one GEMM, ready to run products. `T` is the output (and
/// accumulator) type, `P` the packed operand type: `T` itself, or bf16 pairs for the bf16
/// kernels. [`select`](crate::select) gives the one for this CPU and the active kernel family.
#[derive(Clone, Copy)]
pub struct Gemm<T, P = T> {
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
    /// The block sizes for caches `c` (the BLIS analytic model, simplified): a B micro-panel
    /// (KC x NR) fills half of L1d, leaving room for the A micro-panel and C tile streaming
    /// through; the A block (MC x KC) half of L2; the shared B block (KC x NC) a quarter of L3.
    /// A kernel call must also be long against its C tile's trip (loaded and stored once per
    /// call, its rows often in one L1 set): at least `STEPS_PER_C_LINE` steps per cache line
    /// of the tile, at most `MAX_STEPS` (`tuning.rs`). On a Zen 3 (32 KiB L1d, 512 KiB L2) this
    /// gives AVX2 f32 KC 256, MC 252; on a Zen 4 (32 KiB, 1 MiB) AVX-512 f32 KC 512, MC 252.
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
        let steps = (l1.max(STEPS_PER_C_LINE * tile_lines) / 16 * 16).clamp(32, MAX_STEPS);
        Self::for_steps(kernel, mr, nr, depth, steps, c)
    }

    /// The GEMM of a kernel with an `mr x nr` tile (packed steps of `depth` depth values) for
    /// caches `c`, its depth blocks as tuning row `t` says.
    pub(crate) fn tuned(
        kernel: MicroKernel<T, P>,
        [mr, nr, depth]: [usize; 3],
        t: &Tuning,
        c: CacheSizes,
    ) -> Self {
        match t.depth {
            Depth::Caches => Self::for_caches(kernel, mr, nr, depth, c),
            Depth::Steps(steps) => Self::for_steps(kernel, mr, nr, depth, steps, c),
        }
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
    pub fn nr(&self) -> usize {
        self.nr
    }

    /// Whether [`Gemm::run_direct_a`] takes an f32 / f64 product with `n` columns.
    pub fn reads_a_direct(&self, n: usize) -> bool {
        self.direct.is_some() && n <= self.nc
    }

    /// Whether the kernel rounds a bf16 product's results itself (`Gemm::run_narrow`).
    pub fn narrows(&self) -> bool {
        self.narrows
    }

    /// `[mr, nr, kc, mc, nc]`, for tests.
    #[cfg(test)]
    pub(crate) fn sizes(&self) -> [usize; 5] {
        [self.mr, self.nr, self.kc, self.mc, self.nc]
    }
}

thread_local! {
    static PACK_A: Cell<Vec<f64>> = const { Cell::new(Vec::new()) };
    static PACK_B: Cell<Vec<f64>> = const { Cell::new(Vec::new()) };
}

/// Whether the nest's threads share the packing of a kc x nc block of B.
fn shares_b_pack(kc: usize, nc: usize) -> bool {
    kc * nc > SHARED_B_PACK
}

/// Scratch larger than this is freed after use instead of kept for the thread's next call.
const KEEP_BYTES: usize = 16 << 20;

/// Runs `f` on a 64-byte aligned scratch slice of `len` values, reusing this thread's buffer.
/// The buffer is taken out of its cell while in use, so a nested call (rayon may run another
/// task here while this one waits) gets a fresh one instead of aliasing it. The buffer is
/// reused, so `f` finds whatever an earlier call left there.
pub fn with_scratch<T: bytemuck::Pod, R>(
    key: &'static LocalKey<Cell<Vec<f64>>>,
    len: usize,
    f: impl FnOnce(&mut [T]) -> R,
) -> R {
    with_scratch_kept(key, len, KEEP_BYTES, f)
}

/// [`with_scratch`], keeping a buffer of up to `keep` bytes for the thread's next call.
pub(crate) fn with_scratch_kept<T: bytemuck::Pod, R>(
    key: &'static LocalKey<Cell<Vec<f64>>>,
    len: usize,
    keep: usize,
    f: impl FnOnce(&mut [T]) -> R,
) -> R {
    let words = (len * size_of::<T>()).div_ceil(8) + 8;
    let mut v = key.with(Cell::take);
    if v.len() < words {
        v = vec![0.0; words];
    }
    let start = v.as_ptr().align_offset(64).min(8);
    let r = f(&mut bytemuck::cast_slice_mut(&mut v[start..start + words - 8])[..len]);
    if words * 8 <= keep {
        key.with(|c| c.set(v));
    }
    r
}

/// Handles a product with no work: checks that `c` holds m rows of n values `ldc` apart
/// (`(m - 1) * ldc + n` values; none when m or n is 0), zeroes them for an empty depth
/// (unless adding) and returns true when nothing is left to compute.
fn empty_product<T: Real>([m, n, k]: [usize; 3], c: &mut [T], ldc: usize, add: bool) -> bool {
    let need = if m == 0 || n == 0 {
        0
    } else {
        (m - 1) * ldc + n
    };
    assert_eq!(
        c.len(),
        need,
        "gemm: output buffer does not hold {m} rows of {n} at stride {ldc}"
    );
    if m == 0 || n == 0 {
        return true;
    }
    if k == 0 && !add {
        c.chunks_mut(ldc).for_each(|r| r[..n].fill(T::default()));
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
    /// thread count and split, so results are deterministic. Panics if `c` is not m x n, or
    /// (through the bounds checks of packing) if `a` or `b` reaches outside its buffer.
    pub fn run<SA: Pack<P>, SB: Pack<P>>(
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
    pub fn run_into<SA: Pack<P>, SB: Pack<P>>(
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

    /// As [`Gemm::run`], with C's rows `ldc` apart in `c` (`ldc >= n`; `c` holds
    /// `(m - 1) * ldc + n` values, or none when m or n is 0): a product written into a block of
    /// a wider matrix. Values between the rows are left alone.
    pub fn run_rows<SA: Pack<P>, SB: Pack<P>>(
        &self,
        [m, n, k]: [usize; 3],
        a: &Mat<SA>,
        b: &Mat<SB>,
        c: &mut [T],
        ldc: usize,
        threads: usize,
    ) {
        assert!(ldc >= n, "gemm: row stride {ldc} below the {n} columns");
        if empty_product([m, n, k], c, ldc, false) {
            return;
        }
        let out = Out {
            ptr: c.as_mut_ptr(),
            ldc,
            add: false,
            narrow: std::ptr::null_mut(),
        };
        self.dispatch([m, n, k], a, b, out, threads)
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
        if empty_product([m, n, k], c, n, add) {
            return;
        }
        let out = Out {
            ptr: c.as_mut_ptr(),
            ldc: n,
            add,
            narrow,
        };
        self.dispatch([m, n, k], a, b, out, threads)
    }

    /// Runs a non-empty product into `out` on up to `threads` threads.
    fn dispatch<SA: Pack<P>, SB: Pack<P>>(
        &self,
        [m, n, k]: [usize; 3],
        a: &Mat<SA>,
        b: &Mat<SB>,
        out: Out<T>,
        threads: usize,
    ) {
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
