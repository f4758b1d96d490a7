//! The `quill._native` extension: NDArray (`backend_ndarray`), Tensor and the functions the
//! Python package (`python/quill`) builds needle's API from. Errors become the Python
//! exceptions NumPy users expect; nothing here panics on user input.

mod convert;
mod export;
mod ndarray;
mod tensor;

use pyo3::prelude::*;

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
    m.add_function(wrap_pyfunction!(tensor::cross_entropy, m)?)?;
    Ok(())
}
