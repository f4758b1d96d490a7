//! Elementwise maps from a strided source into a fresh contiguous destination; `astype` is the
//! map through `Element::cast` (NumPy's cast rules, see quill-core's dtype module).

use crate::par::for_dst_rows;
use crate::storage::{CpuElement, CpuStorage};
use crate::{dispatch_dtype, with_storage};
use quill_core::{DType, Element, Layout, LoopPlan, Result};

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
    // `dst` is operand 0, contiguous: a run's destination is its linear position.
    let row_len: usize = plan.shape[1..].iter().product();
    for_dst_rows(dst, &plan, 1, |chunk, base, r0, r1| {
        let runs = plan.runs_of([1], r0 * row_len..r1 * row_len);
        let [sl] = runs.inner_strides();
        for r in runs {
            let [s] = r.offsets;
            let out = &mut chunk[r.pos - base..r.pos - base + r.len];
            if sl == 1 {
                for (o, &a) in out.iter_mut().zip(&src[s..s + r.len]) {
                    *o = f(a);
                }
            } else {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = f(src[(s as isize + i as isize * sl) as usize]);
                }
            }
        }
    });
}

/// A contiguous copy of `src` seen through `l`, converted to `dtype` with NumPy's cast rules.
pub fn cast(src: &CpuStorage, l: &Layout, dtype: DType) -> Result<CpuStorage> {
    Ok(dispatch_dtype!(dtype, B => {
        let mut out = crate::pool::take::<B>("astype", l.numel())?;
        with_storage!(src, s => map_into(&mut out, s, l, |a| a.cast::<B>()));
        <B as CpuElement>::wrap(out)
    }))
}

/// Reads one element as a `Scalar`-convertible value of type `T` (used by `item()` and printing).
pub fn read_as<T: Element>(src: &CpuStorage, offset: usize) -> T {
    with_storage!(src, s => s[offset].cast::<T>())
}
