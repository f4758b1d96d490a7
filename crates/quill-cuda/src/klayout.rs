//! The layout every strided kernel receives by value (mirrors `struct Layout` in
//! `kernels/common.cuh`): after quill-core's `LoopPlan` has coalesced the dims of all operands
//! together and dropped size-1 dims, one operand's offset, shape and signed strides.

use cudarc::driver::DeviceRepr;
use quill_core::{Error, LoopPlan, Result};

/// The most dims a kernel walks after coalescing.
pub const MAX_DIMS: usize = 8;

/// One operand's layout as a kernel argument, passed by value; the field order and types are
/// the C `struct Layout`'s, which the kernels index directly.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KLayout {
    /// Element (not byte) offset of the first element in the buffer.
    pub offset: i64,
    /// How many leading entries of `shape` and `strides` are in use (at most `MAX_DIMS`).
    pub ndim: i32,
    /// Always 0: the 4 bytes that align `shape` to 8, made explicit so that no byte copied to
    /// the device is uninitialised padding.
    pub pad: i32,
    /// Sizes of the first `ndim` dims; the unused tail is 1.
    pub shape: [i64; MAX_DIMS],
    /// Signed strides in elements of the first `ndim` dims (negative for flipped views); the
    /// unused tail is 0.
    pub strides: [i64; MAX_DIMS],
}

// SAFETY: a #[repr(C)] struct of plain integers with the field order, sizes and alignment of
// the C struct the kernels declare (8-byte aligned, 144 bytes, no implicit padding).
unsafe impl DeviceRepr for KLayout {}

const _: () = assert!(std::mem::size_of::<KLayout>() == 16 + 16 * MAX_DIMS);

/// The kernel layouts of every operand of `plan`, in the plan's operand order. Errors when
/// the operands still have more than `MAX_DIMS` dims after merging (the caller can compact).
pub fn layouts(op: &'static str, plan: &LoopPlan) -> Result<Vec<KLayout>> {
    let nd = plan.ndim();
    if nd > MAX_DIMS {
        return Err(Error::invalid(
            op,
            format!(
                "CUDA kernels walk at most {MAX_DIMS} dims after merging; these operands keep \
                 {nd} (shape {:?}); compact() them first",
                plan.shape
            ),
        ));
    }
    Ok(plan
        .strides
        .iter()
        .zip(&plan.offsets)
        .map(|(st, &off)| {
            let mut l = KLayout {
                offset: off as i64,
                ndim: nd as i32,
                pad: 0,
                shape: [1; MAX_DIMS],
                strides: [0; MAX_DIMS],
            };
            for (d, (&n, &s)) in plan.shape.iter().zip(st).enumerate() {
                l.shape[d] = n as i64;
                l.strides[d] = s as i64;
            }
            l
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use quill_core::Layout;

    /// The C-order offsets a kernel computes from a KLayout (the `offset_of` of common.cuh).
    fn offsets(l: &KLayout, n: usize) -> Vec<i64> {
        (0..n as i64)
            .map(|mut k| {
                let mut off = l.offset;
                for d in (0..l.ndim as usize).rev() {
                    off += (k % l.shape[d]) * l.strides[d];
                    k /= l.shape[d];
                }
                off
            })
            .collect()
    }

    #[test]
    fn layouts_preserve_offsets_of_views() {
        let base = Layout::contiguous(&[4, 1, 3, 5]).unwrap();
        let permuted = base.permute(&[3, 1, 0, 2]).unwrap();
        let out = Layout::contiguous(permuted.shape()).unwrap();
        let plan = LoopPlan::new(&[&out, &permuted]);
        let ks = layouts("t", &plan).unwrap();
        let want: Vec<i64> = {
            let (sh, st) = (permuted.shape(), permuted.strides());
            let mut v = vec![];
            for a in 0..sh[0] {
                for b in 0..sh[1] {
                    for c in 0..sh[2] {
                        for d in 0..sh[3] {
                            v.push(
                                permuted.offset() as i64
                                    + (a as isize * st[0]
                                        + b as isize * st[1]
                                        + c as isize * st[2]
                                        + d as isize * st[3])
                                        as i64,
                            );
                        }
                    }
                }
            }
            v
        };
        assert_eq!(offsets(&ks[1], 60), want);
        assert_eq!(offsets(&ks[0], 60), (0..60).collect::<Vec<_>>());
        assert!(ks[1].ndim <= 3, "size-1 dim dropped: {ks:?}");
    }

    #[test]
    fn too_many_dims_is_an_error() {
        // Nine dims of size 2 with strides that never merge.
        let shape = [2usize; 9];
        let strides: Vec<isize> = (0..9).map(|i| 3isize.pow(i as u32)).collect();
        let l = Layout::as_strided(&shape, &strides, 0, 20_000).unwrap();
        let out = Layout::contiguous(&shape).unwrap();
        let plan = LoopPlan::new(&[&out, &l]);
        let e = layouts("compact", &plan).unwrap_err().to_string();
        assert!(e.contains("compact") && e.contains("at most 8"), "{e}");
    }
}
