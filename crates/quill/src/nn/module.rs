//! The `Module` trait: a forward pass plus named parameters (trainable leaves) and buffers
//! (state saved with the model, such as BatchNorm's running statistics), a train / eval mode,
//! and state dicts with shape checks.

use crate::tensor::Tensor;
use crate::NDArray;
use quill_core::{Error, Result};

/// A layer or model. Every method takes `&self`: parameters are shared `Tensor` handles updated
/// in place by optimizers, and the train / eval mode sits in a `Cell`, so a model can be used
/// while an optimizer holds its parameters. Layers are built in training mode.
pub trait Module {
    /// The layer applied to `x`; shapes are the implementor's (see its docs). Errors on an input
    /// of the wrong rank, size or dtype.
    fn forward(&self, x: &Tensor) -> Result<Tensor>;

    /// Trainable parameters with dotted names (`"0.weight"`), in a fixed order.
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        Vec::new()
    }

    /// Saved, non-trainable state with dotted names.
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        Vec::new()
    }

    /// Switches training behaviour (dropout, batch statistics) on or off, recursively.
    fn set_training(&self, _training: bool) {}

    /// `relu(self.forward(x))` as one fused op, where this layer has one in its current mode
    /// (BatchNorm while training); `None` otherwise. `Sequential` uses it to fold a `ReLU`
    /// that follows this layer.
    fn forward_relu(&self, _x: &Tensor) -> Option<Result<Tensor>> {
        None
    }

    /// Whether this layer is a plain ReLU, which a container may fold into the layer before.
    fn is_relu(&self) -> bool {
        false
    }

    /// The trainable parameters without their names, in `named_parameters` order: what an
    /// optimizer is built over.
    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }

    /// Training mode: dropout active, BatchNorm on batch statistics (updating its running ones).
    fn train(&self) {
        self.set_training(true)
    }

    /// Evaluation mode: dropout off, BatchNorm on its running statistics, so outputs are
    /// deterministic and one sample does not depend on the rest of its batch.
    fn eval(&self) {
        self.set_training(false)
    }

    /// Moves every parameter and buffer to `device` in place: each keeps its identity (an
    /// optimizer built over `parameters()` keeps working) and its gradient is dropped.
    fn to_device(&self, device: crate::Device) -> Result<()> {
        for (_, t) in self
            .named_parameters()
            .into_iter()
            .chain(self.named_buffers())
        {
            t.array().relocate(device)?;
            t.zero_grad();
        }
        Ok(())
    }

    /// Parameters then buffers, by name (the arrays are shared, not copied).
    fn state_dict(&self) -> Vec<(String, NDArray)> {
        self.named_parameters()
            .into_iter()
            .chain(self.named_buffers())
            .map(|(n, t)| (n, t.array().clone()))
            .collect()
    }

    /// Copies every entry of `state` into the parameter or buffer of the same name. Every name
    /// must be present on both sides with equal shapes; values are cast to the model's dtype.
    fn load_state_dict(&self, state: &[(String, NDArray)]) -> Result<()> {
        const OP: &str = "load_state_dict";
        let mine: Vec<(String, Tensor)> = self
            .named_parameters()
            .into_iter()
            .chain(self.named_buffers())
            .collect();
        for (name, _) in state {
            if !mine.iter().any(|(n, _)| n == name) {
                return Err(Error::InvalidArgument {
                    op: OP,
                    msg: format!("unexpected key '{name}' in the state dict"),
                });
            }
        }
        // Check everything before writing anything, so a bad state leaves the model intact.
        let mut pairs = Vec::with_capacity(mine.len());
        for (name, t) in &mine {
            let Some((_, a)) = state.iter().find(|(n, _)| n == name) else {
                return Err(Error::InvalidArgument {
                    op: OP,
                    msg: format!("missing key '{name}' in the state dict"),
                });
            };
            if a.shape() != t.shape() {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    lhs: t.shape().into(),
                    rhs: a.shape().into(),
                    hint: format!(" (for '{name}': the model's shape vs the state's)"),
                });
            }
            pairs.push((t, a));
        }
        for (t, a) in pairs {
            t.array().assign(a)?;
        }
        Ok(())
    }
}

/// Prefixes every name with `prefix.`.
pub(crate) fn prefixed(prefix: &str, v: Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
    v.into_iter()
        .map(|(n, t)| (format!("{prefix}.{n}"), t))
        .collect()
}

impl<M: Module + ?Sized> Module for Box<M> {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        (**self).forward(x)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        (**self).named_parameters()
    }
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        (**self).named_buffers()
    }
    fn set_training(&self, training: bool) {
        (**self).set_training(training)
    }
    fn forward_relu(&self, x: &Tensor) -> Option<Result<Tensor>> {
        (**self).forward_relu(x)
    }
    fn is_relu(&self) -> bool {
        (**self).is_relu()
    }
}
