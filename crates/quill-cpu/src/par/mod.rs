//! Threading. The fork-join every parallel kernel runs through is quill-par's (the caller takes
//! parts itself; helpers step off its core only with `QUILL_PIN_THREADS=1`), re-exported here so
//! that kernels name it `par::...`. `for_dst_rows`, which needs quill-core's loop plan, serves
//! kernels that write a strided destination: it splits the destination's outermost dim into row
//! ranges whose memory is disjoint, each its own `&mut` sub-slice. Small arrays stay on the
//! calling thread.

use quill_core::LoopPlan;
pub use quill_par::{for_each, for_each_chunk, for_each_item, map, threads, GRAIN};

/// Calls `body(chunk, chunk_start, r0, r1)` for row ranges `r0..r1` of dim 0 of `plan`, where
/// `chunk` is the part of `dst` holding those rows and `chunk_start` its index in `dst`.
/// `plan` must be normalised for operand 0 (`LoopPlan::normalize_for(0)`), non-empty and of
/// rank >= 1. Rows are split only when each row's memory lies before the next row's start
/// (stride of dim 0 > span of the inner dims), which holds for every non-overlapping view;
/// otherwise the whole range runs here, in order. `align` rounds the rows per task.
pub fn for_dst_rows<T, F>(dst: &mut [T], plan: &LoopPlan, align: usize, body: F)
where
    T: Send,
    F: Fn(&mut [T], usize, usize, usize) + Sync + Send,
{
    let n0 = plan.shape[0];
    let strides = &plan.strides[0];
    let inner_span: usize = plan
        .shape
        .iter()
        .zip(strides)
        .skip(1)
        .map(|(&d, &s)| (d - 1) * s.unsigned_abs())
        .sum();
    let s0 = strides[0];
    let threads = threads();
    let numel = plan.numel();
    let splittable = s0 > 0 && s0 as usize > inner_span && n0 >= 2;
    if numel < GRAIN || threads < 2 || !splittable {
        body(dst, 0, 0, n0);
        return;
    }
    let s0 = s0 as usize;
    let max_tasks = (numel / (GRAIN / 2)).max(1);
    let tasks = (4 * threads).min(max_tasks).min(n0).max(1);
    let rows = n0.div_ceil(tasks).next_multiple_of(align.max(1)).min(n0);
    let start = plan.offsets[0];
    let end = start + (n0 - 1) * s0 + inner_span + 1;
    for_each_chunk(&mut dst[start..end], s0 * rows, threads, |i, chunk| {
        let r0 = i * rows;
        body(chunk, start + r0 * s0, r0, (r0 + rows).min(n0));
    });
}
