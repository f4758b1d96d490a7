//! needle's optimizers as windows onto quill's Rust ones: `SGD` and `Adam` in
//! `python/quill/optim.py` hold one of these, and a step is one call into Rust that updates
//! every parameter's buffer in place with the fused kernels (no Tensor ops per parameter,
//! `.grad` left as it is). needle's rules are options of the Rust optimizers: its SGD is
//! dampening = momentum with a zero-initialised buffer; its Adam is Adam with L2 weight decay
//! (coupled) and bias correction, which is PyTorch's Adam.

use crate::convert::Q;
use crate::tensor::PyTensor;
use pyo3::prelude::*;
use quill::optim::{Adam, Optimizer, Sgd};
use quill::tensor::Tensor;

/// A Rust optimizer over the parameters it was made with.
#[pyclass(name = "RustOptimizer", module = "quill._native", unsendable)]
pub struct PyOptimizer {
    inner: Box<dyn Optimizer>,
}

fn tensors(params: &[PyRef<'_, PyTensor>]) -> Vec<Tensor> {
    params.iter().map(|p| p.inner.clone()).collect()
}

/// SGD over `params`: `momentum`, `dampening`, `weight_decay` (L2, coupled), `nesterov`, and
/// `zero_init` for needle's zero-initialised momentum buffer.
#[quill_py_guard::guard]
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (params, lr, momentum = 0.0, dampening = 0.0, weight_decay = 0.0, nesterov = false, zero_init = false))]
fn _sgd(
    params: Vec<PyRef<'_, PyTensor>>,
    lr: f64,
    momentum: f64,
    dampening: f64,
    weight_decay: f64,
    nesterov: bool,
    zero_init: bool,
) -> PyResult<PyOptimizer> {
    let o = Sgd::new(tensors(&params), lr)
        .and_then(|o| o.momentum(momentum))
        .and_then(|o| o.dampening(dampening))
        .and_then(|o| o.nesterov(nesterov))
        .and_then(|o| o.weight_decay(weight_decay))
        .q()?
        .zero_init_buffer(zero_init);
    Ok(PyOptimizer { inner: Box::new(o) })
}

/// Adam over `params` with L2 `weight_decay` added to the gradient (needle's and PyTorch's
/// Adam) and bias correction.
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (params, lr, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0))]
fn _adam(
    params: Vec<PyRef<'_, PyTensor>>,
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    weight_decay: f64,
) -> PyResult<PyOptimizer> {
    let o = Adam::new(tensors(&params), lr)
        .and_then(|o| o.betas(beta1, beta2))
        .and_then(|o| o.eps(eps))
        .and_then(|o| o.weight_decay(weight_decay))
        .q()?;
    Ok(PyOptimizer { inner: Box::new(o) })
}

#[quill_py_guard::guard("RustOptimizer")]
#[pymethods]
impl PyOptimizer {
    /// One update of every parameter that has a gradient, at learning rate `lr`.
    fn step(&mut self, lr: f64) -> PyResult<()> {
        self.inner.set_lr(lr);
        self.inner.step().q()
    }
    /// The number of steps taken.
    #[getter]
    fn steps(&self) -> u64 {
        self.inner.step_count()
    }
}

/// PyTorch's `clip_grad_norm_` over `params`' gradients (quill's Rust one): replaces them
/// with scaled copies whose global L2 norm is at most `max_norm`; returns the norm before.
#[quill_py_guard::guard]
#[pyfunction]
fn clip_grad_norm(params: Vec<PyRef<'_, PyTensor>>, max_norm: f64) -> PyResult<f64> {
    quill::optim::clip_grad_norm(&tensors(&params), max_norm).q()
}

/// Adds the optimizer constructors to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyOptimizer>()?;
    m.add_function(wrap_pyfunction!(_sgd, m)?)?;
    m.add_function(wrap_pyfunction!(_adam, m)?)?;
    m.add_function(wrap_pyfunction!(clip_grad_norm, m)?)?;
    Ok(())
}
