//! Initialisers: Xavier (Glorot) and Kaiming (He), uniform and normal, seeded; fans computed
//! as PyTorch's `_calculate_fan_in_and_fan_out` for weights stored (fan_in, fan_out) (quill's
//! Linear stores its weight as (in, out), so `x @ w` needs no transpose).

use crate::NDArray;
use quill_core::{DType, Error, Result};

/// (fan_in, fan_out) of a weight of `shape`: (in, out) for 2-D; for conv weights
/// (out, in, kh, kw) the receptive field multiplies both, as PyTorch.
pub fn fans(shape: &[usize]) -> Result<(usize, usize)> {
    match shape.len() {
        0 | 1 => Err(Error::InvalidArgument {
            op: "init",
            msg: format!("fans need a weight of rank >= 2, got shape {shape:?}"),
        }),
        2 => Ok((shape[0], shape[1])),
        _ => {
            let rf: usize = shape[2..].iter().product();
            Ok((shape[1] * rf, shape[0] * rf))
        }
    }
}

/// Uniform in [-bound, bound).
pub fn uniform(shape: &[usize], bound: f64, seed: u64, dtype: DType) -> Result<NDArray> {
    NDArray::rand(shape, seed, DType::F64)?
        .mul_scalar(2.0 * bound)?
        .sub_scalar(bound)?
        .astype(dtype)
}

/// Normal with standard deviation `std`.
pub fn normal(shape: &[usize], std: f64, seed: u64, dtype: DType) -> Result<NDArray> {
    NDArray::randn(shape, seed, DType::F64)?
        .mul_scalar(std)?
        .astype(dtype)
}

/// Xavier uniform: bound = gain * sqrt(6 / (fan_in + fan_out)).
pub fn xavier_uniform(shape: &[usize], gain: f64, seed: u64, dtype: DType) -> Result<NDArray> {
    let (i, o) = fans(shape)?;
    uniform(shape, gain * (6.0 / (i + o) as f64).sqrt(), seed, dtype)
}

/// Xavier normal: std = gain * sqrt(2 / (fan_in + fan_out)).
pub fn xavier_normal(shape: &[usize], gain: f64, seed: u64, dtype: DType) -> Result<NDArray> {
    let (i, o) = fans(shape)?;
    normal(shape, gain * (2.0 / (i + o) as f64).sqrt(), seed, dtype)
}

/// Kaiming uniform over fan_in with ReLU gain sqrt(2): bound = sqrt(6 / fan_in).
pub fn kaiming_uniform(shape: &[usize], seed: u64, dtype: DType) -> Result<NDArray> {
    let (i, _) = fans(shape)?;
    uniform(shape, (6.0 / i as f64).sqrt(), seed, dtype)
}

/// Kaiming normal over fan_in with ReLU gain: std = sqrt(2 / fan_in).
pub fn kaiming_normal(shape: &[usize], seed: u64, dtype: DType) -> Result<NDArray> {
    let (i, _) = fans(shape)?;
    normal(shape, (2.0 / i as f64).sqrt(), seed, dtype)
}
