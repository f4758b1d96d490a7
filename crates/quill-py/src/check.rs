//! `check_arg`: quill's argument rules (`quill::check`) for the Python classes, so that
//! `Dropout(1.5)`, `SGD(lr=nan)` or `DataLoader(batch_size=-1)` are refused by the same rule
//! and with the same message as from Rust.

use crate::convert::Q;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt};

/// The ops the Python classes check for; `Error` holds a static name.
const OPS: &[&str] = &[
    "Dropout",
    "SGD",
    "Adam",
    "BatchNorm1d",
    "BatchNorm2d",
    "LayerNorm1d",
    "DataLoader",
    "Embedding",
    "Linear",
];

fn static_op(op: &str) -> PyResult<&'static str> {
    OPS.iter()
        .copied()
        .find(|&o| o == op)
        .ok_or_else(|| PyValueError::new_err(format!("check_arg: unknown op {op:?}")))
}

/// Checks `value` for `op`'s argument `name` under `rule` (`"non_negative"`, `"positive"`,
/// `"probability"`, `"below_one"`, `"size"`); returns the value (an int for `"size"`).
/// A bool or a non-number is a `TypeError`, a value outside the rule a `ValueError`.
#[quill_py_guard::guard]
#[pyfunction]
pub fn check_arg<'py>(
    rule: &str,
    op: &str,
    name: &str,
    value: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let op = static_op(op)?;
    let is_number = value.is_instance_of::<PyInt>() || value.is_instance_of::<PyFloat>();
    if value.is_instance_of::<PyBool>() || !is_number && value.extract::<f64>().is_err() {
        return Err(PyTypeError::new_err(format!(
            "{op}: {name} must be a number, got {}",
            value.get_type().name()?
        )));
    }
    if rule == "size" {
        let Ok(n) = value.extract::<i128>() else {
            return Err(PyTypeError::new_err(format!(
                "{op}: {name} must be an integer, got {value}"
            )));
        };
        quill::check::size(op, name, n).q()?;
        return Ok(value.clone());
    }
    let v: f64 = value.extract()?;
    match rule {
        "non_negative" => quill::check::non_negative(op, name, v),
        "positive" => quill::check::positive(op, name, v),
        "probability" => quill::check::probability(op, name, v),
        "below_one" => quill::check::below_one(op, name, v),
        _ => {
            return Err(PyValueError::new_err(format!(
                "check_arg: unknown rule {rule:?}"
            )))
        }
    }
    .q()?;
    Ok(value.clone())
}
