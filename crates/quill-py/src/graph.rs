//! The autograd graph seen from Python (needle's `Tensor.op` / `inputs`, `TensorOp`,
//! `TENSOR_COUNTER`): a Python op object whose forward ran on NDArrays joins quill's Rust
//! graph as a [`CustomOp`], and its `gradient_as_tuple(out_grad, node)` (Tensor ops) is called
//! back from the Rust backward pass.

use crate::ndarray::PyNDArray;
use crate::tensor::PyTensor;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use quill::tensor::{live_tensors, CustomOp, Tensor};
use quill::{Error, Result};
use std::any::Any;
use std::rc::Rc;

/// A Python op object (anything with `gradient_as_tuple(out_grad, node)`) in the Rust graph.
struct PyOp {
    op: Py<PyAny>,
    name: String,
}

impl CustomOp for PyOp {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn backward(
        &self,
        g: &Tensor,
        output: &Tensor,
        inputs: &[Tensor],
    ) -> Result<Vec<Option<Tensor>>> {
        let failed = |why: String| Error::invalid("custom_op", format!("{}: {why}", self.name));
        Python::attach(|py| {
            let g = Py::new(py, PyTensor::wrap(g.clone())).map_err(|e| failed(e.to_string()))?;
            let node =
                Py::new(py, PyTensor::wrap(output.clone())).map_err(|e| failed(e.to_string()))?;
            let out = self
                .op
                .bind(py)
                .call_method1("gradient_as_tuple", (g, node))
                .map_err(|e| failed(format!("gradient raised {e}")))?;
            let items: Vec<Bound<'_, PyAny>> = out
                .try_iter()
                .and_then(|it| it.collect::<PyResult<Vec<_>>>())
                .map_err(|_| failed("gradient must return a Tensor or a tuple of them".into()))?;
            if items.len() != inputs.len() {
                return Err(failed(format!(
                    "gradient returned {} gradients for {} inputs",
                    items.len(),
                    inputs.len()
                )));
            }
            items
                .iter()
                .map(|x| {
                    if x.is_none() {
                        return Ok(None);
                    }
                    x.extract::<PyRef<PyTensor>>()
                        .map(|t| Some(t.inner.clone()))
                        .map_err(|_| {
                            failed(format!(
                                "gradient returned a {}, not a Tensor",
                                x.get_type().name().map_or("?".into(), |n| n.to_string())
                            ))
                        })
                })
                .collect()
        })
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `Tensor.make_from_op`: the tensor `data` made by the Python op `op` from `inputs`, in the
/// graph when an input requires gradients (its backward calls `op.gradient_as_tuple`).
#[quill_py_guard::guard]
#[pyfunction]
fn _make_from_op(
    op: Bound<'_, PyAny>,
    data: PyRef<'_, PyNDArray>,
    inputs: Vec<PyRef<'_, PyTensor>>,
) -> PyResult<PyTensor> {
    if !op.hasattr("gradient_as_tuple")? {
        return Err(PyTypeError::new_err(
            "make_from_op: the op needs gradient_as_tuple(out_grad, node) (subclass quill.autograd.TensorOp)",
        ));
    }
    let name = op.get_type().name()?.to_string();
    let ins: Vec<&Tensor> = inputs.iter().map(|t| &t.inner).collect();
    let custom = Rc::new(PyOp {
        op: op.unbind(),
        name,
    });
    Ok(PyTensor::wrap(Tensor::from_custom_op(
        data.inner.clone(),
        &ins,
        custom,
    )))
}

/// `torch.autograd.grad`: the gradients of `output` (seeded with `grad`, or 1 for one
/// element) with respect to `inputs` (any tensors of its graph), returned, not accumulated;
/// with `create_graph` they are themselves in the graph.
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (output, inputs, grad = None, create_graph = false))]
fn _grad(
    output: PyRef<'_, PyTensor>,
    inputs: Vec<PyRef<'_, PyTensor>>,
    grad: Option<PyRef<'_, PyTensor>>,
    create_graph: bool,
) -> PyResult<Vec<PyTensor>> {
    let ins: Vec<Tensor> = inputs.iter().map(|t| t.inner.clone()).collect();
    let opts = quill::tensor::BackwardOptions {
        retain_graph: true,
        create_graph,
        overwrite_grad: false,
    };
    let gs = quill::tensor::grad(&output.inner, &ins, grad.as_ref().map(|g| &g.inner), opts)
        .map_err(crate::convert::err)?;
    Ok(gs.into_iter().map(PyTensor::wrap).collect())
}

/// The gradients of a composite op's inputs: re-runs `f(*inputs)` (quill's ops, recorded)
/// and differentiates it, seeded with `out_grad`. During a plain backward pass the inputs are
/// detached first, so only the composite's own few nodes are walked; under `create_graph`
/// (grad mode on during the pass) the original inputs are used, so the gradients stay
/// differentiable with respect to them.
#[quill_py_guard::guard]
#[pyfunction]
fn _composite_grad(
    py: Python<'_>,
    f: Bound<'_, PyAny>,
    inputs: Vec<PyRef<'_, PyTensor>>,
    out_grad: PyRef<'_, PyTensor>,
) -> PyResult<Vec<PyTensor>> {
    let create = quill::tensor::is_grad_enabled();
    let xs: Vec<Tensor> = inputs
        .iter()
        .map(|t| {
            if create {
                Ok(t.inner.clone())
            } else if t.inner.dtype().is_float() {
                t.inner.detach().requires_grad_(true)
            } else {
                Ok(t.inner.detach())
            }
        })
        .collect::<Result<_>>()
        .map_err(crate::convert::err)?;
    let args = pyo3::types::PyTuple::new(py, xs.iter().map(|t| PyTensor::wrap(t.clone())))?;
    let out = {
        let _g = quill::tensor::set_grad_enabled(true);
        f.call1(args)?
    };
    let out = out.extract::<PyRef<'_, PyTensor>>()?;
    let opts = quill::tensor::BackwardOptions {
        retain_graph: create,
        create_graph: create,
        overwrite_grad: false,
    };
    let gs = quill::tensor::grad(&out.inner, &xs, Some(&out_grad.inner), opts)
        .map_err(crate::convert::err)?;
    Ok(gs.into_iter().map(PyTensor::wrap).collect())
}

/// The number of live tensors (needle's `autograd.TENSOR_COUNTER`).
#[quill_py_guard::guard]
#[pyfunction]
fn _live_tensors() -> usize {
    live_tensors()
}

/// The Python op object of a tensor made by `_make_from_op`, else `None`.
pub(crate) fn py_op(t: &Tensor, py: Python<'_>) -> Option<Py<PyAny>> {
    let op = t.custom_op()?;
    op.as_any()
        .downcast_ref::<PyOp>()
        .map(|p| p.op.clone_ref(py))
}

/// Adds the graph functions to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_make_from_op, m)?)?;
    m.add_function(wrap_pyfunction!(_live_tensors, m)?)?;
    m.add_function(wrap_pyfunction!(_grad, m)?)?;
    m.add_function(wrap_pyfunction!(_composite_grad, m)?)?;
    Ok(())
}
