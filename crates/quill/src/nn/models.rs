//! The models the main job trains: needle's MLPResNet and a small CNN for MNIST.

use super::{BatchNorm, Dropout, Linear, Module, ReLU, Residual, Sequential};
use quill_core::Result;

/// needle's ResidualBlock: `ReLU(x + norm(Linear(drop(ReLU(norm(Linear(x)))))))`.
pub fn residual_block(dim: usize, hidden: usize, drop: f64, seed: u64) -> Result<Sequential> {
    let inner = Sequential::new()
        .add(Linear::new(dim, hidden, true, seed)?)
        .add(BatchNorm::new_1d(hidden)?)
        .add(ReLU)
        .add(Dropout::new(drop, seed ^ 0xD0)?)
        .add(Linear::new(hidden, dim, true, seed ^ 0x11)?)
        .add(BatchNorm::new_1d(dim)?);
    Ok(Sequential::new().add(Residual::new(inner)).add(ReLU))
}

/// needle's MLPResNet: `Linear(dim, hidden) -> ReLU -> blocks x ResidualBlock(hidden,
/// hidden / 2) -> Linear(hidden, classes)`.
pub fn mlp_resnet(
    dim: usize,
    hidden: usize,
    blocks: usize,
    classes: usize,
    drop: f64,
    seed: u64,
) -> Result<Sequential> {
    let mut m = Sequential::new()
        .add(Linear::new(dim, hidden, true, seed)?)
        .add(ReLU);
    for b in 0..blocks {
        m = m.add(residual_block(
            hidden,
            hidden / 2,
            drop,
            seed.wrapping_add(1 + b as u64 * 7),
        )?);
    }
    Ok(m.add(Linear::new(hidden, classes, true, seed.wrapping_add(1000))?))
}

/// The number of scalars in `m`'s parameters.
pub fn parameter_count(m: &dyn Module) -> usize {
    m.parameters().iter().map(|p| p.numel()).sum()
}
