//! The loop driver of every elementwise kernel. The output is a fresh contiguous buffer
//! (operand 0 of the plan); the inputs (operands 1..=N) have any strides, broadcast included.
//! The coalesced plan is cut into inner runs by quill-core's `Runs`: for each run the body gets the output slice, each
//! input's start offset and its inner stride, and picks its fast path (contiguous, stride 0, or
//! strided) once per run. Large outputs split into chunks that threads run in parallel; the split
//! depends only on the size and the thread count, so results are deterministic.

use crate::par::{self, GRAIN};
use quill_core::LoopPlan;

/// Calls `body(out_run, offsets, strides)` for every inner run of `plan` over `out`, which holds
/// the plan's elements in C order (`out.len() == plan.numel()`).
pub fn for_each_run<U, const N: usize>(
    out: &mut [U],
    plan: &LoopPlan,
    body: impl Fn(&mut [U], [usize; N], [isize; N]) + Sync,
) where
    U: Send,
{
    debug_assert_eq!(plan.strides.len(), N + 1);
    let numel = plan.numel();
    debug_assert_eq!(out.len(), numel);
    if numel == 0 {
        return;
    }
    let threads = par::threads();
    if numel < GRAIN || threads < 2 {
        walk(out, 0, plan, &body);
        return;
    }
    let chunk = numel.div_ceil(4 * threads).max(GRAIN / 2);
    par::for_each_chunk(out, chunk, threads, |i, o| walk(o, i * chunk, plan, &body));
}

/// The runs of the elements `start..start + out.len()` (C order) over the inputs (operands
/// `1..=N` of the plan).
fn walk<U, const N: usize>(
    out: &mut [U],
    start: usize,
    plan: &LoopPlan,
    body: &(impl Fn(&mut [U], [usize; N], [isize; N]) + Sync),
) {
    let runs = plan.runs_of(std::array::from_fn(|k| k + 1), start..start + out.len());
    let strides = runs.inner_strides();
    for r in runs {
        let at = r.pos - start;
        body(&mut out[at..at + r.len], r.offsets, strides);
    }
}

/// One run of a unary map: `out[i] = f(a[off + i * stride])`.
#[inline(always)]
pub fn map1<T: Copy, U: Copy>(out: &mut [U], a: &[T], off: usize, st: isize, f: impl Fn(T) -> U) {
    let n = out.len();
    match st {
        1 => {
            for (o, &x) in out.iter_mut().zip(&a[off..off + n]) {
                *o = f(x);
            }
        }
        0 => {
            out.fill(f(a[off]));
        }
        -1 => {
            for (o, &x) in out.iter_mut().zip(a[off + 1 - n..=off].iter().rev()) {
                *o = f(x);
            }
        }
        _ => {
            for (i, o) in out.iter_mut().enumerate() {
                *o = f(a[(off as isize + i as isize * st) as usize]);
            }
        }
    }
}

/// One run of a binary map: `out[i] = f(a[oa + i * sa], b[ob + i * sb])`.
#[inline(always)]
pub fn map2<T: Copy, U>(
    out: &mut [U],
    (a, b): (&[T], &[T]),
    [oa, ob]: [usize; 2],
    [sa, sb]: [isize; 2],
    f: impl Fn(T, T) -> U,
) {
    let n = out.len();
    match (sa, sb) {
        (1, 1) => {
            for ((o, &x), &y) in out.iter_mut().zip(&a[oa..oa + n]).zip(&b[ob..ob + n]) {
                *o = f(x, y);
            }
        }
        (1, 0) => {
            let y = b[ob];
            for (o, &x) in out.iter_mut().zip(&a[oa..oa + n]) {
                *o = f(x, y);
            }
        }
        (0, 1) => {
            let x = a[oa];
            for (o, &y) in out.iter_mut().zip(&b[ob..ob + n]) {
                *o = f(x, y);
            }
        }
        _ => {
            let at = |i: usize| a[(oa as isize + i as isize * sa) as usize];
            let bt = |i: usize| b[(ob as isize + i as isize * sb) as usize];
            for (i, o) in out.iter_mut().enumerate() {
                *o = f(at(i), bt(i));
            }
        }
    }
}

/// One run of an in-place binary map: `out[i] = f(out[i], b[ob + i * sb])`.
#[inline(always)]
pub fn map_inplace<T: Copy>(out: &mut [T], b: &[T], ob: usize, sb: isize, f: impl Fn(T, T) -> T) {
    let n = out.len();
    match sb {
        1 => {
            for (o, &y) in out.iter_mut().zip(&b[ob..ob + n]) {
                *o = f(*o, y);
            }
        }
        0 => {
            let y = b[ob];
            for o in out.iter_mut() {
                *o = f(*o, y);
            }
        }
        _ => {
            for (i, o) in out.iter_mut().enumerate() {
                *o = f(*o, b[(ob as isize + i as isize * sb) as usize]);
            }
        }
    }
}
