//! The dataset readers behind `quill.data`: MNIST-format IDX files and CIFAR-10's pickled
//! batches are parsed by the Rust loaders (`quill::data`), which check every length, range-check
//! the labels and run no code from a file (the CIFAR unpickler is data-only), so that no dataset
//! is parsed in Python. They hand back raw bytes that `data.py` views with NumPy.
//!
//! A file that cannot be opened is an `OSError` (`FileNotFoundError`, `PermissionError`) naming
//! the path; a malformed file is a `ValueError` with the Rust loader's message.

use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyPermissionError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use quill::data::{Cifar10, MnistRaw};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// The `OSError` subclass Python raises for `e`, with the path in the message.
fn io_err(path: &Path, e: std::io::Error) -> PyErr {
    let msg = format!("{}: {e}", path.display());
    match e.kind() {
        ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
        ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
        _ => PyOSError::new_err(msg),
    }
}

/// A loader's error: `OSError` when the file could not be read, else `ValueError` (the file's
/// contents are at fault). The loaders word every read failure as "<path>: cannot read: <why>".
fn load_err(e: quill::Error) -> PyErr {
    let msg = e.to_string();
    if msg.contains(": cannot read: ") {
        PyOSError::new_err(msg)
    } else {
        PyValueError::new_err(msg)
    }
}

/// Fails with the right `OSError` when `path` cannot be opened.
fn check_readable(path: &Path) -> PyResult<()> {
    std::fs::File::open(path)
        .map(drop)
        .map_err(|e| io_err(path, e))
}

/// `(pixels, (n, rows, cols), labels)`: an MNIST-format split read from its images and labels
/// IDX files (raw or gzip), pixels and labels as bytes, every label checked to be below 10.
#[quill_py_guard::guard]
#[pyfunction]
#[allow(clippy::type_complexity)]
fn read_mnist<'py>(
    py: Python<'py>,
    images: PathBuf,
    labels: PathBuf,
) -> PyResult<(
    Bound<'py, PyBytes>,
    (usize, usize, usize),
    Bound<'py, PyBytes>,
)> {
    check_readable(&images)?;
    check_readable(&labels)?;
    let raw = py
        .detach(|| MnistRaw::read(&images, &labels))
        .map_err(load_err)?;
    let [n, rows, cols] = raw.shape;
    Ok((
        PyBytes::new(py, &raw.pixels),
        (n, rows, cols),
        PyBytes::new(py, &raw.labels),
    ))
}

/// `(pixels, labels)`: CIFAR-10's training split (`data_batch_1` .. `_5`, those present) or
/// test split (`test_batch`) from `base_folder`, pixels as n * 3072 bytes (n images of three
/// 32x32 planes) and labels as n little-endian int64, each in 0..10.
#[quill_py_guard::guard]
#[pyfunction]
fn read_cifar10<'py>(
    py: Python<'py>,
    base_folder: PathBuf,
    train: bool,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    std::fs::metadata(&base_folder).map_err(|e| io_err(&base_folder, e))?;
    let (pixels, labels) = py
        .detach(|| Cifar10::load_raw(&base_folder, train))
        .map_err(|e| {
            let msg = e.to_string();
            if msg.contains("no CIFAR-10 batch file") {
                PyFileNotFoundError::new_err(msg)
            } else {
                load_err(e)
            }
        })?;
    let label_bytes: Vec<u8> = labels.iter().flat_map(|l| l.to_le_bytes()).collect();
    Ok((PyBytes::new(py, &pixels), PyBytes::new(py, &label_bytes)))
}

/// Adds the readers to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read_mnist, m)?)?;
    m.add_function(wrap_pyfunction!(read_cifar10, m)?)?;
    Ok(())
}
