//! Running a `Kernel` over a `ReducePlan`, threaded through `par`. Floating-point sums stay
//! accurate because no accumulator ever takes a long sequential chain: runs are cut into blocks of
//! `BLOCK` elements (each folded over `simd::LANES` lanes, about 128 adds per lane), rows are
//! folded in blocks of `ROW_BLOCK`, and the partials of blocks meet in a binary-counter cascade,
//! which is pairwise summation computed on the fly: the error grows like log n.
//!
//! Determinism: every split (outputs per task, reduced chunks, column chunks) depends on the
//! sizes only, never on the thread count, and partials are combined in a fixed order, so the
//! result is bit-identical for any number of threads.

use super::plan::ReducePlan;
use crate::par::{self, GRAIN};

/// Longest run folded by one `Kernel::segment` call.
pub const BLOCK: usize = 4096;
/// Rows folded into one row of accumulators before it joins the cascade.
const ROW_BLOCK: usize = 16;
/// Column width of one task of the outer loop. Wide, so that consecutive rows of a C-contiguous
/// input are read as one sequential stream (a 4 KiB column chunk of 16 KiB rows ran at half the
/// speed); the accumulators (32 KiB of f32) stay in L1/L2.
const COLS: usize = 8192;
/// Elements one outer-loop task reads: rows are split into chunks of about this size (the
/// threads' work), each yielding a row of partials that are then combined in order.
const ROWS_WORK: usize = 1 << 18;
/// With fewer outputs than this, the reduced range is itself split into chunks of `CHUNK`.
const SPLIT_OUT: usize = 16;
const CHUNK: usize = 1 << 16;

/// One reduction: how to fold a run, a row, and two partials (`a` before `b` in C order).
/// `pos` is the linear position (C order over the reduced dims) of the first element; `out`
/// the output's index in the plan's kept order.
pub trait Kernel<T>: Sync {
    type Acc: Copy + Send + Sync;
    type Out: Copy + Send;
    fn identity(&self) -> Self::Acc;
    /// Folds `len` (>= 1, <= `BLOCK`) elements at `src[off + i * stride]`.
    fn segment(
        &self,
        src: &[T],
        off: isize,
        len: usize,
        stride: isize,
        pos: usize,
        out: usize,
    ) -> Self::Acc;
    fn combine(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// Folds the row `row` (reduced position `pos`) into the accumulators of outputs
    /// `out..out + acc.len()`.
    fn fold_row(&self, acc: &mut [Self::Acc], row: &[T], pos: usize, out: usize);
    fn finish(&self, acc: Self::Acc, out: usize) -> Self::Out;
}

/// Pairwise combination of a stream of partials: slot `i` holds the fold of `2^i` pushes.
struct Cascade<A> {
    slots: [A; 48],
    full: u64,
}

impl<A: Copy> Cascade<A> {
    fn new(init: A) -> Self {
        Cascade {
            slots: [init; 48],
            full: 0,
        }
    }
    #[inline]
    fn push(&mut self, mut v: A, op: impl Fn(A, A) -> A) {
        let mut i = 0;
        while self.full & (1 << i) != 0 {
            v = op(self.slots[i], v);
            self.full &= !(1 << i);
            i += 1;
        }
        self.slots[i] = v;
        self.full |= 1 << i;
    }
    /// Higher slots hold older partials, so folding from the top keeps C order.
    fn finish(&self, init: A, op: impl Fn(A, A) -> A) -> A {
        let mut acc: Option<A> = None;
        for i in (0..48).rev().filter(|&i| self.full & (1 << i) != 0) {
            acc = Some(acc.map_or(self.slots[i], |a| op(a, self.slots[i])));
        }
        acc.unwrap_or(init)
    }
}

/// Fills `out` (length `p.n_out`, in the plan's kept order).
pub fn execute<T: Sync, K: Kernel<T>>(k: &K, src: &[T], p: &ReducePlan, out: &mut [K::Out]) {
    if p.n_out == 0 {
        return;
    }
    if p.n_red == 0 {
        for (o, slot) in out.iter_mut().enumerate() {
            *slot = k.finish(k.identity(), o);
        }
        return;
    }
    if p.outer {
        run_outer(k, src, p, out)
    } else {
        run_inner(k, src, p, out)
    }
}

/// Folds the reduced positions `a..b` of the output whose first element is at `base`.
fn fold_range<T, K: Kernel<T>>(
    k: &K,
    src: &[T],
    p: &ReducePlan,
    base: isize,
    (a, b): (usize, usize),
    out: usize,
) -> K::Acc {
    let s_in = p.red.last().1;
    let mut cas = Cascade::new(k.identity());
    let mut single = None;
    for r in p.red.runs(base, a..b) {
        let (off, len, pos) = (r.offsets[0] as isize, r.len, r.pos);
        let mut i = 0;
        while i < len {
            let n = (len - i).min(BLOCK);
            let v = k.segment(src, off + i as isize * s_in, n, s_in, pos + i, out);
            // Most outputs are one block: skip the cascade for them.
            if a == pos && i == 0 && n == b - a {
                single = Some(v);
            } else {
                cas.push(v, |x, y| k.combine(x, y));
            }
            i += n;
        }
    }
    single.unwrap_or_else(|| cas.finish(k.identity(), |x, y| k.combine(x, y)))
}

fn run_inner<T: Sync, K: Kernel<T>>(k: &K, src: &[T], p: &ReducePlan, out: &mut [K::Out]) {
    let (n_out, n_red) = (p.n_out, p.n_red);
    let work = n_out.saturating_mul(n_red);
    if n_out < SPLIT_OUT && n_red >= 2 * CHUNK {
        let nch = n_red.div_ceil(CHUNK);
        let parts: Vec<K::Acc> = par::map(n_out * nch, par::threads(), |t| {
            let (o, c) = (t / nch, t % nch);
            let base = p.kept.offset(p.base, o);
            let range = (c * CHUNK, ((c + 1) * CHUNK).min(n_red));
            fold_range(k, src, p, base, range, o)
        });
        for (o, slot) in out.iter_mut().enumerate() {
            let mut cas = Cascade::new(k.identity());
            for &v in &parts[o * nch..(o + 1) * nch] {
                cas.push(v, |x, y| k.combine(x, y));
            }
            *slot = k.finish(cas.finish(k.identity(), |x, y| k.combine(x, y)), o);
        }
        return;
    }
    // A few long tasks per thread: each streams one long stretch of memory, which the
    // prefetchers follow better than many short ones.
    let threads = par::threads();
    let per = (GRAIN / n_red).max(n_out / (4 * threads)).max(1);
    let task = |t: usize, chunk: &mut [K::Out]| {
        let o0 = t * per;
        let bases = p.kept.offsets(p.base, o0..o0 + chunk.len());
        for (j, (slot, [base])) in chunk.iter_mut().zip(bases).enumerate() {
            *slot = k.finish(
                fold_range(k, src, p, base as isize, (0, n_red), o0 + j),
                o0 + j,
            );
        }
    };
    if work < GRAIN {
        task(0, out);
    } else {
        par::for_each_chunk(out, per, threads, task);
    }
}

/// Rows of accumulators combined pairwise, as `Cascade`, reusing their buffers.
struct RowCascade<A> {
    slots: Vec<Option<Vec<A>>>,
    spare: Vec<Vec<A>>,
}

impl<A: Copy> RowCascade<A> {
    fn push(&mut self, mut v: Vec<A>, op: impl Fn(A, A) -> A) {
        let mut i = 0;
        loop {
            if i == self.slots.len() {
                self.slots.push(None);
            }
            match self.slots[i].take() {
                Some(mut old) => {
                    for (a, &b) in old.iter_mut().zip(&v) {
                        *a = op(*a, b);
                    }
                    self.spare.push(v);
                    v = old;
                    i += 1;
                }
                None => {
                    self.slots[i] = Some(v);
                    return;
                }
            }
        }
    }
    fn fresh(&mut self, init: A, w: usize) -> Vec<A> {
        let mut v = self.spare.pop().unwrap_or_default();
        v.clear();
        v.resize(w, init);
        v
    }
}

fn run_outer<T: Sync, K: Kernel<T>>(k: &K, src: &[T], p: &ReducePlan, out: &mut [K::Out]) {
    // The outer loop has a unit-stride kept dim, last.
    let (lk, _) = p.kept.last();
    let outer_kept = p.kept.outer();
    let s_in = p.red.last().1;
    let w = COLS.min(lk);
    let ncol = lk.div_ceil(w);
    let rch = (ROWS_WORK / w).next_multiple_of(ROW_BLOCK);
    let nrch = p.n_red.div_ceil(rch);
    // The partial of rows `r0..r1` of column chunk `c0..c0 + wl` of outer output `oo`.
    let task = |oo: usize, c0: usize, (r0, r1): (usize, usize)| -> Vec<K::Acc> {
        let wl = w.min(lk - c0);
        let base = outer_kept.offset(p.base, oo) + c0 as isize;
        let out0 = oo * lk + c0;
        let mut cas = RowCascade {
            slots: Vec::new(),
            spare: Vec::new(),
        };
        let mut blk = cas.fresh(k.identity(), wl);
        let mut rows = 0;
        for r in p.red.runs(base, r0..r1) {
            let (off, len, pos) = (r.offsets[0] as isize, r.len, r.pos);
            for i in 0..len {
                let o = (off + i as isize * s_in) as usize;
                k.fold_row(&mut blk, &src[o..o + wl], pos + i, out0);
                rows += 1;
                if rows == ROW_BLOCK {
                    let next = cas.fresh(k.identity(), wl);
                    cas.push(std::mem::replace(&mut blk, next), |x, y| k.combine(x, y));
                    rows = 0;
                }
            }
        }
        // The open block is the newest partial; the slots fold from the oldest (highest) down.
        let pending = (rows > 0).then_some(blk);
        let parts = cas.slots.into_iter().rev().flatten().chain(pending);
        fold_rows_in_order(k, parts).expect("every chunk has at least one row")
    };
    let items = p.n_out / lk * ncol * nrch;
    let item = |t: usize| {
        let (oc, r) = (t / nrch, t % nrch);
        let (oo, ci) = (oc / ncol, oc % ncol);
        task(oo, ci * w, (r * rch, ((r + 1) * rch).min(p.n_red)))
    };
    let parts: Vec<Vec<K::Acc>> = if p.n_out.saturating_mul(p.n_red) < GRAIN {
        (0..items).map(item).collect()
    } else {
        par::map(items, par::threads(), item)
    };
    // Output chunk `oc` (outer output `oo`, column chunk `ci`) is `out[oc * w..]` when each
    // row of `lk` splits evenly; walk the rows to handle a short last chunk.
    let mut parts = parts.into_iter();
    for (oo, row) in out.chunks_mut(lk).enumerate() {
        for (ci, chunk) in row.chunks_mut(w).enumerate() {
            let acc = fold_rows_in_order(k, parts.by_ref().take(nrch)).expect("nrch >= 1");
            let out0 = oo * lk + ci * w;
            for (j, (slot, &a)) in chunk.iter_mut().zip(&acc).enumerate() {
                *slot = k.finish(a, out0 + j);
            }
        }
    }
}

/// Combines rows of partials elementwise, oldest first, pairwise when there are many.
fn fold_rows_in_order<T, K: Kernel<T>>(
    k: &K,
    parts: impl Iterator<Item = Vec<K::Acc>>,
) -> Option<Vec<K::Acc>> {
    let mut cas = RowCascade {
        slots: Vec::new(),
        spare: Vec::new(),
    };
    let mut n = 0;
    for v in parts {
        cas.push(v, |x, y| k.combine(x, y));
        n += 1;
    }
    if n == 0 {
        return None;
    }
    let mut acc: Option<Vec<K::Acc>> = None;
    for v in cas.slots.into_iter().rev().flatten() {
        acc = Some(match acc {
            None => v,
            Some(mut a) => {
                for (x, &y) in a.iter_mut().zip(&v) {
                    *x = k.combine(*x, y);
                }
                a
            }
        });
    }
    acc
}
