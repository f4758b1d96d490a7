//! The other half of `#[guard]` (crate `quill-py-guard`): `call` runs an exported function's
//! body under `catch_unwind` and turns a Rust panic, which would be a quill bug since bad input
//! is an error value, into `quill.InternalError` (a `RuntimeError`) that names the call. PyO3's
//! own `PanicException` derives from `BaseException`, so `except Exception` would miss it.

use pyo3::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};

pyo3::create_exception!(
    quill,
    InternalError,
    pyo3::exceptions::PyRuntimeError,
    "A bug in quill: Rust code panicked. The message names the call; please report it."
);

/// Runs `f` (an exported function's body, for the call `name`), a panic becoming
/// `InternalError`.
pub fn call<T>(name: &'static str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    // AssertUnwindSafe: after a panic the body's half-done state is abandoned, and what it
    // touched stays a valid value (quill's locks tolerate poisoning).
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        Err(InternalError::new_err(format!(
            "{name}: quill internal error (a Rust panic; please report it): {msg}"
        )))
    })
}

/// Panics on purpose, so that the test suite can prove a panic reaches Python as
/// `InternalError` naming the call (not a `PanicException`, not an abort).
#[quill_py_guard::guard]
#[pyfunction]
pub fn _debug_panic(message: &str) -> PyResult<()> {
    panic!("{}", message.to_owned())
}
