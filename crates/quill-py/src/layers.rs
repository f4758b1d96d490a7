//! The plain layers behind `quill.nn`'s `Linear`, `LayerNorm1d` and `Conv`: each call runs quill's Rust
//! module (`quill::nn::Linear`, `quill::nn::LayerNorm`, `quill::nn::Conv2d`, its checks and its fused kernel) over
//! the Python module's own `Parameter`s, which are the Rust tensors themselves (handles, not
//! copies): the module is two reference-count increments, so nothing is rebuilt and there is
//! one implementation of each layer.

use crate::convert::Q;
use crate::tensor::{common_dtype, to_dtype, PyTensor};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use quill::nn::{Conv2d, LayerNorm, Linear, Module};

type T<'py> = PyRef<'py, PyTensor>;

/// `x @ weight + bias` by `quill::nn::Linear` (weight (in, out), bias (out,)), computed in
/// the dtype NumPy's promotion gives the three (needle's NumPy-backed rule).
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (x, weight, bias = None))]
pub fn linear(x: T<'_>, weight: T<'_>, bias: Option<T<'_>>) -> PyResult<PyTensor> {
    let w = &weight.inner;
    if w.ndim() != 2 {
        return Err(PyValueError::new_err(format!(
            "Linear: weight must be (in_features, out_features), got shape {:?}",
            w.shape()
        )));
    }
    if let Some(b) = &bias {
        if b.inner.shape() != [w.shape()[1]] {
            return Err(PyValueError::new_err(format!(
                "Linear: bias must be (out_features,) = ({},), got shape {:?}",
                w.shape()[1],
                b.inner.shape()
            )));
        }
    }
    let mut all = vec![&x.inner, w];
    if let Some(b) = &bias {
        all.push(&b.inner);
    }
    let d = common_dtype(&all)?;
    let layer = Linear {
        weight: to_dtype(w, d)?,
        bias: bias.as_ref().map(|b| to_dtype(&b.inner, d)).transpose()?,
    };
    Ok(PyTensor::wrap(layer.forward(&to_dtype(&x.inner, d)?).q()?))
}

/// Layer normalisation over the last dim by `quill::nn::LayerNorm` (the fused kernel: biased
/// variance, `eps` inside the square root), scaled by `weight` and shifted by `bias`.
#[quill_py_guard::guard]
#[pyfunction]
pub fn layer_norm(x: T<'_>, weight: T<'_>, bias: T<'_>, eps: f64) -> PyResult<PyTensor> {
    let dim = weight.inner.shape().first().copied().unwrap_or(0);
    for (t, name) in [(&weight, "weight"), (&bias, "bias")] {
        if t.inner.shape() != [dim] {
            return Err(PyValueError::new_err(format!(
                "LayerNorm1d: {name} must be (dim,) = ({dim},), got shape {:?}",
                t.inner.shape()
            )));
        }
    }
    let d = common_dtype(&[&x.inner, &weight.inner, &bias.inner])?;
    let layer = LayerNorm {
        weight: to_dtype(&weight.inner, d)?,
        bias: to_dtype(&bias.inner, d)?,
        eps,
    };
    Ok(PyTensor::wrap(layer.forward(&to_dtype(&x.inner, d)?).q()?))
}

/// needle's `Conv` by `quill::nn::Conv2d`: `x` (N, C, H, W), `weight` in needle's layout
/// (kh, kw, C, O), `bias` (O,) or None; returns (N, O, Ho, Wo). The Rust layer reads the weight
/// through a permuted view (O, C, kh, kw), so the gradient lands in needle's layout and no
/// copy is made.
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (x, weight, bias, stride, padding))]
pub fn conv2d(
    x: T<'_>,
    weight: T<'_>,
    bias: Option<T<'_>>,
    stride: usize,
    padding: usize,
) -> PyResult<PyTensor> {
    let w = &weight.inner;
    if w.ndim() != 4 {
        return Err(PyValueError::new_err(format!(
            "Conv: weight must be (kernel, kernel, in_channels, out_channels), got shape {:?}",
            w.shape()
        )));
    }
    let mut all = vec![&x.inner, w];
    if let Some(b) = &bias {
        all.push(&b.inner);
    }
    let d = common_dtype(&all)?;
    let layer = Conv2d {
        weight: to_dtype(w, d)?.permute(&[3, 2, 0, 1]).q()?,
        bias: bias.as_ref().map(|b| to_dtype(&b.inner, d)).transpose()?,
        stride: (stride, stride),
        padding: (padding, padding),
        dilation: (1, 1),
        groups: 1,
    };
    Ok(PyTensor::wrap(layer.forward(&to_dtype(&x.inner, d)?).q()?))
}

/// Adds this file's functions to the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(linear, m)?)?;
    m.add_function(wrap_pyfunction!(conv2d, m)?)?;
    m.add_function(wrap_pyfunction!(layer_norm, m)?)?;
    Ok(())
}
