//! `quill.array_api.fft`'s native half: one Python function per `quill::fft` function, NDArray
//! in and out (the Python module adds the standard's names and keyword arguments).

use crate::convert::{dtype_of, Q};
use crate::ndarray::PyNDArray;
use pyo3::prelude::*;
use quill::fft::{self, Norm};
use quill::DType;

type OneD = fn(&quill::NDArray, Option<usize>, isize, Norm) -> quill::Result<quill::NDArray>;
type ND =
    fn(&quill::NDArray, Option<&[usize]>, Option<&[isize]>, Norm) -> quill::Result<quill::NDArray>;

fn one_d(f: OneD, a: &PyNDArray, n: Option<usize>, axis: isize, norm: &str) -> PyResult<PyNDArray> {
    f(&a.inner, n, axis, Norm::parse(norm).q()?)
        .q()
        .map(PyNDArray::wrap)
}

fn n_d(
    f: ND,
    a: &PyNDArray,
    s: Option<Vec<usize>>,
    axes: Option<Vec<isize>>,
    norm: &str,
) -> PyResult<PyNDArray> {
    f(
        &a.inner,
        s.as_deref(),
        axes.as_deref(),
        Norm::parse(norm).q()?,
    )
    .q()
    .map(PyNDArray::wrap)
}

/// The DFT along `axis` of `n` points.
#[quill_py_guard::guard]
#[pyfunction]
fn _fft(a: PyRef<PyNDArray>, n: Option<usize>, axis: isize, norm: &str) -> PyResult<PyNDArray> {
    one_d(fft::fft, &a, n, axis, norm)
}

/// The inverse DFT along `axis`.
#[quill_py_guard::guard]
#[pyfunction]
fn _ifft(a: PyRef<PyNDArray>, n: Option<usize>, axis: isize, norm: &str) -> PyResult<PyNDArray> {
    one_d(fft::ifft, &a, n, axis, norm)
}

/// The DFT of a real signal, non-negative frequencies only.
#[quill_py_guard::guard]
#[pyfunction]
fn _rfft(a: PyRef<PyNDArray>, n: Option<usize>, axis: isize, norm: &str) -> PyResult<PyNDArray> {
    one_d(fft::rfft, &a, n, axis, norm)
}

/// The real signal of a half spectrum.
#[quill_py_guard::guard]
#[pyfunction]
fn _irfft(a: PyRef<PyNDArray>, n: Option<usize>, axis: isize, norm: &str) -> PyResult<PyNDArray> {
    one_d(fft::irfft, &a, n, axis, norm)
}

/// The spectrum of a Hermitian signal.
#[quill_py_guard::guard]
#[pyfunction]
fn _hfft(a: PyRef<PyNDArray>, n: Option<usize>, axis: isize, norm: &str) -> PyResult<PyNDArray> {
    one_d(fft::hfft, &a, n, axis, norm)
}

/// The inverse of hfft.
#[quill_py_guard::guard]
#[pyfunction]
fn _ihfft(a: PyRef<PyNDArray>, n: Option<usize>, axis: isize, norm: &str) -> PyResult<PyNDArray> {
    one_d(fft::ihfft, &a, n, axis, norm)
}

/// The n-dimensional DFT.
#[quill_py_guard::guard]
#[pyfunction]
fn _fftn(
    a: PyRef<PyNDArray>,
    s: Option<Vec<usize>>,
    axes: Option<Vec<isize>>,
    norm: &str,
) -> PyResult<PyNDArray> {
    n_d(fft::fftn, &a, s, axes, norm)
}

/// The n-dimensional inverse DFT.
#[quill_py_guard::guard]
#[pyfunction]
fn _ifftn(
    a: PyRef<PyNDArray>,
    s: Option<Vec<usize>>,
    axes: Option<Vec<isize>>,
    norm: &str,
) -> PyResult<PyNDArray> {
    n_d(fft::ifftn, &a, s, axes, norm)
}

/// The n-dimensional DFT of a real signal.
#[quill_py_guard::guard]
#[pyfunction]
fn _rfftn(
    a: PyRef<PyNDArray>,
    s: Option<Vec<usize>>,
    axes: Option<Vec<isize>>,
    norm: &str,
) -> PyResult<PyNDArray> {
    n_d(fft::rfftn, &a, s, axes, norm)
}

/// The inverse of rfftn.
#[quill_py_guard::guard]
#[pyfunction]
fn _irfftn(
    a: PyRef<PyNDArray>,
    s: Option<Vec<usize>>,
    axes: Option<Vec<isize>>,
    norm: &str,
) -> PyResult<PyNDArray> {
    n_d(fft::irfftn, &a, s, axes, norm)
}

fn freq_dtype(dtype: Option<&Bound<'_, PyAny>>) -> PyResult<DType> {
    dtype.map_or(Ok(DType::F64), dtype_of)
}

/// The sample frequencies of an n-point DFT.
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (n, d, dtype=None))]
fn _fftfreq(n: usize, d: f64, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<PyNDArray> {
    fft::fftfreq(n, d, freq_dtype(dtype)?)
        .q()
        .map(PyNDArray::wrap)
}

/// The non-negative sample frequencies of an n-point rfft.
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (n, d, dtype=None))]
fn _rfftfreq(n: usize, d: f64, dtype: Option<&Bound<'_, PyAny>>) -> PyResult<PyNDArray> {
    fft::rfftfreq(n, d, freq_dtype(dtype)?)
        .q()
        .map(PyNDArray::wrap)
}

/// Adds the `_fft` submodule (the functions above) to the native module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(m.py(), "_fft")?;
    sub.add_function(wrap_pyfunction!(_fft, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_ifft, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_rfft, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_irfft, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_hfft, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_ihfft, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_fftn, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_ifftn, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_rfftn, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_irfftn, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_fftfreq, &sub)?)?;
    sub.add_function(wrap_pyfunction!(_rfftfreq, &sub)?)?;
    m.add_submodule(&sub)
}
