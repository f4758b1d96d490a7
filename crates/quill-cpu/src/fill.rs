//! Writing one value through a strided view (`scalar_setitem`, `full`).

use crate::par::for_dst_rows;
use quill_core::{Layout, LoopPlan};

/// Writes `value` at every element `dst_l` addresses in `dst` (any strides, broadcast zeros
/// included). `dst` must hold every offset the layout reaches; rows are split over threads.
pub fn fill_strided<T: Copy + Send + Sync>(dst: &mut [T], dst_l: &Layout, value: T) {
    let plan = LoopPlan::new(&[dst_l]).normalize_for(0);
    if plan.numel() == 0 {
        return;
    }
    if plan.ndim() == 0 {
        dst[plan.offsets[0]] = value;
        return;
    }
    let row_len: usize = plan.shape[1..].iter().product();
    for_dst_rows(dst, &plan, 1, |chunk, base, r0, r1| {
        let runs = plan.runs::<1>(r0 * row_len..r1 * row_len);
        let [st] = runs.inner_strides();
        for r in runs {
            let off = r.offsets[0] - base;
            if st == 1 {
                chunk[off..off + r.len].fill(value);
            } else {
                for i in 0..r.len as isize {
                    chunk[(off as isize + i * st) as usize] = value;
                }
            }
        }
    });
}
