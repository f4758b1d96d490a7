//! The model zoo: needle's MLPResNet and a small CNN for MNIST (the main job), and needle's
//! ResNet9 for CIFAR-10.

use super::{
    BatchNorm, Conv2d, Dropout, Flatten, Linear, MaxPool2d, Module, ReLU, Residual, Sequential,
};
use quill_core::Result;

pub use super::language_model::{LanguageModel, SeqKind, SeqState};

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

/// A small CNN for MNIST, input (N, 1, 28, 28) -> logits (N, 10): two blocks of
/// `Conv2d(3x3, pad 1, no bias: BatchNorm's shift replaces it) -> BatchNorm2d -> ReLU ->
/// MaxPool2d(2)` (16 then 32 channels, 28 -> 14 -> 7), then `Flatten -> Linear(32*7*7, 128) ->
/// ReLU -> Dropout(0.25) -> Linear(128, 10)`; 206,970 parameters. The widths are half the
/// common 32 / 64 because the second conv's matmul dominates a step and costs 4x less at this
/// width (a batch of 128 forward + backward took about 0.3 s on a loaded 2-core machine,
/// against 0.7 s at 32 / 64); CNNs of this shape typically pass 99% on MNIST in a few epochs.
pub fn small_cnn(seed: u64) -> Result<Sequential> {
    let (c1, c2) = (16, 32);
    let conv3x3 = |i, o, s| Conv2d::new(i, o, 3, 1, 1, 1, false, s);
    Ok(Sequential::new()
        .add(conv3x3(1, c1, seed)?)
        .add(BatchNorm::new_2d(c1)?)
        .add(ReLU)
        .add(MaxPool2d::new(2, 2)?)
        .add(conv3x3(c1, c2, seed.wrapping_add(1))?)
        .add(BatchNorm::new_2d(c2)?)
        .add(ReLU)
        .add(MaxPool2d::new(2, 2)?)
        .add(Flatten)
        .add(Linear::new(c2 * 7 * 7, 128, true, seed.wrapping_add(2))?)
        .add(ReLU)
        .add(Dropout::new(0.25, seed.wrapping_add(3))?)
        .add(Linear::new(128, 10, true, seed.wrapping_add(4))?))
}

/// needle's ConvBN: `Conv2d(in_c, out_c, k, stride, padding k / 2, bias) -> BatchNorm2d -> ReLU`.
pub fn conv_bn(
    in_c: usize,
    out_c: usize,
    k: usize,
    stride: usize,
    seed: u64,
) -> Result<Sequential> {
    Ok(Sequential::new()
        .add(Conv2d::new(in_c, out_c, k, stride, k / 2, 1, true, seed)?)
        .add(BatchNorm::new_2d(out_c)?)
        .add(ReLU))
}

/// needle's ResNet9 for (N, 3, 32, 32) images -> (N, 10) logits: ConvBN(3, 16, 7, 4),
/// ConvBN(16, 32, 3, 2), a residual pair of ConvBN(32, 32, 3, 1), ConvBN(32, 64, 3, 2),
/// ConvBN(64, 128, 3, 2), a residual pair of ConvBN(128, 128, 3, 1), then Flatten ->
/// Linear(128, 128) -> ReLU -> Linear(128, 10). The strides take 32 x 32 down to 1 x 1.
pub fn resnet9(seed: u64) -> Result<Sequential> {
    let s = |i: u64| seed.wrapping_add(i);
    let pair = |c: usize, a: u64| -> Result<Residual> {
        Ok(Residual::new(
            Sequential::new()
                .add(conv_bn(c, c, 3, 1, s(a))?)
                .add(conv_bn(c, c, 3, 1, s(a + 1))?),
        ))
    };
    Ok(Sequential::new()
        .add(conv_bn(3, 16, 7, 4, s(0))?)
        .add(conv_bn(16, 32, 3, 2, s(1))?)
        .add(pair(32, 2)?)
        .add(conv_bn(32, 64, 3, 2, s(4))?)
        .add(conv_bn(64, 128, 3, 2, s(5))?)
        .add(pair(128, 6)?)
        .add(Flatten)
        .add(Linear::new(128, 128, true, s(8))?)
        .add(ReLU)
        .add(Linear::new(128, 10, true, s(9))?))
}
