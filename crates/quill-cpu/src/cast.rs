//! Elementwise maps from a strided source into a fresh contiguous destination; `astype` is the
//! map through `Element::cast` (NumPy's cast rules, see quill-core's dtype module).

use crate::par::for_dst_rows;
use crate::storage::{CpuElement, CpuStorage};
use crate::{dispatch_dtype, with_storage};
use quill_core::{DType, Element, Layout, LoopPlan};

/// `dst[i] = f(src[offset of element i of src_l])`, `dst` contiguous with `src_l.numel()` elements.
pub fn map_into<A, B, F>(dst: &mut [B], src: &[A], src_l: &Layout, f: F)
where
    A: Copy + Sync,
    B: Copy + Send,
    F: Fn(A) -> B + Sync + Send,
{
    let dst_l = Layout::contiguous(src_l.shape())
        .expect("a valid layout's shape has a valid element count");
    let plan = LoopPlan::new(&[&dst_l, src_l]);
    if plan.numel() == 0 {
        return;
    }
    if plan.ndim() == 0 {
        dst[0] = f(src[plan.offsets[1]]);
        return;
    }
    let n = plan.ndim();
    let last = n - 1;
    let (shape, ss) = (&plan.shape, &plan.strides[1]);
    for_dst_rows(dst, &plan, 1, |chunk, base, r0, r1| {
        let (len, sl) = if n == 1 {
            (r1 - r0, ss[0])
        } else {
            (shape[last], ss[last])
        };
        let mut idx: Vec<usize> = if n == 1 {
            vec![]
        } else {
            (0..last).map(|d| if d == 0 { r0 } else { 0 }).collect()
        };
        let mut d = if n == 1 {
            r0
        } else {
            r0 * shape[1..].iter().product::<usize>()
        } - base;
        let s_start = plan.offsets[1] as isize + if n == 1 { r0 as isize * ss[0] } else { 0 };
        loop {
            let mut s = s_start;
            for (j, &i) in idx.iter().enumerate() {
                s += i as isize * ss[j];
            }
            let out = &mut chunk[d..d + len];
            if sl == 1 {
                for (o, &a) in out.iter_mut().zip(&src[s as usize..s as usize + len]) {
                    *o = f(a);
                }
            } else {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = f(src[(s + i as isize * sl) as usize]);
                }
            }
            d += len;
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

/// A contiguous copy of `src` seen through `l`, converted to `dtype` with NumPy's cast rules.
pub fn cast(src: &CpuStorage, l: &Layout, dtype: DType) -> CpuStorage {
    dispatch_dtype!(dtype, B => {
        let mut out = crate::pool::take::<B>(l.numel());
        with_storage!(src, s => map_into(&mut out, s, l, |a| a.cast::<B>()));
        <B as CpuElement>::wrap(out)
    })
}

/// Reads one element as a `Scalar`-convertible value of type `T` (used by `item()` and printing).
pub fn read_as<T: Element>(src: &CpuStorage, offset: usize) -> T {
    with_storage!(src, s => s[offset].cast::<T>())
}
