//! Linear algebra over the last two dims of an array, batched over the leading dims (broadcast
//! between the operands where an op takes two), on any strides: the Array API standard's
//! `linalg` extension. The factorizations (`factor.rs`: solve, inv, det, slogdet, cholesky, qr,
//! svd, eigh and what derives from them) run on faer, in f64 on the host, and come back in the
//! input's float dtype (integers and bool become f64, as NumPy's do); an operand on a GPU goes
//! through the host, counted in `host_round_trips`. The rest (`compose.rs`: norms, trace,
//! diagonal, outer, cross, tensordot, matrix_power) are NDArray ops, on any device and dtype.

mod compose;
mod factor;

pub use compose::{
    cross, diagonal, matrix_norm, matrix_power, outer, tensordot, trace, vector_norm, NormOrd,
};
pub use factor::{
    cholesky, det, eigh, eigvalsh, inv, matrix_rank, pinv, qr, slogdet, solve, svd, svdvals, QrMode,
};

use crate::{Device, NDArray};
use quill_core::{DType, Error, Result};

/// A stack of `m` x `n` matrices in f64, row-major one after another, with the batch shape
/// they came from: what the factorizations read.
pub(crate) struct Stack {
    pub batch: Vec<usize>,
    pub m: usize,
    pub n: usize,
    pub data: Vec<f64>,
}

impl Stack {
    /// Matrix `i` of the stack, row-major.
    pub fn matrix(&self, i: usize) -> &[f64] {
        let size = self.m * self.n;
        &self.data[i * size..(i + 1) * size]
    }

    /// How many matrices.
    pub fn count(&self) -> usize {
        self.batch.iter().product()
    }
}

/// The dtype results come back in: the input's float dtype, or f64 for integers and bool.
pub(crate) fn result_dtype(a: &NDArray) -> DType {
    if a.dtype().is_float() {
        a.dtype()
    } else {
        DType::F64
    }
}

/// Checks that `a` is a matrix or a stack of them (at least two dims) and, when `square`,
/// that the last two dims are equal; returns them.
pub(crate) fn check_matrices(
    op: &'static str,
    a: &NDArray,
    square: bool,
) -> Result<(usize, usize)> {
    refuse_complex(op, a)?;
    let nd = a.ndim();
    if nd < 2 {
        return Err(Error::invalid(
            op,
            format!(
                "needs a matrix or a stack of matrices (at least 2 dims), got shape {:?}",
                a.shape()
            ),
        ));
    }
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    if square && m != n {
        return Err(Error::invalid(
            op,
            format!(
                "needs square matrices, got shape {:?} ({m} x {n} in the last two dims)",
                a.shape()
            ),
        ));
    }
    Ok((m, n))
}

/// Checks `a` as `check_matrices` does and reads it as a stack of matrices in f64, from the
/// host (counting a round trip for a GPU array).
pub(crate) fn stack(op: &'static str, a: &NDArray, square: bool) -> Result<Stack> {
    let nd = a.ndim();
    let (m, n) = check_matrices(op, a, square)?;
    let host = to_host(op, a)?;
    let host = if host.dtype() == DType::F64 {
        host
    } else {
        host.astype(DType::F64)?
    };
    Ok(Stack {
        batch: a.shape()[..nd - 2].to_vec(),
        m,
        n,
        data: host.to_vec::<f64>()?,
    })
}

/// `a` on the host, noting a round trip when it was elsewhere.
/// The factorizations work in f64: a complex operand would lose its imaginary part, so it is
/// refused by name until they have complex forms.
fn refuse_complex(op: &'static str, a: &NDArray) -> Result<()> {
    if a.dtype().is_complex() {
        return Err(Error::invalid(
            op,
            format!(
                "complex matrices ({}) are not supported by quill's linalg yet; it works on \
                 real ones",
                a.dtype()
            ),
        ));
    }
    Ok(())
}

pub(crate) fn to_host(op: &'static str, a: &NDArray) -> Result<NDArray> {
    refuse_complex(op, a)?;
    crate::fallback::note_off_host(op, a.device());
    a.to_device(Device::Cpu)
}

/// An array of `shape` from f64 values, in `dtype`, on `device`.
pub(crate) fn build(
    data: Vec<f64>,
    shape: &[usize],
    dtype: DType,
    device: Device,
) -> Result<NDArray> {
    let a = NDArray::from_vec(data, shape)?;
    let a = if dtype == DType::F64 {
        a
    } else {
        a.astype(dtype)?
    };
    a.to_device(device)
}

/// `batch` followed by `tail`.
pub(crate) fn shape_of(batch: &[usize], tail: &[usize]) -> Vec<usize> {
    batch.iter().chain(tail).copied().collect()
}

/// The broadcast of two batch shapes (NumPy's rule), or an error naming both operands' shapes.
pub(crate) fn broadcast_batch(
    op: &'static str,
    a: &[usize],
    b: &[usize],
    shapes: (&[usize], &[usize]),
) -> Result<Vec<usize>> {
    let nd = a.len().max(b.len());
    let at = |s: &[usize], i: usize| {
        if i + s.len() >= nd {
            s[i + s.len() - nd]
        } else {
            1
        }
    };
    (0..nd)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y || y == 1 => Ok(x),
            (1, y) => Ok(y),
            (x, y) => Err(Error::invalid(
                op,
                format!(
                    "the batch dims of shapes {:?} and {:?} do not broadcast ({x} vs {y})",
                    shapes.0, shapes.1
                ),
            )),
        })
        .collect()
}
