//! Containers: Sequential (modules in order) and Residual (`x + f(x)`).

use super::module::{prefixed, Module};
use crate::tensor::Tensor;
use quill_core::Result;

/// Runs its modules in order; parameters are named by position (`"0.weight"`). A `ReLU`
/// right after a layer with a fused form (`Module::forward_relu`: BatchNorm in training) runs
/// inside that layer's op, with the same values and gradients.
#[derive(Default)]
pub struct Sequential {
    /// The modules, run first to last; a layer's index is its parameter-name prefix, so
    /// reordering them breaks loading an older checkpoint.
    pub layers: Vec<Box<dyn Module>>,
}

impl Sequential {
    /// An empty container, the identity until layers are added with [`Sequential::add`].
    pub fn new() -> Sequential {
        Sequential::default()
    }
    /// Appends a module (builder style). Not `std::ops::Add`: adding a layer is not a sum.
    #[allow(clippy::should_implement_trait)]
    pub fn add(mut self, m: impl Module + 'static) -> Sequential {
        self.layers.push(Box::new(m));
        self
    }
}

impl Module for Sequential {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = x.clone();
        let mut layers = self.layers.iter().peekable();
        while let Some(l) = layers.next() {
            if layers.peek().is_some_and(|n| n.is_relu()) {
                if let Some(y) = l.forward_relu(&h) {
                    h = y?;
                    layers.next();
                    continue;
                }
            }
            h = l.forward(&h)?;
        }
        Ok(h)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = Vec::new();
        for (i, l) in self.layers.iter().enumerate() {
            v.extend(prefixed(&i.to_string(), l.named_parameters()));
        }
        v
    }
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        let mut v = Vec::new();
        for (i, l) in self.layers.iter().enumerate() {
            v.extend(prefixed(&i.to_string(), l.named_buffers()));
        }
        v
    }
    fn set_training(&self, training: bool) {
        for l in &self.layers {
            l.set_training(training);
        }
    }
}

/// `x + f(x)`; parameters are named `"fn.*"` as needle's Residual.
pub struct Residual {
    /// `f`; its output is added to its input, so it should keep the input's shape.
    pub inner: Box<dyn Module>,
}

impl Residual {
    /// Wraps `inner` as `x + inner(x)`.
    pub fn new(inner: impl Module + 'static) -> Residual {
        Residual {
            inner: Box::new(inner),
        }
    }
}

impl Module for Residual {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.add(&self.inner.forward(x)?)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        prefixed("fn", self.inner.named_parameters())
    }
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        prefixed("fn", self.inner.named_buffers())
    }
    fn set_training(&self, training: bool) {
        self.inner.set_training(training)
    }
}
