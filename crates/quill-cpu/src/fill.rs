//! Writing one value through a strided view (`scalar_setitem`, `full`).

use crate::par::for_dst_rows;
use quill_core::{Layout, LoopPlan};

pub fn fill_strided<T: Copy + Send + Sync>(dst: &mut [T], dst_l: &Layout, value: T) {
    let plan = LoopPlan::new(&[dst_l]).normalize_for(0);
    if plan.numel() == 0 {
        return;
    }
    if plan.ndim() == 0 {
        dst[plan.offsets[0]] = value;
        return;
    }
    let n = plan.ndim();
    let (shape, st) = (&plan.shape, &plan.strides[0]);
    for_dst_rows(dst, &plan, 1, |chunk, base, r0, r1| {
        let origin = plan.offsets[0] as isize - base as isize;
        let last = n - 1;
        let (inner_len, inner_stride) = if n == 1 {
            (r1 - r0, st[0])
        } else {
            (shape[last], st[last])
        };
        let outer: Vec<usize> = (0..n.saturating_sub(1)).collect();
        let mut idx: Vec<usize> = outer.iter().map(|&d| if d == 0 { r0 } else { 0 }).collect();
        if n == 1 {
            idx.clear();
        }
        let start = if n == 1 {
            origin + r0 as isize * st[0]
        } else {
            origin
        };
        loop {
            let mut off = start;
            for (j, &i) in idx.iter().enumerate() {
                off += i as isize * st[j];
            }
            if inner_stride == 1 {
                chunk[off as usize..off as usize + inner_len].fill(value);
            } else {
                for i in 0..inner_len as isize {
                    chunk[(off + i * inner_stride) as usize] = value;
                }
            }
            // Odometer over the outer dims; dim 0 runs r0..r1.
            let mut j = idx.len();
            loop {
                if j == 0 {
                    return;
                }
                j -= 1;
                idx[j] += 1;
                let hi = if j == 0 { r1 } else { shape[j] };
                if idx[j] < hi {
                    break;
                }
                idx[j] = if j == 0 { r0 } else { 0 };
            }
        }
    });
}
