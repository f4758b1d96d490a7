//! Integer-array indexing along one axis on the CPU: `gather` and `scatter_add` over any
//! strides. The data is read (or written) through a base layout with the index's shape and
//! stride 0 on the indexed axis, so one loop plan covers the index, the source and the data.
//! Indices are of any integer dtype, read through their own strides; negative ones count from the
//! end as in Python; an index out of range is an error naming the op, the value and the axis.

use crate::{dispatch_dtype, with_storage, CpuElement, CpuStorage};
use quill_core::{Along, DType, Error, Layout, LoopPlan, Result};

/// Runs `$body` with `$ix` bound to the typed index buffer of `$s`; any other dtype returns the
/// index dtype error from the enclosing function.
macro_rules! with_index {
    ($s:expr, $op:expr, $ix:ident => $body:expr) => {
        match $s {
            CpuStorage::I64($ix) => $body,
            CpuStorage::I32($ix) => $body,
            CpuStorage::U8($ix) => $body,
            CpuStorage::I8($ix) => $body,
            CpuStorage::I16($ix) => $body,
            CpuStorage::U16($ix) => $body,
            CpuStorage::U32($ix) => $body,
            CpuStorage::U64($ix) => $body,
            other => return Err(index_dtype_error($op, other.dtype())),
        }
    };
}

/// The error for an index array of a non-integer dtype.
pub fn index_dtype_error(op: &'static str, dtype: DType) -> Error {
    Error::invalid(
        op,
        format!("the index must have an integer dtype, got {dtype}"),
    )
}

/// Position `v` on an axis of `size` (negative counts from the end), or an error naming it.
#[inline]
fn resolve(op: &'static str, v: i128, along: Along) -> Result<isize> {
    // i128 holds every index of every integer dtype (u64 included) and `size <= isize::MAX`,
    // so neither the sum nor the casts can overflow.
    let w = if v < 0 { v + along.size as i128 } else { v };
    if w < 0 || w >= along.size as i128 {
        return Err(Error::IndexOutOfRange {
            op,
            index: v.clamp(isize::MIN as i128, isize::MAX as i128) as isize,
            axis: along.axis,
            size: along.size,
        });
    }
    Ok(w as isize)
}

/// Calls `f` with the offsets of each operand of `plan`, element by element in C order.
fn walk<const K: usize>(
    plan: &LoopPlan,
    mut f: impl FnMut([usize; K]) -> Result<()>,
) -> Result<()> {
    plan.runs::<K>(0..plan.numel())
        .elements()
        .try_for_each(&mut f)
}

fn gather_kernel<T: CpuElement, I: Copy + Into<i128>>(
    op: &'static str,
    src: &[T],
    ix: &[I],
    plan: &LoopPlan,
    along: Along,
) -> Result<Vec<T>> {
    // Sized by the index, which may be a broadcast view far larger than memory: checked.
    let mut out = crate::pool::take::<T>(op, plan.numel())?;
    let mut slots = out.iter_mut();
    walk(plan, |[oi, ob]| {
        let k = resolve(op, ix[oi].into(), along)?;
        if let Some(slot) = slots.next() {
            *slot = src[(ob as isize + k * along.stride) as usize];
        }
        Ok(())
    })?;
    Ok(out)
}

/// `out[p] = src[base(p) + index[p] * along.stride]` over the index's shape, contiguous.
pub fn gather(
    op: &'static str,
    (src, base): (&CpuStorage, &Layout),
    (index, li): (&CpuStorage, &Layout),
    along: Along,
) -> Result<CpuStorage> {
    let plan = LoopPlan::new(&[li, base]);
    Ok(with_storage!(src, v => with_index!(index, op, ix => {
        CpuStorage::from_vec(gather_kernel(op, v, ix, &plan, along)?)
    })))
}

/// Addition as `scatter_add` accumulates: wrapping for integers (as PyTorch), logical or for
/// bool (as NumPy's add), and rounding to the dtype after every step for halves.
trait Accumulate: Copy {
    fn acc(self, rhs: Self) -> Self;
}
macro_rules! accumulate {
    ($($t:ty => $f:expr),* $(,)?) => {$(
        impl Accumulate for $t {
            #[inline]
            fn acc(self, rhs: Self) -> Self {
                $f(self, rhs)
            }
        }
    )*};
}
accumulate!(
    f32 => |a, b| a + b, f64 => |a, b| a + b,
    half::f16 => |a, b| a + b, half::bf16 => |a, b| a + b,
    i32 => i32::wrapping_add, i64 => i64::wrapping_add, u8 => u8::wrapping_add,
    i8 => i8::wrapping_add, i16 => i16::wrapping_add, u16 => u16::wrapping_add,
    u32 => u32::wrapping_add, u64 => u64::wrapping_add,
    bool => |a, b| a | b,
    quill_core::C64 => |a, b| a + b, quill_core::C128 => |a, b| a + b,
);

fn scatter_add_kernel<T: CpuElement + Accumulate, I: Copy + Into<i128>>(
    op: &'static str,
    out: &mut CpuStorage,
    src: &CpuStorage,
    ix: &[I],
    plan: &LoopPlan,
    along: Along,
) -> Result<()> {
    let wrong = |got: DType| Error::DTypeMismatch {
        op,
        expected: T::DTYPE,
        got,
    };
    let src_dtype = src.dtype();
    let s = T::slice(src).ok_or_else(|| wrong(src_dtype))?;
    let out_dtype = out.dtype();
    let o = T::slice_mut(out).ok_or_else(|| wrong(out_dtype))?;
    walk(plan, |[oi, os, ob]| {
        let k = resolve(op, ix[oi].into(), along)?;
        let at = (ob as isize + k * along.stride) as usize;
        o[at] = o[at].acc(s[os]);
        Ok(())
    })
}

/// `dst[base(p) + index[p] * along.stride] += src[p]` in C order of the index; `src` has the
/// index's shape and `dst`'s dtype. Entries before an out-of-range index are already added
/// when the error returns, so callers scatter into a fresh copy.
pub fn scatter_add(
    op: &'static str,
    (dst, base): (&mut CpuStorage, &Layout),
    (src, ls): (&CpuStorage, &Layout),
    (index, li): (&CpuStorage, &Layout),
    along: Along,
) -> Result<()> {
    let plan = LoopPlan::new(&[li, ls, base]);
    dispatch_dtype!(dst.dtype(), T => with_index!(index, op, ix => {
        scatter_add_kernel::<T, _>(op, dst, src, ix, &plan, along)
    }))
}
