//! quill-cpu: the CPU backend. `CpuStorage` (one typed buffer, from a size-class pool) and
//! its kernels: the strided copy family (compact, setitem, fill, cast), elementwise, reductions,
//! matmul (quill-gemm's, through `matmul.rs`), im2col convolution, max pooling, batch
//! normalisation, fused attention, gather / scatter, sort / cumsum and fused optimizer updates,
//! threaded through `par` (quill-par's fork-join on rayon's pool), with cache-tiled and SIMD
//! paths chosen at run time. `backend.rs` exposes them through quill-core's `Backend` trait.

#![warn(missing_docs)]

pub mod attention;
mod backend;
pub mod batchnorm;
pub mod buf;
pub mod cast;
pub mod conv;
pub mod copy;
pub mod elementwise;
pub mod fill;
pub mod fused;
pub mod index;
pub mod matmul;
pub mod maxpool;
mod maxpool_avx512;
pub mod optim;
pub mod order;
pub mod par;
pub mod pool;
pub mod reduce;
pub mod storage;
pub mod transpose;

/// Run-time SIMD selection (`with_best_simd`), quill-par's.
pub use quill_par::simd;

pub use storage::{Buf, CpuElement, CpuStorage};

use quill_core::{Element, Error, Layout, Result, Scalar};

/// Copies `src` through `src_l` into `dst` through `dst_l` (same shape, same dtype). The
/// caller resolves aliasing: `dst` and `src` are distinct buffers here.
pub fn copy(dst: &mut CpuStorage, dst_l: &Layout, src: &CpuStorage, src_l: &Layout) -> Result<()> {
    use bytemuck::{cast_slice as r, cast_slice_mut as w};
    use copy::copy_words as cw;
    use CpuStorage as S;
    match (dst, src) {
        (S::F32(d), S::F32(s)) => cw::<u32>(w(d), dst_l, r(s), src_l),
        (S::I32(d), S::I32(s)) => cw::<u32>(w(d), dst_l, r(s), src_l),
        (S::F64(d), S::F64(s)) => cw::<u64>(w(d), dst_l, r(s), src_l),
        (S::I64(d), S::I64(s)) => cw::<u64>(w(d), dst_l, r(s), src_l),
        (S::F16(d), S::F16(s)) => cw::<u16>(w(d), dst_l, r(s), src_l),
        (S::BF16(d), S::BF16(s)) => cw::<u16>(w(d), dst_l, r(s), src_l),
        (S::U8(d), S::U8(s)) => cw::<u8>(d, dst_l, s, src_l),
        (S::Bool(d), S::Bool(s)) => cw::<bool>(d, dst_l, s, src_l),
        (S::I8(d), S::I8(s)) => cw::<u8>(w(d), dst_l, r(s), src_l),
        (S::I16(d), S::I16(s)) => cw::<u16>(w(d), dst_l, r(s), src_l),
        (S::U16(d), S::U16(s)) => cw::<u16>(d, dst_l, s, src_l),
        (S::U32(d), S::U32(s)) => cw::<u32>(d, dst_l, s, src_l),
        (S::U64(d), S::U64(s)) => cw::<u64>(d, dst_l, s, src_l),
        (S::C64(d), S::C64(s)) => cw(d, dst_l, s, src_l),
        (S::C128(d), S::C128(s)) => cw(d, dst_l, s, src_l),
        (d, s) => {
            return Err(Error::DTypeMismatch {
                op: "copy",
                expected: d.dtype(),
                got: s.dtype(),
            })
        }
    }
    Ok(())
}

/// A contiguous copy of `src` seen through `l`.
pub fn compact(src: &CpuStorage, l: &Layout) -> Result<CpuStorage> {
    let mut out = CpuStorage::for_overwrite("compact", src.dtype(), l.numel())?;
    let out_l = Layout::contiguous(l.shape())?;
    copy(&mut out, &out_l, src, l)?;
    Ok(out)
}

/// Writes `value` (cast to the storage's dtype with NumPy's rules) at every element of `l`.
pub fn fill(dst: &mut CpuStorage, l: &Layout, value: Scalar) {
    with_storage!(dst, d => fill::fill_strided(d, l, Element::from_scalar(value)))
}

pub use cast::cast;
