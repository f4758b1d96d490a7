//! Parameter-free layers: activations, Identity, Flatten, Softmax.

use super::module::Module;
use crate::tensor::Tensor;
use quill_core::Result;

macro_rules! activation {
    ($($(#[$doc:meta])* $name:ident => |$x:ident| $body:expr),* $(,)?) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;
        impl Module for $name {
            fn forward(&self, $x: &Tensor) -> Result<Tensor> {
                $body
            }
            fn is_relu(&self) -> bool {
                stringify!($name) == "ReLU"
            }
        }
    )*};
}

activation!(
    /// max(x, 0).
    ReLU => |x| x.relu(),
    /// Exact GELU (through erf).
    GELU => |x| x.gelu(),
    /// tanh(x), element-wise; output in (-1, 1).
    Tanh => |x| x.tanh(),
    /// 1 / (1 + exp(-x)), element-wise; output in (0, 1).
    Sigmoid => |x| x.sigmoid(),
    /// Returns its input.
    Identity => |x| Ok(x.clone()),
    /// Flattens every dim after the first: (N, ...) -> (N, prod(...)).
    Flatten => |x| if x.ndim() <= 1 { x.reshape(&[-1, 1]) } else { x.flatten(1, -1) },
);

/// Softmax along `axis`.
#[derive(Clone, Copy, Debug)]
pub struct Softmax {
    /// The axis whose entries sum to 1; negative counts from the last (-1 for class logits).
    pub axis: isize,
}

impl Module for Softmax {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.softmax(self.axis)
    }
}
