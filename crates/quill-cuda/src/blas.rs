//! Matmul through cuBLAS strided-batched GEMM. quill's arrays are row-major and cuBLAS is
//! column-major, so `C = A @ B` runs as `C^T = B^T A^T`. A transposed view needs no copy: a
//! matrix whose rows are contiguous is passed with op N and its row stride as the leading
//! dimension, one whose columns are contiguous (a `.mT` view) with op T. Anything else, and a
//! batch that is not one evenly strided dim, is compacted first.

use crate::ops::compact;
use crate::storage::CudaStorage;
use cudarc::cublas::{result, sys};
use quill_core::{DType, Error, Layout, Result};

/// How cuBLAS reads one operand: its transpose flag as seen column-major, leading dimension,
/// batch stride and element offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Operand {
    /// True when the row-major matrix must be read transposed by cuBLAS (its columns are
    /// contiguous).
    pub trans: bool,
    pub ld: i64,
    pub batch_stride: i64,
    pub offset: i64,
}

/// The cuBLAS view of a layout of shape [batch, rows, cols] (batch may be 1), or None when it
/// has none without a copy.
pub(crate) fn operand(l: &Layout) -> Option<Operand> {
    let (sh, st) = (l.shape(), l.strides());
    let nd = sh.len();
    if nd != 3 {
        return None;
    }
    let (rows, cols) = (sh[1] as isize, sh[2] as isize);
    let (rs, cs) = (st[1], st[2]);
    let (trans, ld) = if cs == 1 && (rs >= cols.max(1) || rows <= 1) {
        (false, rs.max(cols).max(1))
    } else if rs == 1 && (cs >= rows.max(1) || cols <= 1) {
        (true, cs.max(rows).max(1))
    } else {
        return None;
    };
    let bs = if sh[0] <= 1 { 0 } else { st[0] };
    if bs < 0 {
        return None;
    }
    Some(Operand {
        trans,
        ld: ld as i64,
        batch_stride: bs as i64,
        offset: l.offset() as i64,
    })
}

/// `a @ b` for `a` [batch, m, k] and `b` [batch, k, n] (batch dims already broadcast, a size-1
/// batch may have stride 0), f32 or f64, into a fresh contiguous [batch, m, n].
pub fn matmul(a: &CudaStorage, la: &Layout, b: &CudaStorage, lb: &Layout) -> Result<CudaStorage> {
    const OP: &str = "matmul";
    let (sa, sb) = (la.shape(), lb.shape());
    if sa.len() != 3 || sb.len() != 3 || sa[0] != sb[0] || sa[2] != sb[1] {
        return Err(Error::ShapeMismatch {
            op: OP,
            lhs: sa.into(),
            rhs: sb.into(),
            hint: " (cuda matmul takes [batch, m, k] @ [batch, k, n])".into(),
        });
    }
    if a.ordinal() != b.ordinal() {
        return Err(Error::DeviceMismatch {
            op: OP,
            lhs: format!("cuda:{}", a.ordinal()),
            rhs: format!("cuda:{}", b.ordinal()),
        });
    }
    if a.dtype() != b.dtype() || !matches!(a.dtype(), DType::F32 | DType::F64) {
        return Err(Error::invalid(
            OP,
            format!(
                "cuBLAS path takes two f32 or two f64 operands, got {} and {} (cast first)",
                a.dtype(),
                b.dtype()
            ),
        ));
    }
    let (batch, m, k, n) = (sa[0], sa[1], sa[2], sb[2]);
    let dev = a.device().clone();
    let mut out = CudaStorage::uninit(&dev, batch * m * n, a.dtype())?;
    if batch * m * n == 0 {
        return Ok(out);
    }
    if k == 0 {
        crate::ops::fill(&mut out, &Layout::contiguous(&[batch * m * n])?, 0.0.into())?;
        return Ok(out);
    }
    let fits = |v: usize| i32::try_from(v).is_ok();
    if !(fits(m) && fits(n) && fits(k) && fits(batch)) {
        return Err(Error::invalid(
            OP,
            format!("dims [{batch}, {m}, {k}] @ [.., {k}, {n}] exceed cuBLAS's 32-bit sizes"),
        ));
    }
    // Operands cuBLAS cannot read in place are compacted (contiguous: op N, ld = cols).
    let (ca, la2);
    let (a, la) = match operand(la) {
        Some(_) => (a, la.clone()),
        None => {
            ca = compact(a, la)?;
            la2 = Layout::contiguous(sa)?;
            (&ca, la2)
        }
    };
    let (cb, lb2);
    let (b, lb) = match operand(lb) {
        Some(_) => (b, lb.clone()),
        None => {
            cb = compact(b, lb)?;
            lb2 = Layout::contiguous(sb)?;
            (&cb, lb2)
        }
    };
    let (oa, ob) = (
        operand(&la).expect("checked"),
        operand(&lb).expect("checked"),
    );
    let blas = dev.blas()?;
    let op_of = |t: bool| {
        if t {
            sys::cublasOperation_t::CUBLAS_OP_T
        } else {
            sys::cublasOperation_t::CUBLAS_OP_N
        }
    };
    let size = a.dtype().size_in_bytes() as u64;
    let (pa, pb, pc) = (
        a.ptr() + oa.offset as u64 * size,
        b.ptr() + ob.offset as u64 * size,
        out.ptr_mut(),
    );
    let (mi, ni, ki) = (m as i32, n as i32, k as i32);
    let stride_c = (m * n) as i64;
    // Column-major C^T (n x m) = B^T (n x k) @ A^T (k x m): B goes first.
    // SAFETY: the pointers address buffers that hold every element the layouts reach
    // (checked by quill-core when the views were made; `out` holds batch*m*n elements); the
    // leading dimensions and batch strides are those layouts' strides; the handle is bound to
    // this device's stream.
    let r = unsafe {
        match a.dtype() {
            DType::F32 => {
                let (alpha, beta) = (1.0f32, 0.0f32);
                result::sgemm_strided_batched(
                    *blas.handle(),
                    op_of(ob.trans),
                    op_of(oa.trans),
                    ni,
                    mi,
                    ki,
                    &alpha,
                    pb as *const f32,
                    ob.ld as i32,
                    ob.batch_stride,
                    pa as *const f32,
                    oa.ld as i32,
                    oa.batch_stride,
                    &beta,
                    pc as *mut f32,
                    ni,
                    stride_c,
                    batch as i32,
                )
            }
            _ => {
                let (alpha, beta) = (1.0f64, 0.0f64);
                result::dgemm_strided_batched(
                    *blas.handle(),
                    op_of(ob.trans),
                    op_of(oa.trans),
                    ni,
                    mi,
                    ki,
                    &alpha,
                    pb as *const f64,
                    ob.ld as i32,
                    ob.batch_stride,
                    pa as *const f64,
                    oa.ld as i32,
                    oa.batch_stride,
                    &beta,
                    pc as *mut f64,
                    ni,
                    stride_c,
                    batch as i32,
                )
            }
        }
    };
    r.map_err(|e| dev.err(OP, e))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lay(shape: &[usize], strides: &[isize], offset: usize) -> Layout {
        Layout::as_strided(shape, strides, offset, 1 << 20).unwrap()
    }

    #[test]
    fn operands_of_views() {
        // Row-major [2, 3, 4]: op N, ld 4, batch stride 12.
        let c = Layout::contiguous(&[2, 3, 4]).unwrap();
        let o = operand(&c).unwrap();
        assert_eq!((o.trans, o.ld, o.batch_stride, o.offset), (false, 4, 12, 0));
        // Its .mT view [2, 4, 3] strides [12, 1, 4]: op T with ld 4, no copy.
        let t = lay(&[2, 4, 3], &[12, 1, 4], 0);
        let o = operand(&t).unwrap();
        assert_eq!((o.trans, o.ld, o.batch_stride), (true, 4, 12));
        // A column slice of a wider matrix keeps its row stride as ld, with an offset.
        let s = lay(&[1, 3, 2], &[0, 10, 1], 5);
        let o = operand(&s).unwrap();
        assert_eq!((o.trans, o.ld, o.batch_stride, o.offset), (false, 10, 0, 5));
        // Broadcast batch (stride 0) is fine; stepped columns or reversed rows are not.
        assert!(operand(&lay(&[4, 3, 2], &[0, 2, 1], 0)).is_some());
        assert!(operand(&lay(&[1, 3, 2], &[6, 4, 2], 0)).is_none());
        assert!(operand(&lay(&[1, 3, 2], &[6, -2, 1], 4)).is_none());
        assert!(operand(&lay(&[2, 3, 2], &[-6, 2, 1], 6)).is_none());
        assert!(operand(&Layout::contiguous(&[3, 2]).unwrap()).is_none());
    }
}
