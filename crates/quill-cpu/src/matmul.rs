//! The matmul primitive: quill-core layouts and a `CpuStorage` in, quill-gemm's batched product
//! out. This file checks the shapes and dtypes (errors naming both shapes), turns each layout
//! into a `quill_gemm::Operand` (the same buffer, shape, strides and offset) and allocates the
//! contiguous result; the GEMM, its kernels and its threading are quill-gemm's. Shape logic
//! (1-D operands, broadcasting the batch dims) belongs to the caller: the layouts come
//! broadcast, a broadcast dim as stride 0.

use crate::CpuStorage;
use quill_core::{Error, Layout, Result};
use quill_gemm::Operand;

/// The kernel choice and cache sizes, quill-gemm's; re-exported for code that names them here.
pub use quill_gemm::{active_kernel, with_kernel, CacheSizes, Kernel};

/// `a @ b` for layouts of equal rank >= 2 whose batch dims already agree (stride-0 broadcast
/// dims are fine) and storages of one dtype (complex too). Returns the contiguous
/// `(batch.., m, n)` product.
pub fn matmul(a: &CpuStorage, a_l: &Layout, b: &CpuStorage, b_l: &Layout) -> Result<CpuStorage> {
    const OP: &str = "matmul";
    let (sa, sb) = (a_l.shape(), b_l.shape());
    let r = sa.len();
    let mismatch = |hint: String| Error::ShapeMismatch {
        op: OP,
        lhs: sa.into(),
        rhs: sb.into(),
        hint,
    };
    if r < 2 || sb.len() != r || sa[..r - 2] != sb[..r - 2] {
        return Err(mismatch(
            " (the kernel needs equal batch dims and rank >= 2)".into(),
        ));
    }
    if sa[r - 1] != sb[r - 2] {
        return Err(mismatch(format!(
            " (contracted dims {} vs {})",
            sa[r - 1],
            sb[r - 2]
        )));
    }
    if a.dtype() != b.dtype() {
        return Err(Error::DTypeMismatch {
            op: OP,
            expected: a.dtype(),
            got: b.dtype(),
        });
    }
    let len = sa[..r - 2].iter().product::<usize>() * sa[r - 2] * sb[r - 1];
    let mut out = CpuStorage::for_overwrite(OP, a.dtype(), len)?;
    use CpuStorage as S;
    macro_rules! product {
        ($($v:ident),*) => {
            match (a, b, &mut out) {
                $((S::$v(x), S::$v(y), S::$v(o)) => {
                    quill_gemm::matmul(operand(x, a_l), operand(y, b_l), o)
                })*
                _ => unreachable!("dtypes checked above; the output takes the inputs' dtype"),
            }
        };
    }
    // Layouts that passed quill-core's checks lie in their buffers, so quill-gemm's checks pass.
    let done = match (a, b, &mut out) {
        (S::C64(x), S::C64(y), S::C64(o)) => complex(x, a_l, y, b_l, o),
        (S::C128(x), S::C128(y), S::C128(o)) => complex(x, a_l, y, b_l, o),
        _ => product!(F32, F64, F16, BF16, I32, I64, U8, I8, I16, U16, U32, U64, Bool),
    };
    done.map_err(|e| Error::invalid(OP, e.to_string()))?;
    Ok(out)
}

/// A complex product through quill-gemm's, over the buffers read as `[re, im]` pairs.
fn complex<T: quill_gemm::Real + quill_gemm::Pack<T>>(
    a: &[num_complex::Complex<T>],
    a_l: &Layout,
    b: &[num_complex::Complex<T>],
    b_l: &Layout,
    out: &mut [num_complex::Complex<T>],
) -> std::result::Result<(), quill_gemm::Error>
where
    num_complex::Complex<T>: bytemuck::Pod,
{
    quill_gemm::matmul_complex::<T>(
        operand(bytemuck::cast_slice(a), a_l),
        operand(bytemuck::cast_slice(b), b_l),
        bytemuck::cast_slice_mut(out),
    )
}

/// `l` over `data` as quill-gemm describes a strided operand.
fn operand<'a, T>(data: &'a [T], l: &'a Layout) -> Operand<'a, T> {
    Operand {
        data,
        offset: l.offset(),
        shape: l.shape(),
        strides: l.strides(),
    }
}
