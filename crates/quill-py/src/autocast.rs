//! `quill.autocast` from Python: a window onto the Rust autocast guard (`quill::autocast`).
//! `python/quill/_autocast.py` wraps it as the context manager and decorator users call; the
//! state, the op lists and the dtype check are all the Rust crate's.

use crate::convert::{dtype_of, np_name, Q};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use quill::{AutocastGuard, DType};
use std::thread::ThreadId;

/// One autocast region's settings and, while entered, its guards (a stack: the same object
/// may be entered again inside itself, as a decorator on a recursive function is).
#[pyclass(name = "_Autocast", module = "quill._native")]
pub struct PyAutocast {
    dtype: Option<DType>,
    entered: Vec<(ThreadId, AutocastGuard)>,
}

#[quill_py_guard::guard("_Autocast")]
#[pymethods]
impl PyAutocast {
    /// Autocast to `dtype` ("bf16" / "bfloat16" or "f16" / "float16", or a dtype object);
    /// `enabled=False` or `dtype=None` turns autocast off inside the region. A dtype other than
    /// those is the Rust crate's ValueError, raised here rather than at `with`.
    #[new]
    #[pyo3(signature = (dtype = None, enabled = true))]
    fn new(dtype: Option<&Bound<'_, PyAny>>, enabled: bool) -> PyResult<PyAutocast> {
        let dtype = match dtype {
            Some(d) if enabled && !d.is_none() => Some(dtype_of(d)?),
            _ => None,
        };
        // Checked by the guard itself: made and dropped at once, it leaves the state as it was.
        drop(quill::autocast(dtype).q()?);
        Ok(PyAutocast {
            dtype,
            entered: Vec::new(),
        })
    }
    /// Starts the region on the calling thread.
    fn __enter__(mut slf: PyRefMut<'_, Self>) -> PyResult<PyRefMut<'_, Self>> {
        let guard = quill::autocast(slf.dtype).q()?;
        slf.entered.push((std::thread::current().id(), guard));
        Ok(slf)
    }
    /// Ends the innermost entry of this region, restoring the state before it; exceptions
    /// propagate (returns False).
    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        let here = std::thread::current().id();
        match self.entered.last() {
            Some((t, _)) if *t == here => {
                self.entered.pop();
                Ok(false)
            }
            Some(_) => {
                // Dropping the guard here would set this thread's state, not the one it saved.
                Err(PyRuntimeError::new_err(
                    "autocast: a region must be exited on the thread that entered it",
                ))
            }
            None => Err(PyRuntimeError::new_err(
                "autocast: __exit__ without a matching __enter__",
            )),
        }
    }
    /// The dtype the region autocasts to, as NumPy names it ("bfloat16"), or None.
    #[getter]
    fn dtype(&self) -> Option<&'static str> {
        self.dtype.map(np_name)
    }
}

/// Whether ops on the calling thread autocast (`quill::is_autocast_enabled`).
#[quill_py_guard::guard]
#[pyfunction]
fn is_autocast_enabled() -> bool {
    quill::is_autocast_enabled()
}

/// The dtype ops on the calling thread autocast to, as NumPy names it, or None.
#[quill_py_guard::guard]
#[pyfunction]
fn get_autocast_dtype() -> Option<&'static str> {
    quill::autocast_dtype().map(np_name)
}

/// Adds the autocast class and queries to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAutocast>()?;
    m.add_function(wrap_pyfunction!(is_autocast_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(get_autocast_dtype, m)?)?;
    Ok(())
}
