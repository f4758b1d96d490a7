//! The paths that read an operand where it lies instead of packing it: A through the direct
//! kernel (one-thread products up to `DIRECT_WORK` multiply-adds, and callers whose A would
//! only be copied, `Gemm::run_direct_a`), B's full panels when it has unit column stride and
//! few rows multiply it (`Gemm::b_in_place`), and where the fusing kernel reads B's rows to
//! pack them as it goes (`Gemm::fuse_source`).

use super::*;

impl<T: Real, P: bytemuck::Pod + Send + Sync> Gemm<T, P> {
    /// `c (+)= a @ b` on one thread with A read in place by the direct kernel whatever the
    /// product's size, B packed whole once per depth block (blocks of equal depth, at most
    /// KC); `false` (nothing done) when this GEMM has no direct kernel, A's type needs
    /// converting or n exceeds a column block. For callers whose A is laid out so that packing
    /// it would only copy it (a convolution's column matrix, read as its transpose or as rows
    /// that stay in L1 over one depth block).
    pub fn run_direct_a<SA: Pack<P>, SB: Pack<P>>(
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
        if !empty_product([m, n, k], c, n, add) {
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
    pub(super) fn unpacked_a<SA: Pack<P>, SB: Pack<P>>(
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
    pub(super) fn b_in_place<'b, SB: Pack<P>>(
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
    /// contiguous panel (the row's `FuseLimits` in `tuning.rs` say from how many rows that
    /// pays).
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
    pub(super) fn b_readable<'b, SB: Pack<P>>(
        &self,
        [k, n]: [usize; 2],
        b: &Mat<'b, SB>,
    ) -> Option<&'b [P]> {
        if b.cs != 1 || n < self.nr || k == 0 {
            return None;
        }
        // Rows a multiple of a page apart map a panel's column onto a few cache sets, too few
        // to hold its depth (`ALIASING_STRIDE`).
        let row_bytes = b.rs.unsigned_abs() * size_of::<P>();
        if k > 1 && row_bytes != 0 && row_bytes.is_multiple_of(ALIASING_STRIDE) {
            return None;
        }
        let data = SB::direct(b.data)?;
        // A layout that passed its checks always lies in its buffer.
        b.holds([0, 0], [k, n]).then_some(data)
    }
}
