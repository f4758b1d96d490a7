//! The two hot loops of every reduction, written once as plain Rust that LLVM vectorises, and
//! compiled three times: for AVX-512, for AVX2+FMA and portably, chosen at run time. A portable
//! build (no `-C target-cpu`) would otherwise run them at SSE2 width.
//!
//! - `fold_lanes`: one contiguous run into one value, through `LANES` independent accumulators
//!   (hides the add latency and, for sums, keeps each partial short: see `exec::BLOCK`).
//! - `fold_rows`: a contiguous row into a row of accumulators (the kept dim is the inner one).

use crate::simd::with_best_simd;

/// Independent accumulators per run. 32 f32 lanes are two AVX-512 registers, four AVX2 ones.
const LANES: usize = 32;

#[inline(always)]
fn lanes_body<T: Copy, A: Copy, M: Fn(T) -> A, G: Fn(A, A) -> A>(
    x: &[T],
    init: A,
    map: &M,
    op: &G,
) -> A {
    let mut acc = [init; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = op(*a, map(v));
        }
    }
    // A tree over the lanes, so that the lanes' partials meet in balanced pairs.
    let mut w = LANES / 2;
    while w > 0 {
        for j in 0..w {
            acc[j] = op(acc[j], acc[j + w]);
        }
        w /= 2;
    }
    let mut r = acc[0];
    for &v in chunks.remainder() {
        r = op(r, map(v));
    }
    r
}

#[inline(always)]
fn rows_body<T: Copy, A: Copy, M: Fn(T, usize) -> A, G: Fn(A, A) -> A>(
    acc: &mut [A],
    row: &[T],
    map: &M,
    op: &G,
) {
    for (i, (a, &x)) in acc.iter_mut().zip(row).enumerate() {
        *a = op(*a, map(x, i));
    }
}

/// Folds `map(x[i])` into one value with the associative `op`, starting every lane at `init`
/// (which must be `op`'s identity).
#[inline]
pub fn fold_lanes<T: Copy, A: Copy, M: Fn(T) -> A, G: Fn(A, A) -> A>(
    x: &[T],
    init: A,
    map: M,
    op: G,
) -> A {
    with_best_simd(
        #[inline(always)]
        || lanes_body(x, init, &map, &op),
    )
}

/// `acc[i] = op(acc[i], map(row[i], i))` over the common length.
#[inline]
pub fn fold_rows<T: Copy, A: Copy, M: Fn(T, usize) -> A, G: Fn(A, A) -> A>(
    acc: &mut [A],
    row: &[T],
    map: M,
    op: G,
) {
    with_best_simd(
        #[inline(always)]
        || rows_body(acc, row, &map, &op),
    )
}
