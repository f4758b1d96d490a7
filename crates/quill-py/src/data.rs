//! The dataset readers behind `quill.data`: MNIST-format IDX files, CIFAR-10's pickled
//! batches and text corpora are parsed by the Rust loaders (`quill::data`), which check every length, range-check
//! the labels and run no code from a file (the CIFAR unpickler is data-only), so that no dataset
//! is parsed in Python. They hand back raw bytes that `data.py` views with NumPy.
//!
//! A file that cannot be opened is an `OSError` (`FileNotFoundError`, `PermissionError`) naming
//! the path; a malformed file is a `ValueError` with the Rust loader's message.

use crate::ndarray::PyNDArray;
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyPermissionError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use quill::data::{Cifar10, Corpus, Dictionary, MnistRaw, Tokenizer};
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

/// A text loader's error: a missing split is `FileNotFoundError`, else as `load_err`.
fn text_err(e: quill::Error) -> PyErr {
    let msg = e.to_string();
    if msg.contains("not found (nor ") {
        PyFileNotFoundError::new_err(msg)
    } else {
        load_err(e)
    }
}

/// `(words, train, valid, test)`: needle's `Corpus` of `base_dir` by quill's reader
/// (`quill::data::Corpus::load`: `train.txt`, optional `valid.txt`, `test.txt`, each maybe
/// `.gz`, split by whitespace with `<eos>` or by character with `"\n"`), the vocabulary in id
/// order and each split's ids.
#[quill_py_guard::guard]
#[pyfunction]
#[allow(clippy::type_complexity)]
#[pyo3(signature = (base_dir, tokens = "word", max_lines = None))]
fn read_corpus(
    py: Python<'_>,
    base_dir: PathBuf,
    tokens: &str,
    max_lines: Option<usize>,
) -> PyResult<(Vec<String>, Vec<usize>, Vec<usize>, Vec<usize>)> {
    let tokenizer = Tokenizer::parse(tokens).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let c = py
        .detach(|| Corpus::load(&base_dir, tokenizer, max_lines))
        .map_err(text_err)?;
    let words = (0..c.dictionary.len())
        .filter_map(|i| c.dictionary.word(i).map(str::to_string))
        .collect();
    Ok((words, c.train, c.valid, c.test))
}

/// `(ids, new_words)`: the first `max_lines` lines of the file at `path` tokenised by quill's
/// reader against the vocabulary `words` (in id order); `new_words` are the tokens it added,
/// in id order after `words` (needle's `Corpus.tokenize`).
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (path, words, tokens = "word", max_lines = None))]
fn tokenize_file(
    py: Python<'_>,
    path: PathBuf,
    words: Vec<String>,
    tokens: &str,
    max_lines: Option<usize>,
) -> PyResult<(Vec<usize>, Vec<String>)> {
    let tokenizer = Tokenizer::parse(tokens).map_err(|e| PyValueError::new_err(e.to_string()))?;
    check_readable(&path)?;
    let mut dict = Dictionary::new();
    for w in &words {
        dict.add_word(w);
    }
    let known = dict.len();
    let ids = py
        .detach(|| quill::data::tokenize_file(&path, tokenizer, max_lines, &mut dict))
        .map_err(text_err)?;
    let new = (known..dict.len())
        .filter_map(|i| dict.word(i).map(str::to_string))
        .collect();
    Ok((ids, new))
}

/// needle's `batchify` by quill's: the first `n * batch_size` of the token ids `data` (a 1-D
/// int64 array) as an (n, batch_size) int64 NDArray whose column j is the j-th run of n.
#[quill_py_guard::guard]
#[pyfunction]
fn batchify(data: PyRef<'_, PyNDArray>, batch_size: usize) -> PyResult<PyNDArray> {
    let raw = data
        .inner
        .astype(quill::DType::I64)
        .and_then(|a| a.reshape(&[-1]))
        .and_then(|a| a.to_vec::<i64>())
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let ids = raw
        .iter()
        .map(|&t| {
            usize::try_from(t).map_err(|_| {
                PyValueError::new_err(format!("batchify: token ids must be >= 0, got {t}"))
            })
        })
        .collect::<PyResult<Vec<usize>>>()?;
    let a = quill::data::batchify(&ids, batch_size)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyNDArray::wrap(a))
}

/// Adds the readers to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read_mnist, m)?)?;
    m.add_function(wrap_pyfunction!(read_cifar10, m)?)?;
    m.add_function(wrap_pyfunction!(read_corpus, m)?)?;
    m.add_function(wrap_pyfunction!(tokenize_file, m)?)?;
    m.add_function(wrap_pyfunction!(batchify, m)?)?;
    Ok(())
}
