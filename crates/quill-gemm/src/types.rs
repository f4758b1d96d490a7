//! The types the GEMM's parts share, so that none of them imports another for its types: the
//! element traits ([`Real`]: what the GEMM computes in; [`Cvt`]: a source element and its
//! conversion; [`Pack`]: how a source element packs into a kernel's panels), the strided matrix
//! [`Mat`], and the micro-kernels' interface (`Tile`, `Fuse`, `MicroKernel`, `FusedKernel`), with
//! `Stamps` (a kernel's edge stampings) and `KernelSet` (one type's kernels, which the
//! selection table in `select.rs` builds its GEMMs from). The traits are sealed: only this
//! crate's element types implement them, since the kernels trust what they report.

use half::{bf16, f16};
use std::ops::{Add, Mul, Neg, Sub};

/// The sealing of [`Real`], [`Cvt`] and [`Pack`]: implemented here for f32, f64, f16 and bf16
/// only, and not nameable outside the crate.
pub trait Sealed {}
impl Sealed for f32 {}
impl Sealed for f64 {}
impl Sealed for f16 {}
impl Sealed for bf16 {}

/// One element type's micro-kernels (`kernels.rs`), for the selection table (`select.rs`).
pub trait Family: Sized + 'static {
    /// The kernels of every family for this type.
    fn kernels() -> KernelSet<Self>;
}

/// A type's kernels in every family: the selection table picks the active family's and sizes
/// it from its tuning row.
#[derive(Clone, Copy)]
pub struct KernelSet<T: 'static> {
    /// AVX-512F: 12 rows by two vectors, half-vector stampings for the narrowest edges.
    #[cfg(target_arch = "x86_64")]
    pub avx512: SimdFamily<T>,
    /// AVX2 + FMA: 6 rows by two vectors.
    #[cfg(target_arch = "x86_64")]
    pub avx2: SimdFamily<T>,
    /// The portable kernel.
    pub generic: GenericKernel<T>,
}

/// A SIMD kernel family: its `mr x nr` tile, its stampings (the full one among them) and its
/// fusing form.
#[derive(Clone, Copy)]
pub struct SimdFamily<T: 'static> {
    /// Rows of the tile.
    pub mr: usize,
    /// Columns of the tile (two vectors).
    pub nr: usize,
    /// The stampings, `packed[2][2]` and `direct[2][2]` the full tile.
    pub stamps: Stamps<T, T>,
    /// The full tile packing its B panel as it multiplies.
    pub fused: FusedKernel<T>,
}

/// The portable kernel: an `mr x nr` tile, reading A packed or in place.
#[derive(Clone, Copy)]
pub struct GenericKernel<T: 'static> {
    /// Rows of the tile.
    pub mr: usize,
    /// Columns of the tile.
    pub nr: usize,
    /// Reading packed A panels.
    pub packed: MicroKernel<T>,
    /// Reading A through its strides.
    pub direct: MicroKernel<T>,
}

/// The element types the GEMM computes in.
pub trait Real:
    bytemuck::Pod
    + Default
    + Send
    + Sync
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Neg<Output = Self>
    + Family
{
}
impl Real for f32 {}
impl Real for f64 {}

/// A SIMD kernel stamped for thirds of its MR rows and for half a vector (where the family has
/// a half-width stamping, else one vector again), one vector and both of its two vectors of
/// columns (`kernels::simd_kernel`): `packed[r][c]` computes `rows[r]` x `cols[c]` tiles.
#[derive(Clone, Copy)]
pub struct Stamps<T, P> {
    /// The stampings' heights: MR / 3, 2 MR / 3, MR.
    pub rows: [usize; 3],
    /// Their widths: half a vector (or one), one vector, two.
    pub cols: [usize; 3],
    /// Reading packed A panels.
    pub packed: [[MicroKernel<T, P>; 3]; 3],
    /// Reading A through its strides.
    pub direct: [[MicroKernel<T, P>; 3]; 3],
}

impl<T, P> Stamps<T, P> {
    /// Which stamping (`[rows][columns]`) serves an `mr x nr` tile: the smallest that covers it.
    pub(crate) fn index(&self, mr: usize, nr: usize) -> (usize, usize) {
        let r = self.rows.iter().position(|&r| mr <= r).unwrap_or(2);
        let c = self.cols.iter().position(|&c| nr <= c).unwrap_or(2);
        (r, c)
    }
}

/// A micro-kernel's operands. `a` holds `kc * MR` packed values; depth step `p` of B is the
/// `NR` values at `b + p * bs` (`bs` is `NR` for a packed panel, B's row stride when B is read
/// in place) (`P` is `T`, or a bf16 pair for the bf16 kernel); `c` points at the tile's
/// top-left element of a row-major matrix with row stride `ldc`, of which the kernel touches
/// `mr` rows and `nr` columns. `first` overwrites `c`, otherwise it accumulates. A direct
/// kernel (one that reads A unpacked) instead finds A's element (i, p) at
/// `a + i * ars + p * acs` for `i < mr`.
pub struct Tile<T, P = T> {
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
pub struct Fuse<P> {
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
pub type FusedKernel<T, P = T> = unsafe fn(&Tile<T, P>, &Fuse<P>);

/// # Safety
/// `t.a` is valid for reads of `kc * MR` values, `t.b + p * t.bs` of `NR` values for every
/// `p < kc` (for a direct kernel:
/// `t.a` is valid for reads at `a + i * ars + p * acs` for every `i < mr`, `p < kc`, and
/// `1 <= mr`); `t.c` is valid for reads and writes of `mr` rows of `nr` values at stride
/// `ldc`, with `mr <= MR`, `nr <= NR`; the CPU has the kernel's target features.
pub type MicroKernel<T, P = T> = unsafe fn(&Tile<T, P>);

/// An element that packs into a `T` panel.
pub trait Cvt<T>: Copy + Send + Sync + Sealed {
    /// The value as a `T` (exact for f32, f64 and the widening of f16 / bf16 to f32).
    fn cvt(self) -> T;
    /// `data` itself when no conversion is needed, so a kernel may read it unpacked.
    fn same(_data: &[Self]) -> Option<&[T]> {
        None
    }
    /// `dst[kk * w + i] = runs[i][kk].cvt()` for every run `i` and `kk < kc` through a SIMD
    /// transpose where this type has one; false (nothing written) where it has none. The
    /// next panel's runs start `ahead` values past these (0: unknown), to be prefetched.
    fn transpose_runs(
        _dst: &mut [T],
        _runs: &[&[Self]],
        _kc: usize,
        _w: usize,
        _ahead: isize,
    ) -> bool {
        false
    }
}
/// A strided matrix inside a buffer: element (i, j) is at `off + i * rs + j * cs`.
pub struct Mat<'a, S> {
    /// The buffer.
    pub data: &'a [S],
    /// Index of element (0, 0) in `data`.
    pub off: usize,
    /// Row stride in elements (any sign, or 0).
    pub rs: isize,
    /// Column stride in elements (any sign, or 0).
    pub cs: isize,
}

impl<'a, S> Mat<'a, S> {
    /// The matrix whose element (i, j) is `data[off + i * rs + j * cs]`.
    pub fn new(data: &'a [S], off: usize, rs: isize, cs: isize) -> Self {
        Mat { data, off, rs, cs }
    }
    /// Index of element (i, j) in `data`.
    #[inline(always)]
    pub(crate) fn at(&self, i: usize, j: usize) -> usize {
        self.at_signed(i, j) as usize
    }
    /// Index of element (i, j) in `data`, signed (for bounds checks before any read).
    #[inline(always)]
    pub fn at_signed(&self, i: usize, j: usize) -> isize {
        self.off as isize + i as isize * self.rs + j as isize * self.cs
    }
    /// Whether every element of the `rows x cols` box from element `(i0, j0)` lies in the
    /// buffer (an empty box does). An element's index is linear in (i, j), so it is enough
    /// that the box's corners do.
    pub fn holds(&self, [i0, j0]: [usize; 2], [rows, cols]: [usize; 2]) -> bool {
        if rows == 0 || cols == 0 {
            return true;
        }
        let (i1, j1) = (i0 + rows - 1, j0 + cols - 1);
        [(i0, j0), (i1, j0), (i0, j1), (i1, j1)]
            .iter()
            .all(|&(i, j)| (0..self.data.len() as isize).contains(&self.at_signed(i, j)))
    }
    /// The submatrix whose (0, 0) is element (i, j) of this one (which must exist).
    pub fn shifted(&self, i: usize, j: usize) -> Self {
        Mat {
            data: self.data,
            off: self.at(i, j),
            rs: self.rs,
            cs: self.cs,
        }
    }
}

impl<S: Copy> Mat<'_, S> {
    /// Element (i, j), bounds-checked against the buffer.
    #[inline(always)]
    pub fn get(&self, i: usize, j: usize) -> S {
        self.data[self.at(i, j)]
    }
}

/// A source element type that packs into panels of `P` for one micro-kernel family. `DEPTH`
/// depth values share one packed `P` (1 for f32 / f64; 2 for bf16 pairs), so a panel of
/// depth `kc` holds `steps(kc)` steps of `mr` (A) or `nr` (B) values.
pub trait Pack<P>: Copy + Send + Sync + Sealed {
    /// Depth values per packed `P`: 1, or 2 for bf16 pairs.
    const DEPTH: usize;
    /// Packed steps of a panel of depth `kc`: `kc.div_ceil(DEPTH)`, or more where a kernel
    /// consumes whole groups of steps (AMX tiles take 16 pairs), the extra steps zero.
    fn steps(kc: usize) -> usize {
        kc.div_ceil(Self::DEPTH)
    }
    /// `data` as packed values when they need no conversion (f32 and f64), so that a direct
    /// kernel can read A in place.
    fn direct(_data: &[Self]) -> Option<&[P]> {
        None
    }
    /// The relative cost per value of packing an operand whose values sit `lane` apart across
    /// a panel and `depth` apart along it: a copy of runs when each step's values are
    /// contiguous, a transpose (about a third as fast on f32 A panels,
    /// docs/perf-log/2026-11-27.md) when each lane's are, a gather otherwise.
    fn pack_cost(lane: isize, depth: isize) -> usize {
        match (lane, depth) {
            (1, _) => 1,
            (_, 1) => 3,
            _ => 4,
        }
    }
    /// Rows `i0..i0 + rows` (rows <= mr), depth `p0..p0 + kc` of `a` into one A panel, rows
    /// past `rows` zero.
    fn pack_a(
        dst: &mut [P],
        a: &Mat<Self>,
        i0: usize,
        rows: usize,
        p0: usize,
        kc: usize,
        mr: usize,
    );
    /// Depth `p0..p0 + kc`, columns `j0..j0 + cols` (cols <= nr) of `b` into one B panel,
    /// columns past `cols` zero.
    fn pack_b(
        dst: &mut [P],
        b: &Mat<Self>,
        p0: usize,
        kc: usize,
        j0: usize,
        cols: usize,
        nr: usize,
    );
    /// For a kernel that packs B's panels itself (`Gemm::fused`): `pack::rows_in_place`, when
    /// that kernel can pack this type's panels from B's rows. None by default.
    fn fuse_source(_b: &Mat<Self>, _block: [usize; 4]) -> Option<(*const u8, isize)> {
        None
    }
    /// All the B panels of columns `j0..j0 + cols` (any count), panel `q` at
    /// `dst[q * steps(kc) * nr..]`: panel by panel, unless a type reads B in a better order.
    fn pack_b_block(
        dst: &mut [P],
        b: &Mat<Self>,
        p0: usize,
        kc: usize,
        j0: usize,
        cols: usize,
        nr: usize,
    ) {
        crate::pack::by_panels(dst, b, p0, kc, j0, cols, nr)
    }
}
