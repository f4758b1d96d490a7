//! The loop nest (`Gemm::nest`): per column block and depth block, B's KC x NC block packed
//! once (by all threads together when it is large), then row blocks of A handed to the
//! threads, each packing its A block and sweeping its row tiles over runs of B panels
//! (`Block`). A one-thread block whose kernel can fuse (`Gemm::fused`) skips the packing
//! pass: the kernel of the row tile at row 0 (the first row block's first) packs each whole
//! panel as it multiplies; from a few row tiles up (`Gemm::fuses_few_rows`) it does so even
//! where B could be read in place.
//! What the nest is and how its sizes are chosen is told in `gemm.rs`.

use super::*;
use crate::types::{Fuse, FusedKernel};

impl<T: Real, P: bytemuck::Pod + Send + Sync> Gemm<T, P> {
    /// The loop nest over an m x n block of C at `out` (which `run` checked lies in its slice);
    /// row blocks go to the threads.
    pub(super) fn nest<SA: Pack<P>, SB: Pack<P>>(
        &self,
        [m, n, k]: [usize; 3],
        a: &Mat<SA>,
        b: &Mat<SB>,
        out: Out<T>,
        threads: usize,
    ) {
        let (mr, nr) = (self.mr, self.nr);
        debug_assert_eq!(SA::DEPTH, self.depth);
        // Row blocks: a multiple of the thread count, so that the threads finish together.
        let mut blocks = m.div_ceil(self.mc);
        if threads > 1 {
            blocks = blocks.next_multiple_of(threads);
        }
        let mc = m.div_ceil(blocks).next_multiple_of(self.row_unit());
        let steps = SA::steps;
        let in_place = self
            .b_in_place(m, [k, n], b)
            .filter(|_| threads > 1 || !self.fuses_few_rows(m, [k, n], b));
        let kstep = self.nest_step(k);
        let (kc_max, nc_max) = (kstep.min(k), self.nc.min(n).next_multiple_of(nr));
        let nc_max = if in_place.is_some() { nr } else { nc_max };
        with_scratch(&PACK_B, steps(kc_max) * nc_max, |bpack: &mut [P]| {
            for jc in (0..n).step_by(self.nc) {
                let nc = self.nc.min(n - jc);
                // Read in place: every full panel; only a partial last one is packed.
                let direct = if in_place.is_some() { nc / nr * nr } else { 0 };
                for pc in (0..k).step_by(kstep) {
                    let kc = kstep.min(k - pc);
                    let panel_len = nr * steps(kc);
                    let bp = &mut bpack[..(nc - direct).div_ceil(nr) * panel_len];
                    let panel = |q: usize, dst: &mut [P]| {
                        let j = direct + q * nr;
                        SB::pack_b(dst, b, pc, kc, jc + j, nr.min(nc - j), nr)
                    };
                    // One thread: the row tile at row 0 packs each whole panel as it
                    // multiplies, for the row tiles and row blocks after it; only a
                    // partial last panel is packed here.
                    let whole = nc / nr * nr;
                    let fuse = match self.fused {
                        Some(k) if threads == 1 && direct == 0 && whole > 0 => self
                            .fuse_source(b, [pc, kc, jc, whole])
                            .map(|(src, rs)| Fusing {
                                kernel: k,
                                src,
                                rs,
                                col: size_of::<SB>(),
                                whole,
                            }),
                        _ => None,
                    };
                    if fuse.is_some() {
                        if whole < nc {
                            panel(whole / nr, &mut bp[whole / nr * panel_len..]);
                        }
                    } else if threads > 1 && shares_b_pack(kc, nc) && direct == 0 {
                        // One run of whole panels per thread, through `par` so that the
                        // caller packs too instead of waiting on the pool.
                        let per = (nc - direct).div_ceil(nr).div_ceil(threads);
                        par::for_each_chunk(bp, per * panel_len, threads, |s, run| {
                            for (q, dst) in run.chunks_mut(panel_len).enumerate() {
                                panel(s * per + q, dst);
                            }
                        });
                    } else {
                        SB::pack_b_block(bp, b, pc, kc, jc + direct, nc - direct, nr);
                    }
                    let blk = Block {
                        g: self,
                        bpack: Panels {
                            ptr: bp.as_mut_ptr(),
                            len: bp.len(),
                        },
                        fuse,
                        b_in_place: in_place.map(|d| (d, b.at_signed(pc, jc), b.rs)),
                        direct,
                        a,
                        out,
                        jc,
                        nc,
                        pc,
                        kc,
                        last: pc + kc == k,
                    };
                    let rows = |i: usize| {
                        let ic = i * mc;
                        if ic < m {
                            let rows = mc.min(m - ic);
                            // Whole tiles: a share of rows need not be a multiple of MR.
                            let len = mc.next_multiple_of(mr) * steps(kc);
                            with_scratch(&PACK_A, len, |ap| blk.rows(ap, ic, rows))
                        }
                    };
                    par::for_each(blocks, threads, rows);
                }
            }
        })
    }
}

/// A block's packed B panels: all of the block's, or with `b_in_place` only those from column
/// `direct` on. Read by every row tile; with `fuse`, the row tile at row 0 writes each whole
/// panel before the others read it, on the one thread the block then runs on.
#[derive(Clone, Copy)]
struct Panels<P> {
    ptr: *mut P,
    len: usize,
}

// SAFETY: `Panels` points into the nest's packing buffer, borrowed mutably for the whole block;
// threads only read it, except that with `fuse` (one thread) that thread writes it too.
unsafe impl<P: Send> Send for Panels<P> {}
// SAFETY: as above.
unsafe impl<P: Sync> Sync for Panels<P> {}

/// How the row tile at row 0 packs each whole B panel as it multiplies (`Gemm::fused`): B's
/// element (pc, jc) and row stride in bytes, as `Pack::fuse_source` found them, the bytes of
/// one of B's values, and the block's whole panels' columns.
struct Fusing<T, P> {
    kernel: FusedKernel<T, P>,
    src: *const u8,
    rs: isize,
    col: usize,
    whole: usize,
}

// SAFETY: `src` points into B, which the nest only reads, and a fusing block runs on one thread.
unsafe impl<T, P> Send for Fusing<T, P> {}
// SAFETY: as above.
unsafe impl<T, P> Sync for Fusing<T, P> {}

/// One (jc, pc) step: a packed B block and where it sits.
struct Block<'a, T, P, SA> {
    g: &'a Gemm<T, P>,
    bpack: Panels<P>,
    fuse: Option<Fusing<T, P>>,
    /// B's buffer, the index of element (pc, jc) in it and its row stride, when the block's
    /// first `direct` columns are read in place.
    b_in_place: Option<(&'a [P], isize, isize)>,
    direct: usize,
    a: &'a Mat<'a, SA>,
    out: Out<T>,
    jc: usize,
    nc: usize,
    pc: usize,
    kc: usize,
    /// This is the product's last depth block: the narrow output (if any) is written.
    last: bool,
}

impl<T: Real, P: bytemuck::Pod, SA: Pack<P>> Block<'_, T, P, SA> {
    /// Packs rows `ic..ic + mc` of A and runs every micro-tile of those rows against this
    /// block of B.
    fn rows(&self, apack: &mut [P], ic: usize, mc: usize) {
        let (g, kc) = (self.g, self.kc);
        let steps = SA::steps(kc);
        for (p, dst) in apack
            .chunks_mut(g.mr * steps)
            .take(mc.div_ceil(g.mr))
            .enumerate()
        {
            let i = p * g.mr;
            SA::pack_a(dst, self.a, ic + i, g.mr.min(mc - i), self.pc, kc, g.mr);
        }
        // Each row tile sweeps a run of B panels (`Gemm::sweep` bytes) before the next row
        // tile starts, so its C tile moves along its rows for a few tiles instead of only down
        // a column of tiles whose rows may all share one L1 set. Longer runs (64 KiB or more)
        // stream more of B from L2 than a row tile's A panel saves, so AVX-512's 64 KiB panels
        // go panel by panel (docs/perf-log/2026-11-29.md). B read in place (few rows) goes
        // panel by panel, each panel's rows fetched once for all row tiles.
        let sweep = if self.b_in_place.is_some() {
            0
        } else {
            g.sweep
        };
        let run = (sweep / (steps * g.nr * size_of::<P>()).max(1)).max(1) * g.nr;
        for j0 in (0..self.nc).step_by(run) {
            for ir in (0..mc).step_by(g.mr) {
                let ap = &apack[ir * steps..(ir + g.mr) * steps];
                for jr in (j0..self.nc.min(j0 + run)).step_by(g.nr) {
                    // SAFETY: `ap` is one panel's slice of `apack` (steps * MR values); jr is
                    // a multiple of NR (so is `run`) below nc; rows ic + ir.. < ic + mc of
                    // this row block, which `nest` gave this call alone.
                    unsafe { self.tile(ap, ic + ir, jr, g.mr.min(mc - ir)) };
                }
            }
        }
    }

    /// Runs the micro-tile of `mr` rows of C from row `i`, at column `jr` of this block, whose
    /// packed A panel is `ap`.
    ///
    /// # Safety
    /// `ap` holds `steps * MR` packed values; `jr` is a multiple of NR below the block's `nc`;
    /// `1 <= mr <= MR` and rows `i..i + mr` lie in a row block of `m` that no other thread
    /// writes while this block runs. With `fuse`, the tile at row 0 writes its panel of
    /// `bpack`: the block runs on this one thread, every row tile after that one.
    unsafe fn tile(&self, ap: &[P], i: usize, jr: usize, mr: usize) {
        let (g, steps) = (self.g, SA::steps(self.kc));
        debug_assert!(
            ap.len() == g.mr * steps && jr < self.nc && jr.is_multiple_of(g.nr) && mr <= g.mr
        );
        let (bp, bs) = match self.b_in_place {
            // Full panels: column jc + jr of row pc, rows at B's stride. The pointer is
            // derived from the whole buffer, since a negative row stride reaches below it.
            Some((data, at, rs)) if jr < self.direct => {
                (data.as_ptr().wrapping_offset(at + jr as isize), rs)
            }
            _ => {
                let q = jr - self.direct;
                assert!(
                    (q + g.nr) * steps <= self.bpack.len,
                    "gemm: B panel past the block"
                );
                (
                    self.bpack.ptr.wrapping_add(q * steps).cast_const(),
                    g.nr as isize,
                )
            }
        };
        let t = Tile {
            kc: steps,
            a: ap.as_ptr(),
            ars: 0,
            acs: 0,
            b: bp,
            bs,
            c: self.out.at(i, self.jc + jr),
            ldc: self.out.ldc,
            first: self.pc == 0 && !self.out.add,
            mr,
            nr: g.nr.min(self.nc - jr),
            narrow: if self.last {
                self.out.narrow_at(i, self.jc + jr)
            } else {
                std::ptr::null_mut()
            },
        };
        if let Some(f) = self.fuse.as_ref().filter(|f| i == 0 && jr < f.whole) {
            let fuse = Fuse {
                src: f.src.wrapping_add(jr * f.col),
                rs: f.rs,
                // Steps all of whose DEPTH rows lie in the block (`Fuse`).
                whole: self.kc / g.depth,
                out: self.bpack.ptr.wrapping_add((jr - self.direct) * steps),
            };
            #[cfg(test)]
            FUSED_TILES.with(|n| n.set(n.get() + 1));
            // SAFETY: `t` as for the kernel call below. A fusing block runs on one thread,
            // where `par::for_each` runs the row blocks in order (its documented one-thread
            // case), the one from row 0 first, and `rows` its row tiles in order: the tile at
            // row 0 comes first for each panel and nothing reads the panel before this call
            // has written it. `fuse_source` checked that the kc x whole box of B from (pc, jc)
            // lies in its buffer: step s reads rows DEPTH * s.. of it (those below kc: all
            // DEPTH of them for s < kc / DEPTH) at columns jr.. < jr + NR <= whole, and
            // writes the panel's steps * NR values, inside `bpack` (checked above). The tile
            // is a full NR wide, as a fusing kernel needs.
            unsafe { (f.kernel)(&t, &fuse) };
            return;
        }
        // SAFETY: `ap` is a slice of exactly steps*MR packed values (this function's
        // contract). `bp` is either a slice of steps*NR packed values (bs = NR), or B read in
        // place: step p's NR values are elements (pc + p, jc + jr + j), j < NR, all inside the
        // k x n matrix (jr is a multiple of NR below direct, itself a multiple of NR <= nc,
        // so jr + NR <= direct), whose corners `b_in_place` checked lie in the buffer; f32 /
        // f64 only (DEPTH 1). The tile covers rows i.. < i + mr of the row block `rows` was
        // given (inside m) and columns jc+jr.. < jc+nc <= n of the m x n block at `out`,
        // which `run` placed inside the slice it borrows mutably (a column stripe's block
        // included: its columns end at or before the full row's end); no other thread writes
        // these rows of these columns. The kernel was chosen for a CPU that has its features,
        // and `kernel_for` picks a stamping that covers mr x nr.
        unsafe { g.kernel_for(g.kernel, false, t.mr, t.nr)(&t) };
    }
}
