//! `quill.array_api.linalg`'s native half: one Python function per `quill::linalg` function,
//! NDArray in and out (the Python module adds the standard's names and result tuples).

use crate::convert::Q;
use crate::ndarray::PyNDArray;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use quill::linalg::{self, NormOrd, QrMode};

/// A tolerance as the standard allows it: None, a Python number, or an array (one per matrix).
enum Rtol {
    Value(Option<f64>),
    Array(quill::NDArray),
}

fn rtol_of(rtol: Option<&Bound<'_, PyAny>>) -> PyResult<Rtol> {
    match rtol {
        None => Ok(Rtol::Value(None)),
        Some(r) if r.is_none() => Ok(Rtol::Value(None)),
        Some(r) => match r.extract::<PyRef<PyNDArray>>() {
            Ok(a) if a.inner.ndim() > 0 => Ok(Rtol::Array(a.inner.clone())),
            _ => Ok(Rtol::Value(Some(r.extract::<f64>()?))),
        },
    }
}

fn wrap(a: quill::NDArray) -> PyNDArray {
    PyNDArray::wrap(a)
}

/// The norm order from Python: a number, `inf` / `-inf`, or "fro" / "nuc".
fn ord_of(ord: Option<&Bound<'_, PyAny>>, matrix: bool) -> PyResult<NormOrd> {
    let Some(o) = ord else {
        return Ok(if matrix {
            NormOrd::Fro
        } else {
            NormOrd::P(2.0)
        });
    };
    if let Ok(s) = o.extract::<String>() {
        return match s.as_str() {
            "fro" => Ok(NormOrd::Fro),
            "nuc" => Ok(NormOrd::Nuc),
            _ => Err(PyValueError::new_err(format!(
                "norm: ord {s:?} is not 'fro', 'nuc' or a number"
            ))),
        };
    }
    Ok(NormOrd::P(o.extract::<f64>()?))
}

/// x with A x = b for each square matrix of `a`; `b` is a vector when 1-D, else (..., n, k).
#[quill_py_guard::guard]
#[pyfunction]
fn _solve(a: PyRef<PyNDArray>, b: PyRef<PyNDArray>) -> PyResult<PyNDArray> {
    linalg::solve(&a.inner, &b.inner).q().map(wrap)
}

/// The inverse of each square matrix.
#[quill_py_guard::guard]
#[pyfunction]
fn _inv(a: PyRef<PyNDArray>) -> PyResult<PyNDArray> {
    linalg::inv(&a.inner).q().map(wrap)
}

/// The determinant of each square matrix.
#[quill_py_guard::guard]
#[pyfunction]
fn _det(a: PyRef<PyNDArray>) -> PyResult<PyNDArray> {
    linalg::det(&a.inner).q().map(wrap)
}

/// (sign, log |det|) of each square matrix.
#[quill_py_guard::guard]
#[pyfunction]
fn _slogdet(a: PyRef<PyNDArray>) -> PyResult<(PyNDArray, PyNDArray)> {
    let (s, l) = linalg::slogdet(&a.inner).q()?;
    Ok((wrap(s), wrap(l)))
}

/// The Cholesky factor (lower, or upper with `upper=True`).
#[quill_py_guard::guard]
#[pyfunction]
fn _cholesky(a: PyRef<PyNDArray>, upper: bool) -> PyResult<PyNDArray> {
    linalg::cholesky(&a.inner, upper).q().map(wrap)
}

/// (Q, R); `mode` is "reduced" or "complete".
#[quill_py_guard::guard]
#[pyfunction]
fn _qr(a: PyRef<PyNDArray>, mode: &str) -> PyResult<(PyNDArray, PyNDArray)> {
    let mode = match mode {
        "reduced" => QrMode::Reduced,
        "complete" => QrMode::Complete,
        _ => {
            return Err(PyValueError::new_err(format!(
                "qr: mode {mode:?} is not 'reduced' or 'complete'"
            )))
        }
    };
    let (q, r) = linalg::qr(&a.inner, mode).q()?;
    Ok((wrap(q), wrap(r)))
}

/// (U, S, Vh) of each matrix.
#[quill_py_guard::guard]
#[pyfunction]
fn _svd(a: PyRef<PyNDArray>, full_matrices: bool) -> PyResult<(PyNDArray, PyNDArray, PyNDArray)> {
    let (u, s, vh) = linalg::svd(&a.inner, full_matrices).q()?;
    Ok((wrap(u), wrap(s), wrap(vh)))
}

/// The singular values of each matrix, descending.
#[quill_py_guard::guard]
#[pyfunction]
fn _svdvals(a: PyRef<PyNDArray>) -> PyResult<PyNDArray> {
    linalg::svdvals(&a.inner).q().map(wrap)
}

/// (eigenvalues ascending, eigenvectors as columns) of each symmetric matrix.
#[quill_py_guard::guard]
#[pyfunction]
fn _eigh(a: PyRef<PyNDArray>) -> PyResult<(PyNDArray, PyNDArray)> {
    let (w, v) = linalg::eigh(&a.inner).q()?;
    Ok((wrap(w), wrap(v)))
}

/// (eigenvalues, eigenvectors as unit columns) of each general square matrix, both complex.
#[quill_py_guard::guard]
#[pyfunction]
fn _eig(a: PyRef<PyNDArray>) -> PyResult<(PyNDArray, PyNDArray)> {
    let (w, v) = linalg::eig(&a.inner).q()?;
    Ok((wrap(w), wrap(v)))
}

/// The eigenvalues of each general square matrix, complex.
#[quill_py_guard::guard]
#[pyfunction]
fn _eigvals(a: PyRef<PyNDArray>) -> PyResult<PyNDArray> {
    linalg::eigvals(&a.inner).q().map(wrap)
}

/// The pseudo-inverse of each matrix; `rtol` relative to the largest singular value.
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (a, rtol = None))]
fn _pinv(a: PyRef<PyNDArray>, rtol: Option<&Bound<'_, PyAny>>) -> PyResult<PyNDArray> {
    match rtol_of(rtol)? {
        Rtol::Array(r) => linalg::pinv_rtol(&a.inner, &r),
        Rtol::Value(v) => linalg::pinv(&a.inner, v),
    }
    .q()
    .map(wrap)
}

/// The rank of each matrix (int64).
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (a, rtol = None))]
fn _matrix_rank(a: PyRef<PyNDArray>, rtol: Option<&Bound<'_, PyAny>>) -> PyResult<PyNDArray> {
    match rtol_of(rtol)? {
        Rtol::Array(r) => linalg::matrix_rank_rtol(&a.inner, &r),
        Rtol::Value(v) => linalg::matrix_rank(&a.inner, v),
    }
    .q()
    .map(wrap)
}

/// The `ord`-norm of `x` over `axis` (an int, a tuple, or None for all).
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (x, axis = None, keepdims = false, ord = None))]
fn _vector_norm(
    x: PyRef<PyNDArray>,
    axis: Option<Vec<isize>>,
    keepdims: bool,
    ord: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyNDArray> {
    let ord = ord_of(ord, false)?;
    linalg::vector_norm(&x.inner, axis.as_deref(), keepdims, ord)
        .q()
        .map(wrap)
}

/// The `ord`-norm of each matrix ("fro" by default).
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (x, keepdims = false, ord = None))]
fn _matrix_norm(
    x: PyRef<PyNDArray>,
    keepdims: bool,
    ord: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyNDArray> {
    let ord = ord_of(ord, true)?;
    linalg::matrix_norm(&x.inner, keepdims, ord).q().map(wrap)
}

/// The diagonal `offset` of each matrix, a view.
#[quill_py_guard::guard]
#[pyfunction]
fn _diagonal(x: PyRef<PyNDArray>, offset: isize) -> PyResult<PyNDArray> {
    linalg::diagonal(&x.inner, offset).q().map(wrap)
}

/// The sum of each matrix's diagonal `offset`.
#[quill_py_guard::guard]
#[pyfunction]
fn _trace(x: PyRef<PyNDArray>, offset: isize) -> PyResult<PyNDArray> {
    linalg::trace(&x.inner, offset).q().map(wrap)
}

/// The outer product of two vectors.
#[quill_py_guard::guard]
#[pyfunction]
fn _outer(a: PyRef<PyNDArray>, b: PyRef<PyNDArray>) -> PyResult<PyNDArray> {
    linalg::outer(&a.inner, &b.inner).q().map(wrap)
}

/// The cross product of 3-vectors along `axis`.
#[quill_py_guard::guard]
#[pyfunction]
fn _cross(a: PyRef<PyNDArray>, b: PyRef<PyNDArray>, axis: isize) -> PyResult<PyNDArray> {
    linalg::cross(&a.inner, &b.inner, axis).q().map(wrap)
}

/// `a`'s axes `axes_a` contracted with `b`'s `axes_b`.
#[quill_py_guard::guard]
#[pyfunction]
fn _tensordot(
    a: PyRef<PyNDArray>,
    b: PyRef<PyNDArray>,
    axes_a: Vec<isize>,
    axes_b: Vec<isize>,
) -> PyResult<PyNDArray> {
    linalg::tensordot(&a.inner, &b.inner, (&axes_a, &axes_b))
        .q()
        .map(wrap)
}

/// Each square matrix to the integer power `n`.
#[quill_py_guard::guard]
#[pyfunction]
fn _matrix_power(a: PyRef<PyNDArray>, n: i64) -> PyResult<PyNDArray> {
    linalg::matrix_power(&a.inner, n).q().map(wrap)
}

/// Adds the `_linalg` submodule (the functions above) to the native module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(m.py(), "_linalg")?;
    sub.add_function(wrap_pyfunction!(_solve, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_inv, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_det, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_slogdet, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_cholesky, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_qr, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_svd, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_svdvals, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_eigh, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_eig, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_eigvals, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_pinv, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_matrix_rank, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_vector_norm, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_matrix_norm, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_diagonal, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_trace, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_outer, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_cross, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_tensordot, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_matrix_power, &sub)?)?;
    m.add_submodule(&sub)
}
