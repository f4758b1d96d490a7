//! Linear algebra over the last two dims of an array, batched over the leading dims (broadcast
//! between the operands where an op takes two), on any strides: the Array API standard's
//! `linalg` extension. The factorizations (`factor.rs`: solve, inv, det, slogdet, cholesky, qr,
//! svd, eigh, eig and what derives from them) run on faer on the host, in f64 for real input
//! and complex128 for complex, and come back in the input's dtype (integers and bool become
//! f64, as NumPy's do; values that are real by nature, such as singular values, in the real
//! dtype of the input's precision); an operand on a GPU goes through the host, counted in
//! `host_round_trips`. The rest (`compose.rs`: norms, trace, diagonal, outer, cross, tensordot,
//! matrix_power) are NDArray ops, on any device and dtype.

mod compose;
mod factor;
mod lu;

pub use compose::{
    cross, diagonal, matrix_norm, matrix_power, outer, tensordot, trace, vector_norm, NormOrd,
};
pub use factor::{
    cholesky, det, eig, eigh, eigvals, eigvalsh, inv, matrix_rank, matrix_rank_rtol, pinv,
    pinv_rtol, qr, slogdet, solve, svd, svdvals, QrMode,
};

use crate::{Device, NDArray};
use quill_core::{DType, Error, Result};

/// The element a factorization runs in: f64 for real input (integers and bool included, as
/// NumPy's), complex128 for complex input. faer works on both; these are what quill adds.
pub(crate) trait Field:
    faer::traits::ComplexField<Real = f64>
    + quill_core::Element
    + Copy
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::MulAssign
{
    /// The dtype the host copy is read in.
    const WIDE: DType;
    /// A real value as this field's element.
    fn of(x: f64) -> Self;
    /// The complex conjugate (itself for reals).
    fn conj(self) -> Self;
    /// |x|.
    fn modulus(self) -> f64;
    /// The real part.
    fn re(self) -> f64;
}

impl Field for f64 {
    const WIDE: DType = DType::F64;
    fn of(x: f64) -> Self {
        x
    }
    fn conj(self) -> Self {
        self
    }
    fn modulus(self) -> f64 {
        self.abs()
    }
    fn re(self) -> f64 {
        self
    }
}

impl Field for quill_core::C128 {
    const WIDE: DType = DType::C128;
    fn of(x: f64) -> Self {
        Self::new(x, 0.0)
    }
    fn conj(self) -> Self {
        num_complex::Complex::conj(&self)
    }
    fn modulus(self) -> f64 {
        self.norm()
    }
    fn re(self) -> f64 {
        self.re
    }
}

/// A stack of `m` x `n` matrices, row-major one after another, with the batch shape they came
/// from: what the factorizations read.
pub(crate) struct Stack<T> {
    pub batch: Vec<usize>,
    pub m: usize,
    pub n: usize,
    pub data: Vec<T>,
}

impl<T> Stack<T> {
    /// Matrix `i` of the stack, row-major.
    pub fn matrix(&self, i: usize) -> &[T] {
        let size = self.m * self.n;
        &self.data[i * size..(i + 1) * size]
    }

    /// How many matrices.
    pub fn count(&self) -> usize {
        self.batch.iter().product()
    }
}

/// The dtype results come back in: the input's float or complex dtype, or f64 for integers and
/// bool.
pub(crate) fn result_dtype(a: &NDArray) -> DType {
    if a.dtype().is_float() || a.dtype().is_complex() {
        a.dtype()
    } else {
        DType::F64
    }
}

/// The real dtype of results that are real whatever the input (singular values, the
/// eigenvalues of a Hermitian matrix, log |det|): f32 for c64, f64 for c128.
pub(crate) fn real_dtype(a: &NDArray) -> DType {
    result_dtype(a).real_part()
}

/// Checks that `a` is a matrix or a stack of them (at least two dims) and, when `square`,
/// that the last two dims are equal; returns them.
pub(crate) fn check_matrices(
    op: &'static str,
    a: &NDArray,
    square: bool,
) -> Result<(usize, usize)> {
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

/// Checks `a` as `check_matrices` does and reads it as a stack of matrices in `T`, from the
/// host (counting a round trip for a GPU array).
pub(crate) fn stack<T: Field>(op: &'static str, a: &NDArray, square: bool) -> Result<Stack<T>> {
    let nd = a.ndim();
    let (m, n) = check_matrices(op, a, square)?;
    let host = to_host(op, a)?;
    let host = if host.dtype() == T::WIDE {
        host
    } else {
        host.astype(T::WIDE)?
    };
    Ok(Stack {
        batch: a.shape()[..nd - 2].to_vec(),
        m,
        n,
        data: host.to_vec::<T>()?,
    })
}

/// `a` on the host, noting a round trip when it was elsewhere.
pub(crate) fn to_host(op: &'static str, a: &NDArray) -> Result<NDArray> {
    crate::fallback::note_off_host(op, a.device());
    a.to_device(Device::Cpu)
}

/// An array of `shape` from `T` values, in `dtype`, on `device`.
pub(crate) fn build<T: quill_core::Element>(
    data: Vec<T>,
    shape: &[usize],
    dtype: DType,
    device: Device,
) -> Result<NDArray> {
    let a = NDArray::from_vec(data, shape)?;
    let a = if dtype == T::DTYPE {
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
