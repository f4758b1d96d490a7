//! Integer and bool matmul: a plain strided loop, one output row at a time. Integers accumulate
//! in i64 with wrapping arithmetic and wrap into the output dtype at the end, which equals
//! NumPy's result computed in that dtype (wrapping is a ring homomorphism); bool matmul is the
//! logical or of ands. Rows are split across threads above the grain size.

use crate::batch::{Batch, Dims};
use quill_par::{self as par, GRAIN};

/// An element with an exact accumulator.
pub(crate) trait Accumulate: Copy + Send + Sync {
    type Acc: Copy + Send;
    const ZERO: Self::Acc;
    fn mac(acc: Self::Acc, a: Self, b: Self) -> Self::Acc;
    fn finish(acc: Self::Acc) -> Self;
}

macro_rules! int_acc {
    ($($t:ty),*) => {$(
        impl Accumulate for $t {
            type Acc = i64;
            const ZERO: i64 = 0;
            #[inline(always)]
            fn mac(acc: i64, a: Self, b: Self) -> i64 {
                acc.wrapping_add((a as i64).wrapping_mul(b as i64))
            }
            #[inline(always)]
            fn finish(acc: i64) -> Self {
                acc as $t
            }
        }
    )*};
}
int_acc!(i8, i16, i32, i64, u8, u16, u32, u64);

impl Accumulate for bool {
    type Acc = bool;
    const ZERO: bool = false;
    #[inline(always)]
    fn mac(acc: bool, a: bool, b: bool) -> bool {
        acc | (a & b)
    }
    #[inline(always)]
    fn finish(acc: bool) -> bool {
        acc
    }
}

/// `out` (contiguous batch x m x n) = the batched product described by `bt` over `a` and `b`.
pub(crate) fn matmul<T: Accumulate>(a: &[T], bt: &Batch, b: &[T], out: &mut [T], d: &Dims) {
    let (m, k, n) = (d.m, d.k, d.n);
    if out.is_empty() {
        return;
    }
    let ix = |off: usize, i: usize, s: isize| (off as isize + i as isize * s) as usize;
    let row = |(r, dst): (usize, &mut [T])| {
        let (oa, ob) = bt.offsets[r / m];
        let a_row = ix(oa, r % m, bt.a.0);
        let mut acc = vec![T::ZERO; n];
        for p in 0..k {
            let x = a[ix(a_row, p, bt.a.1)];
            let b_row = ix(ob, p, bt.b.0);
            for (j, s) in acc.iter_mut().enumerate() {
                *s = T::mac(*s, x, b[ix(b_row, j, bt.b.1)]);
            }
        }
        for (o, s) in dst.iter_mut().zip(acc) {
            *o = T::finish(s);
        }
    };
    if out.len() * k.max(1) < GRAIN {
        out.chunks_mut(n).enumerate().for_each(row);
    } else {
        let threads = par::threads();
        let rows = out.len() / n;
        let per = (GRAIN / (n * k.max(1)))
            .max(rows.div_ceil(4 * threads))
            .max(1);
        par::for_each_chunk(out, per * n, threads, |i, block| {
            for (j, dst) in block.chunks_mut(n).enumerate() {
                row((i * per + j, dst));
            }
        });
    }
}
