//! The BLIS loop nest for one product `C = A @ B` (C row-major, fresh): columns in blocks of NC,
//! depth in blocks of KC (B's KC x NC block packed once and shared by the threads), rows in
//! blocks of about MC (each thread packs its own MC x KC block of A), then NR-wide and MR-tall
//! micro-tiles. Block sizes come per kernel: a B micro-panel (KC x NR) stays in L1 while the
//! A block (MC x KC) stays in L2 and the B block (KC x NC) in L3.

use super::active_kernel;
use super::kernels::{self, Kernel, MicroKernel, Tile};
use super::pack::{pack_a, pack_b, Cvt, Mat};
use rayon::prelude::*;
use std::cell::Cell;
use std::ops::{Add, Mul};
use std::thread::LocalKey;

/// The element types the GEMM computes in.
pub(crate) trait Real:
    bytemuck::Pod + Default + Send + Sync + Add<Output = Self> + Mul<Output = Self>
{
}
impl Real for f32 {}
impl Real for f64 {}

/// A micro-kernel and the block sizes tuned for it.
#[derive(Clone, Copy)]
pub(crate) struct Gemm<T> {
    mr: usize,
    nr: usize,
    kc: usize,
    mc: usize,
    nc: usize,
    kernel: MicroKernel<T>,
}

impl<T> Gemm<T> {
    const fn new(kernel: MicroKernel<T>, [mr, nr, kc, mc, nc]: [usize; 5]) -> Self {
        Gemm {
            mr,
            nr,
            kc,
            mc,
            nc,
            kernel,
        }
    }
}

// Block sizes. AVX2 (tuned on a Zen 3 with 32 KiB L1d, 512 KiB L2): a 256-deep B micro-panel
// is 16 KiB, an A block 240 x 256 f32 is 240 KiB. AVX-512 (for 48 KiB L1d, 2 MiB L2): a 192-deep
// 32-wide B micro-panel is 24 KiB, an A block 480 x 192 f32 is 360 KiB.
pub(crate) fn select_f32() -> Gemm<f32> {
    match active_kernel() {
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 => Gemm::new(kernels::avx512_f32, [12, 32, 192, 480, 4096]),
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => Gemm::new(kernels::avx2_f32, [6, 16, 256, 240, 4096]),
        _ => Gemm::new(kernels::generic::<f32, 4, 16>, [4, 16, 256, 128, 2048]),
    }
}

pub(crate) fn select_f64() -> Gemm<f64> {
    match active_kernel() {
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 => Gemm::new(kernels::avx512_f64, [12, 16, 192, 240, 2048]),
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => Gemm::new(kernels::avx2_f64, [6, 8, 256, 120, 2048]),
        _ => Gemm::new(kernels::generic::<f64, 4, 8>, [4, 8, 256, 64, 1024]),
    }
}

thread_local! {
    static PACK_A: Cell<Vec<f64>> = const { Cell::new(Vec::new()) };
    static PACK_B: Cell<Vec<f64>> = const { Cell::new(Vec::new()) };
}

/// Scratch larger than this is freed after use instead of kept for the thread's next call.
const KEEP_BYTES: usize = 16 << 20;

/// Runs `f` on a 64-byte aligned scratch slice of `len` values, reusing this thread's buffer.
/// The buffer is taken out of its cell while in use, so a nested call (rayon may run another
/// task here while this one waits) gets a fresh one instead of aliasing it.
fn with_scratch<T: Real, R>(
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

impl<T: Real> Gemm<T> {
    /// `c = a @ b` with `a` m x k, `b` k x n, `c` the m x n row-major slice (fully overwritten),
    /// on up to `threads` threads.
    pub(crate) fn run<SA: Cvt<T>, SB: Cvt<T>>(
        &self,
        [m, n, k]: [usize; 3],
        a: &Mat<SA>,
        b: &Mat<SB>,
        c: &mut [T],
        threads: usize,
    ) {
        debug_assert_eq!(c.len(), m * n);
        if m == 0 || n == 0 {
            return;
        }
        if k == 0 {
            c.fill(T::default());
            return;
        }
        let (mr, nr) = (self.mr, self.nr);
        // Row blocks: a multiple of the thread count, so that the threads finish together.
        let mut blocks = m.div_ceil(self.mc);
        if threads > 1 {
            blocks = blocks.next_multiple_of(threads);
        }
        let mc = m.div_ceil(blocks).next_multiple_of(mr);
        let (kc_max, nc_max) = (self.kc.min(k), self.nc.min(n).next_multiple_of(nr));
        with_scratch(&PACK_B, kc_max * nc_max, |bpack: &mut [T]| {
            for jc in (0..n).step_by(self.nc) {
                let nc = self.nc.min(n - jc);
                for pc in (0..k).step_by(self.kc) {
                    let kc = self.kc.min(k - pc);
                    let bp = &mut bpack[..nc.div_ceil(nr) * nr * kc];
                    let panel = |(q, dst): (usize, &mut [T])| {
                        let j = q * nr;
                        pack_b(dst, b, pc, kc, jc + j, nr.min(nc - j), nr)
                    };
                    if threads > 1 && kc * nc >= 1 << 15 {
                        bp.par_chunks_mut(nr * kc).enumerate().for_each(panel);
                    } else {
                        bp.chunks_mut(nr * kc).enumerate().for_each(panel);
                    }
                    let blk = Block {
                        g: self,
                        bpack: bp,
                        a,
                        n,
                        jc,
                        nc,
                        pc,
                        kc,
                    };
                    let rows = |(i, cr): (usize, &mut [T])| {
                        with_scratch(&PACK_A, mc * kc, |ap| blk.rows(ap, i * mc, cr))
                    };
                    if threads > 1 && blocks > 1 {
                        c.par_chunks_mut(mc * n).enumerate().for_each(rows);
                    } else {
                        c.chunks_mut(mc * n).enumerate().for_each(rows);
                    }
                }
            }
        })
    }
}

/// One (jc, pc) step: a packed B block and where it sits.
struct Block<'a, T, SA> {
    g: &'a Gemm<T>,
    bpack: &'a [T],
    a: &'a Mat<'a, SA>,
    n: usize,
    jc: usize,
    nc: usize,
    pc: usize,
    kc: usize,
}

impl<T: Real, SA: Cvt<T>> Block<'_, T, SA> {
    /// Packs rows `ic..` of A (as many as `c` holds) and runs every micro-tile of those rows
    /// against this block of B; `c` is those rows of C.
    fn rows(&self, apack: &mut [T], ic: usize, c: &mut [T]) {
        let (g, kc, n) = (self.g, self.kc, self.n);
        let mc = c.len() / n;
        for (p, dst) in apack
            .chunks_mut(g.mr * kc)
            .take(mc.div_ceil(g.mr))
            .enumerate()
        {
            let i = p * g.mr;
            pack_a(dst, self.a, ic + i, g.mr.min(mc - i), self.pc, kc, g.mr);
        }
        for jr in (0..self.nc).step_by(g.nr) {
            let bp = &self.bpack[jr * kc..(jr + g.nr) * kc];
            for ir in (0..mc).step_by(g.mr) {
                let ap = &apack[ir * kc..(ir + g.mr) * kc];
                let t = Tile {
                    kc,
                    a: ap.as_ptr(),
                    b: bp.as_ptr(),
                    c: c[ir * n + self.jc + jr..].as_mut_ptr(),
                    ldc: n,
                    first: self.pc == 0,
                    mr: g.mr.min(mc - ir),
                    nr: g.nr.min(self.nc - jr),
                };
                // SAFETY: `ap` and `bp` are slices of exactly kc*MR and kc*NR packed values.
                // The tile's last element, (ir + mr - 1) * n + jc + jr + nr - 1, is below
                // mc * n = c.len() because ir + mr <= mc and jc + jr + nr <= jc + nc <= n, and
                // `c` is borrowed mutably for the call. The kernel was chosen by
                // `active_kernel`, which only yields kernels whose features this CPU has.
                unsafe { (g.kernel)(&t) };
            }
        }
    }
}
