//! The `quill._native` extension: NDArray (`backend_ndarray`), Tensor and the functions the
//! Python package (`python/quill`) builds needle's API from (`sequence`: the recurrent,
//! attention and Transformer layers behind `quill.nn`). Errors become the Python
//! exceptions NumPy users expect; nothing here panics on user input.

#![warn(missing_docs)]

mod autocast;
mod check;
mod convert;
mod data;
mod export;
mod fft;
mod graph;
mod guard;
mod infer;
mod layers;
mod linalg;
mod ndarray;
mod optim;
mod second_order;
mod sequence;
mod tensor;

use pyo3::prelude::*;
use quill::{BinaryOp, UnaryOp};

/// The names of quill's unary ops, in the order of quill-core's op table (`unary_ops!`). The
/// Python package builds its per-op functions and methods from this list.
#[quill_py_guard::guard]
#[pyfunction]
fn unary_op_names() -> Vec<&'static str> {
    UnaryOp::ALL.iter().map(|u| u.name()).collect()
}

/// `{op: count}`: how many times each op ran on host copies because its GPU backend had no
/// kernel for it (`quill::host_round_trips`); empty on the CPU.
#[quill_py_guard::guard]
#[pyfunction]
fn host_round_trips() -> std::collections::BTreeMap<&'static str, u64> {
    quill::host_round_trips().into_iter().collect()
}

/// Whether `op` runs on `device` for `dtype` without a host round trip (`quill::supports`: a
/// primitive with the device's kernel, a fused op with its kernel or its composite); False
/// means through the host. Every op is native on the CPU; an unknown op is a
/// ValueError listing the known ones (`supported_ops()`).
#[quill_py_guard::guard]
#[pyfunction]
fn supports(
    op: &str,
    dtype: &Bound<'_, PyAny>,
    device: PyRef<'_, ndarray::PyDevice>,
) -> PyResult<bool> {
    let dtype = convert::dtype_of(dtype)?;
    quill::supports(op, dtype, device.device)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

/// The op names `supports` answers for.
#[quill_py_guard::guard]
#[pyfunction]
fn supported_ops() -> Vec<&'static str> {
    quill::supported_ops()
}

/// The fused ops' names (`quill::fused_ops`): ops that one kernel runs where a device has it
/// and that run as a composite of primitives where it has not.
#[quill_py_guard::guard]
#[pyfunction]
fn fused_ops() -> Vec<&'static str> {
    quill::fused_ops()
}

/// Whether the fused op `op` runs its own kernel (True) or its composite (False) on `device`
/// for `dtype` (`quill::fused_kernel`); an unknown name is a ValueError listing the fused ops.
#[quill_py_guard::guard]
#[pyfunction]
fn fused_kernel(
    op: &str,
    dtype: &Bound<'_, PyAny>,
    device: PyRef<'_, ndarray::PyDevice>,
) -> PyResult<bool> {
    let dtype = convert::dtype_of(dtype)?;
    quill::fused_kernel(op, dtype, device.device)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

/// Sets the counts of `host_round_trips` back to zero.
#[quill_py_guard::guard]
#[pyfunction]
fn reset_host_round_trips() {
    quill::reset_host_round_trips()
}

/// The names of quill's binary ops (quill-core's `binary_ops!`), in table order.
#[quill_py_guard::guard]
#[pyfunction]
fn binary_op_names() -> Vec<&'static str> {
    BinaryOp::ALL.iter().map(|b| b.name()).collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ndarray::PyNDArray>()?;
    m.add_class::<ndarray::PyDevice>()?;
    m.add_class::<tensor::PyTensor>()?;
    m.add_function(wrap_pyfunction!(ndarray::cpu, m)?)?;
    m.add_function(wrap_pyfunction!(ndarray::cuda, m)?)?;
    m.add_function(wrap_pyfunction!(ndarray::default_device, m)?)?;
    m.add_function(wrap_pyfunction!(ndarray::from_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::stack, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::conv2d, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::conv, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::dilate, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::undilate, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::pad, m)?)?;
    m.add_function(wrap_pyfunction!(tensor::cross_entropy, m)?)?;
    m.add_function(wrap_pyfunction!(check::check_arg, m)?)?;
    m.add_function(wrap_pyfunction!(unary_op_names, m)?)?;
    m.add_function(wrap_pyfunction!(binary_op_names, m)?)?;
    m.add_function(wrap_pyfunction!(guard::_debug_panic, m)?)?;
    m.add_function(wrap_pyfunction!(host_round_trips, m)?)?;
    m.add_function(wrap_pyfunction!(reset_host_round_trips, m)?)?;
    m.add_function(wrap_pyfunction!(supports, m)?)?;
    m.add_function(wrap_pyfunction!(supported_ops, m)?)?;
    m.add_function(wrap_pyfunction!(fused_ops, m)?)?;
    m.add_function(wrap_pyfunction!(fused_kernel, m)?)?;
    m.add("InternalError", m.py().get_type::<guard::InternalError>())?;
    sequence::register(m)?;
    layers::register(m)?;
    data::register(m)?;
    graph::register(m)?;
    optim::register(m)?;
    linalg::register(m)?;
    infer::register(m)?;
    fft::register(m)?;
    autocast::register(m)?;
    Ok(())
}
