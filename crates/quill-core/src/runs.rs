//! The one walker over a loop: [`Runs`] visits the elements `start..end` (C order) of a strided
//! shape shared by `N` operands and yields them as **inner runs**, stretches of the innermost dim,
//! each as a [`Run`]: the run's first linear position, every operand's offset of its first
//! element, and its length. Inside a run operand `k` steps by `inner_strides()[k]`, so a kernel
//! picks its fast path (stride 1, stride 0, strided) once per run and loops over a slice.
//!
//! Every kernel and helper that walks a multi-dimensional index goes through this type (CPU
//! elementwise, copy, fill, cast, reductions, the matmul batch, `Layout::offsets`, printing,
//! the gradient check's index), so there is one odometer to keep correct. (The gather / scatter
//! walker of `quill`'s `ndarray/index.rs` is ported when it moves into the CPU backend.)
//!
//! Cost: starting at an arbitrary element (a rayon chunk) computes its multi-index and offsets
//! once (a division per dim); after that each run costs one add per operand for the next row and,
//! when a dim wraps, a rewind of that dim (subtract stride x size) and a step of the next one per
//! operand. No multiplication over all dims per run, no allocation per run: operands live in fixed-size arrays (`N` is a const
//! generic the caller knows); only the index of the dims above the last two needs memory, one
//! small `Vec` per iterator for rank 3 and up (a coalesced plan rarely has more than 2 dims).
//! The constructor is cheap enough to build one iterator per output row of a reduction.
//!
//! [`Offsets`] is the per-element form (every offset tuple in turn, built on `Runs`);
//! `Layout::offsets` is `Offsets<1>` over a layout.
//!
//! Sources: a [`LoopPlan`] (all of its operands, [`LoopPlan::runs`], or a chosen subset,
//! [`LoopPlan::runs_of`]) or raw parts ([`Runs::from_parts`]: a shape, one stride slice and one
//! start offset per operand; the shape need not be coalesced, size-1 and size-0 dims are fine).
//! Rank 0 is one run of length 1 with inner strides 0.

use crate::plan::LoopPlan;
use std::ops::Range;

/// One inner run: elements `pos..pos + len` (C order) of the walk; operand `k`'s element `i` of
/// the run is at `offsets[k] + i * inner_strides[k]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run<const N: usize> {
    /// Linear (C-order) position of the run's first element.
    pub pos: usize,
    /// Per operand, the offset of the run's first element.
    pub offsets: [usize; N],
    /// Elements in the run (>= 1).
    pub len: usize,
}

/// The inner runs of `start..end`; see the module docs.
#[derive(Debug, Clone)]
pub struct Runs<'a, const N: usize> {
    shape: &'a [usize],
    strides: [&'a [isize]; N],
    /// Length and per-operand stride of the innermost dim.
    inner: usize,
    inner_strides: [isize; N],
    /// Per operand, the offset of the current row's element at inner index 0.
    row: [isize; N],
    /// Inner index of the next element (non-zero only before the first run).
    i_in: usize,
    /// The last outer dim (`nd - 2`): its index, size and strides.
    j: usize,
    nj: usize,
    sj: [isize; N],
    /// Indices of the outer dims `0..nd - 2` (empty, so never allocated, below rank 3).
    idx: Vec<usize>,
    pos: usize,
    end: usize,
}

/// The multi-index of element `linear` (C order) of `shape`, written into `idx` (same length).
/// Requires `linear < numel(shape)` or `linear == 0`.
#[inline]
fn unravel_into(shape: &[usize], mut linear: usize, idx: &mut [usize]) {
    for (i, &n) in idx.iter_mut().zip(shape).rev() {
        if linear == 0 {
            *i = 0;
            continue;
        }
        *i = linear % n;
        linear /= n;
    }
}

#[cold]
#[inline(never)]
fn bad_strides(shape: &[usize], k: usize, strides: &[isize]) -> ! {
    panic!(
        "Runs: every operand needs {} strides for shape {shape:?}; operand {k} has {strides:?}",
        shape.len()
    )
}

#[cold]
#[inline(never)]
fn outside(range: Range<usize>, shape: &[usize]) -> ! {
    let numel: usize = shape.iter().product();
    panic!("Runs: range {range:?} outside the {numel} elements of {shape:?}")
}

/// The C-order multi-index of element `linear` of `shape` (`linear < numel(shape)`).
pub fn unravel(shape: &[usize], linear: usize) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    unravel_into(shape, linear, &mut idx);
    idx
}

impl<'a, const N: usize> Runs<'a, N> {
    /// Runs over raw parts: operand `k` has strides `strides[k]` (each `shape.len()` long) and its
    /// first element at `offsets[k]`. Every element of `range` must be reachable (offsets >= 0),
    /// and `range.end <= numel(shape)`.
    #[inline(always)]
    pub fn from_parts(
        shape: &'a [usize],
        strides: [&'a [isize]; N],
        offsets: [usize; N],
        range: Range<usize>,
    ) -> Runs<'a, N> {
        let nd = shape.len();
        for (k, s) in strides.iter().enumerate() {
            if s.len() != nd {
                // (the array itself is not passed on: taking its address costs the hot path)
                bad_strides(shape, k, s);
            }
        }
        let (start, end) = (range.start, range.end.max(range.start));
        let (inner, inner_strides) = match nd {
            0 => (1, [0; N]),
            _ => (shape[nd - 1], strides.map(|s| s[nd - 1])),
        };
        let (nj, sj) = match nd {
            0 | 1 => (1, [0; N]),
            _ => (shape[nd - 2], strides.map(|s| s[nd - 2])),
        };
        let mut it = Runs {
            shape,
            strides,
            inner,
            inner_strides,
            row: offsets.map(|o| o as isize),
            i_in: 0,
            j: 0,
            nj,
            sj,
            idx: Vec::new(),
            pos: start,
            end,
        };
        if start < end {
            let numel: usize = shape.iter().product();
            if end > numel {
                outside(start..end, shape);
            }
            // Out of line: the common start (rank <= 2, element 0) needs neither. The parts go
            // by value and come back by value, so that `it` can live in registers.
            if nd >= 3 || start > 0 {
                let (row, i_in, j, idx) = seek(shape, strides, it.row, start);
                (it.row, it.i_in, it.j, it.idx) = (row, i_in, j, idx);
            }
        }
        it
    }

    /// Per operand, the stride inside a run (0 for rank 0).
    #[inline]
    pub fn inner_strides(&self) -> [isize; N] {
        self.inner_strides
    }

    /// The per-element form of the remaining walk.
    #[inline]
    pub fn elements(self) -> Offsets<'a, N> {
        Offsets {
            step: self.inner_strides,
            runs: self,
            cur: [0; N],
            left: 0,
        }
    }

    /// Moves `row` to the next row: the last outer dim steps, carrying into the others on a wrap.
    #[inline]
    fn next_row(&mut self) {
        self.j += 1;
        for k in 0..N {
            self.row[k] = self.row[k].wrapping_add(self.sj[k]);
        }
        if self.j < self.nj {
            return;
        }
        self.j = 0;
        for k in 0..N {
            let back = self.sj[k].wrapping_mul(self.nj as isize);
            self.row[k] = self.row[k].wrapping_sub(back);
        }
        if !self.idx.is_empty() {
            self.row = carry(self.shape, self.strides, &mut self.idx, self.row);
        }
    }
}

/// The index and offsets of element `start` (`start < numel`) from those of element 0: the
/// inner index, the index of dim `nd - 2`, and that of the dims above (allocated for rank >= 3).
#[inline(never)]
fn seek<const N: usize>(
    shape: &[usize],
    strides: [&[isize]; N],
    mut row: [isize; N],
    start: usize,
) -> ([isize; N], usize, usize, Vec<usize>) {
    let nd = shape.len();
    let mut idx = vec![0; nd.saturating_sub(2)];
    if nd == 0 || start == 0 {
        return (row, 0, 0, idx);
    }
    let inner = shape[nd - 1];
    let i_in = start % inner;
    let mut rest = start / inner;
    if nd == 1 {
        return (row, i_in, 0, idx);
    }
    let nj = shape[nd - 2];
    let j = rest % nj;
    rest /= nj;
    for (r, s) in row.iter_mut().zip(&strides) {
        *r += j as isize * s[nd - 2];
    }
    if rest > 0 {
        unravel_into(&shape[..nd - 2], rest, &mut idx);
        for (d, &i) in idx.iter().enumerate() {
            for (r, s) in row.iter_mut().zip(&strides) {
                *r += i as isize * s[d];
            }
        }
    }
    (row, i_in, j, idx)
}

/// The carry of a wrap of dim `nd - 2` into the dims above it (`idx`, non-empty): steps the
/// first of them that does not wrap, rewinding those that do. Returns the new `row`.
#[inline(never)]
fn carry<const N: usize>(
    shape: &[usize],
    strides: [&[isize]; N],
    idx: &mut [usize],
    mut row: [isize; N],
) -> [isize; N] {
    for d in (0..idx.len()).rev() {
        idx[d] += 1;
        for k in 0..N {
            row[k] = row[k].wrapping_add(strides[k][d]);
        }
        if idx[d] < shape[d] {
            break;
        }
        idx[d] = 0;
        for k in 0..N {
            let back = strides[k][d].wrapping_mul(shape[d] as isize);
            row[k] = row[k].wrapping_sub(back);
        }
    }
    row
}

impl<const N: usize> Iterator for Runs<'_, N> {
    type Item = Run<N>;

    #[inline]
    fn next(&mut self) -> Option<Run<N>> {
        if self.pos >= self.end {
            return None;
        }
        let len = (self.inner - self.i_in).min(self.end - self.pos);
        let mut offsets = self.row;
        if self.i_in != 0 {
            for (o, &s) in offsets.iter_mut().zip(&self.inner_strides) {
                *o += self.i_in as isize * s;
            }
        }
        let run = Run {
            pos: self.pos,
            offsets: offsets.map(|o| o as usize),
            len,
        };
        self.pos += len;
        self.i_in += len;
        if self.i_in == self.inner && self.pos < self.end {
            self.i_in = 0;
            self.next_row();
        }
        Some(run)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.end - self.pos;
        let lo = if left == 0 { 0 } else { 1 };
        (lo, Some(left))
    }
}

impl<const N: usize> std::iter::FusedIterator for Runs<'_, N> {}

/// Every element's offset tuple in C order: [`Runs`] unrolled (see [`Runs::elements`]).
#[derive(Debug, Clone)]
pub struct Offsets<'a, const N: usize> {
    runs: Runs<'a, N>,
    step: [isize; N],
    /// Offsets of the next element of the current run, and how many of the run are left.
    cur: [usize; N],
    left: usize,
}

impl<const N: usize> Iterator for Offsets<'_, N> {
    type Item = [usize; N];

    #[inline]
    fn next(&mut self) -> Option<[usize; N]> {
        if self.left == 0 {
            let r = self.runs.next()?;
            self.cur = r.offsets;
            self.left = r.len;
        }
        let out = self.cur;
        self.left -= 1;
        for k in 0..N {
            self.cur[k] = self.cur[k].wrapping_add_signed(self.step[k]);
        }
        Some(out)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.left + (self.runs.end - self.runs.pos);
        (n, Some(n))
    }
}

impl<const N: usize> ExactSizeIterator for Offsets<'_, N> {}
impl<const N: usize> std::iter::FusedIterator for Offsets<'_, N> {}

impl LoopPlan {
    /// The runs of elements `range` over all `N` operands of the plan (`N` must equal the number
    /// of operands).
    #[inline]
    pub fn runs<const N: usize>(&self, range: Range<usize>) -> Runs<'_, N> {
        assert_eq!(
            self.strides.len(),
            N,
            "LoopPlan::runs: the plan has {} operands, not {N}",
            self.strides.len()
        );
        self.runs_of(std::array::from_fn(|k| k), range)
    }

    /// The runs of elements `range` over the plan's operands `ops` (in that order).
    #[inline]
    pub fn runs_of<const N: usize>(&self, ops: [usize; N], range: Range<usize>) -> Runs<'_, N> {
        Runs::from_parts(
            &self.shape,
            ops.map(|k| self.strides[k].as_slice()),
            ops.map(|k| self.offsets[k]),
            range,
        )
    }
}
