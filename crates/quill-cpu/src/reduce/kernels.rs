//! The kernels: `FoldK`, one associative fold (`map` each element, combine with `op`) that covers
//! sum, prod, max, min, any, all, mean and the second passes of var and logsumexp; and `ArgK`
//! for argmax / argmin, which also carries the position and must respect C order.

use super::elem::RElem;
use super::exec::Kernel;
use super::simd;
use std::marker::PhantomData;

/// NaN-propagating max (NumPy's `max`): once a NaN is seen it stays.
#[inline(always)]
#[allow(clippy::eq_op)]
pub fn max_nan<X: PartialOrd + Copy>(a: X, b: X) -> X {
    if b > a || b != b {
        b
    } else {
        a
    }
}

#[inline(always)]
#[allow(clippy::eq_op)]
pub fn min_nan<X: PartialOrd + Copy>(a: X, b: X) -> X {
    if b < a || b != b {
        b
    } else {
        a
    }
}

/// A whole contiguous run folded at once, or `None` where the CPU lacks the SIMD for it.
pub type RunFn<T, A> = fn(&[T]) -> Option<A>;

/// `fin(fold over op of map(x, out))`, where `init` is `op`'s identity and `out` the output's
/// index (so that a second pass can read a first pass's result, e.g. the mean).
pub struct FoldK<T, A, O, M, G, F> {
    init: A,
    /// The same fold of a whole contiguous run by explicit SIMD (`fast`), tried first.
    run: Option<RunFn<T, A>>,
    map: M,
    op: G,
    fin: F,
    _t: PhantomData<fn(T) -> O>,
}

impl<T, A, O, M, G, F> FoldK<T, A, O, M, G, F> {
    pub fn new(init: A, map: M, op: G, fin: F) -> Self {
        FoldK {
            init,
            run: None,
            map,
            op,
            fin,
            _t: PhantomData,
        }
    }

    /// Adds a whole-run fast path: it must compute exactly `fold(op, init, map(x))` (so only
    /// for maps that ignore the output index).
    pub fn with_run(mut self, run: RunFn<T, A>) -> Self {
        self.run = Some(run);
        self
    }
}

impl<T, A, O, M, G, F> Kernel<T> for FoldK<T, A, O, M, G, F>
where
    T: Copy,
    A: Copy + Send + Sync,
    O: Copy + Send,
    M: Fn(T, usize) -> A + Sync,
    G: Fn(A, A) -> A + Sync,
    F: Fn(A, usize) -> O + Sync,
{
    type Acc = A;
    type Out = O;
    #[inline]
    fn identity(&self) -> A {
        self.init
    }
    #[inline]
    fn segment(&self, src: &[T], off: isize, len: usize, stride: isize, _: usize, out: usize) -> A {
        let m = |x: T| (self.map)(x, out);
        // A reversed run is the same set of elements: the fold is associative.
        let start = match stride {
            1 => Some(off as usize),
            -1 => Some((off - (len as isize - 1)) as usize),
            _ => None,
        };
        if let Some(s) = start {
            let x = &src[s..s + len];
            if let Some(v) = self.run.and_then(|f| f(x)) {
                return v;
            }
            return simd::fold_lanes(x, self.init, m, &self.op);
        }
        let at = |i: usize| m(src[(off + i as isize * stride) as usize]);
        let mut acc = [self.init; 4];
        let mut i = 0;
        while i + 4 <= len {
            for (j, a) in acc.iter_mut().enumerate() {
                *a = (self.op)(*a, at(i + j));
            }
            i += 4;
        }
        for j in i..len {
            acc[0] = (self.op)(acc[0], at(j));
        }
        (self.op)((self.op)(acc[0], acc[1]), (self.op)(acc[2], acc[3]))
    }
    #[inline]
    fn combine(&self, a: A, b: A) -> A {
        (self.op)(a, b)
    }
    #[inline]
    fn fold_row(&self, acc: &mut [A], row: &[T], _: usize, out: usize) {
        simd::fold_rows(acc, row, |x, i| (self.map)(x, out + i), &self.op)
    }
    #[inline]
    fn finish(&self, a: A, out: usize) -> O {
        (self.fin)(a, out)
    }
}

/// Position of the first maximum (`MAX`) or minimum; a NaN beats everything, the first NaN wins.
pub struct ArgK<T, const MAX: bool>(pub PhantomData<T>);

/// A partial result: the best value and its position; `NONE` before any element.
const NONE: usize = usize::MAX;

impl<T: RElem, const MAX: bool> ArgK<T, MAX> {
    #[inline(always)]
    fn better(v: T, best: T) -> bool {
        if MAX {
            v > best
        } else {
            v < best
        }
    }
    #[inline(always)]
    fn scan(best: (T, usize), it: impl Iterator<Item = T>, pos: usize) -> (T, usize) {
        let (mut bv, mut bi) = best;
        if bv.isnan() {
            return best;
        }
        for (i, v) in it.enumerate() {
            if v.isnan() {
                return (v, pos + i);
            }
            if bi == NONE || Self::better(v, bv) {
                (bv, bi) = (v, pos + i);
            }
        }
        (bv, bi)
    }
}

impl<T: RElem, const MAX: bool> Kernel<T> for ArgK<T, MAX> {
    type Acc = (T, usize);
    type Out = i64;
    fn identity(&self) -> (T, usize) {
        (T::LOWEST, NONE)
    }
    fn segment(
        &self,
        src: &[T],
        off: isize,
        len: usize,
        stride: isize,
        pos: usize,
        _: usize,
    ) -> (T, usize) {
        let start = self.identity();
        if stride == 1 {
            let s = off as usize;
            Self::scan(start, src[s..s + len].iter().copied(), pos)
        } else {
            let it = (0..len).map(|i| src[(off + i as isize * stride) as usize]);
            Self::scan(start, it, pos)
        }
    }
    #[inline]
    fn combine(&self, a: (T, usize), b: (T, usize)) -> (T, usize) {
        if a.1 == NONE || (b.1 != NONE && !a.0.isnan() && (b.0.isnan() || Self::better(b.0, a.0))) {
            b
        } else {
            a
        }
    }
    fn fold_row(&self, acc: &mut [(T, usize)], row: &[T], pos: usize, _: usize) {
        for (a, &x) in acc.iter_mut().zip(row) {
            *a = self.combine(*a, (x, pos));
        }
    }
    fn finish(&self, a: (T, usize), _: usize) -> i64 {
        a.1 as i64
    }
}
