//! Normalisation and regularisation layers: BatchNorm1d / BatchNorm2d (batch statistics in
//! training, running statistics in eval, PyTorch's momentum convention), LayerNorm, Dropout.

use super::module::Module;
use crate::tensor::Tensor;
use crate::NDArray;
use quill_core::{DType, Error, Result};
use std::cell::Cell;

/// Batch normalisation over every dim but the channel dim 1: (N, C) for `new_1d`, (N, C, H, W)
/// for `new_2d`. `running = (1 - momentum) * running + momentum * batch`, the batch variance
/// unbiased as PyTorch's, or biased (needle's BatchNorm1d) with `unbiased_running_var = false`.
pub struct BatchNorm {
    /// Per-channel scale (C), ones at first; a trained parameter.
    pub weight: Tensor,
    /// Per-channel shift (C), zeros at first; a trained parameter.
    pub bias: Tensor,
    /// Running mean (C), zeros at first: a buffer, updated in training and used in eval.
    pub running_mean: Tensor,
    /// Running variance (C), ones at first: a buffer, updated in training and used in eval.
    pub running_var: Tensor,
    /// Added to the variance before the square root so a constant channel does not divide by
    /// zero; 1e-5.
    pub eps: f64,
    /// Weight of the current batch in the running statistics (PyTorch's convention, not
    /// Keras's); 0.1.
    pub momentum: f64,
    /// Whether the running variance takes the unbiased batch variance (PyTorch, the default)
    /// or the biased one that normalised the batch (needle's BatchNorm1d).
    pub unbiased_running_var: bool,
    rank: usize,
    training: Cell<bool>,
}

/// PyTorch's name for a [`BatchNorm`] over (N, C) inputs; build it with [`BatchNorm::new_1d`].
pub type BatchNorm1d = BatchNorm;
/// PyTorch's name for a [`BatchNorm`] over (N, C, H, W) inputs; build it with
/// [`BatchNorm::new_2d`].
pub type BatchNorm2d = BatchNorm;

impl BatchNorm {
    /// Batch norm over (N, C) inputs with `channels` = C: f32 parameters, eps 1e-5, momentum
    /// 0.1, in training mode. Any other rank or channel count is a `ShapeMismatch` in forward.
    pub fn new_1d(channels: usize) -> Result<BatchNorm> {
        BatchNorm::new(channels, 2)
    }
    /// Batch norm over (N, C, H, W) inputs with `channels` = C, statistics taken over N, H and
    /// W; defaults as [`BatchNorm::new_1d`].
    pub fn new_2d(channels: usize) -> Result<BatchNorm> {
        BatchNorm::new(channels, 4)
    }
    fn new(c: usize, rank: usize) -> Result<BatchNorm> {
        Ok(BatchNorm {
            weight: Tensor::from_array(NDArray::ones(&[c], DType::F32)?, true)?,
            bias: Tensor::from_array(NDArray::zeros(&[c], DType::F32)?, true)?,
            running_mean: Tensor::zeros(&[c], DType::F32)?,
            running_var: Tensor::ones(&[c], DType::F32)?,
            eps: 1e-5,
            momentum: 0.1,
            unbiased_running_var: true,
            rank,
            training: Cell::new(true),
        })
    }
}

impl BatchNorm {
    /// x must be (N, C, ...) of this layer's rank with its channel count.
    fn check(&self, x: &Tensor) -> Result<()> {
        let c = self.weight.shape()[0];
        if x.ndim() != self.rank || x.shape()[1] != c {
            return Err(Error::ShapeMismatch {
                op: self.name(),
                lhs: x.shape().into(),
                rhs: vec![c].into(),
                hint: format!(" (expected rank {} with {c} channels in dim 1)", self.rank),
            });
        }
        Ok(())
    }

    fn name(&self) -> &'static str {
        if self.rank == 2 {
            "BatchNorm1d"
        } else {
            "BatchNorm2d"
        }
    }

    /// The training forward (batch statistics, running statistics updated), with a fused
    /// ReLU on the output or not.
    fn train_forward(&self, x: &Tensor, relu: bool) -> Result<Tensor> {
        self.check(x)?;
        if x.numel() == 0 {
            // Batch statistics of nothing are NaN, and they would poison the running ones.
            return Err(Error::invalid(
                self.name(),
                format!(
                    "cannot train on an empty batch (input shape {:?}): batch statistics need                      at least one value per channel",
                    x.shape()
                ),
            ));
        }
        let (w, b, eps) = (&self.weight, &self.bias, self.eps);
        let (y, mean, var) = if relu {
            x.batch_norm_relu_train(w, b, eps)?
        } else {
            x.batch_norm_train(w, b, eps)?
        };
        let n = x.numel() / self.weight.shape()[0].max(1);
        let run_var = if self.unbiased_running_var {
            var.mul_scalar(n as f64 / (n.max(2) - 1) as f64)?
        } else {
            var
        };
        let m = self.momentum;
        for (run, batch) in [(&self.running_mean, &mean), (&self.running_var, &run_var)] {
            run.array().mul_scalar_assign(1.0 - m)?;
            run.array().add_assign(&batch.mul_scalar(m)?)?;
        }
        Ok(y)
    }
}

impl Module for BatchNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if self.training.get() {
            return self.train_forward(x, false);
        }
        self.check(x)?;
        // In f32 under autocast, as the training form (`batch_norm_impl`) is.
        let x = &crate::tensor::autocast::widen(x)?;
        let mut pshape = vec![1isize; self.rank];
        pshape[1] = self.weight.shape()[0] as isize;
        let mean = self.running_mean.reshape(&pshape)?;
        let var = self.running_var.reshape(&pshape)?;
        // Scale folded per channel first: three passes over x instead of four.
        let scale = self
            .weight
            .reshape(&pshape)?
            .div(&var.add_scalar(self.eps)?.sqrt()?)?;
        x.sub(&mean)?.mul(&scale)?.add(&self.bias.reshape(&pshape)?)
    }
    fn forward_relu(&self, x: &Tensor) -> Option<Result<Tensor>> {
        self.training.get().then(|| self.train_forward(x, true))
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![
            ("weight".into(), self.weight.clone()),
            ("bias".into(), self.bias.clone()),
        ]
    }
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        vec![
            ("running_mean".into(), self.running_mean.clone()),
            ("running_var".into(), self.running_var.clone()),
        ]
    }
    fn set_training(&self, training: bool) {
        self.training.set(training)
    }
}

/// Normalises over the last dim (biased variance), then scales and shifts.
pub struct LayerNorm {
    /// The scale, (D), ones at first.
    pub weight: Tensor,
    /// The shift, (D), zeros at first.
    pub bias: Tensor,
    /// Added to the variance before the square root; 1e-5 (PyTorch's default).
    pub eps: f64,
}

impl LayerNorm {
    /// A layer norm over a last dim of `dim` values, in f32. An input whose last dim is not
    /// `dim` is a `ShapeMismatch` in forward.
    pub fn new(dim: usize) -> Result<LayerNorm> {
        Ok(LayerNorm {
            weight: Tensor::from_array(NDArray::ones(&[dim], DType::F32)?, true)?,
            bias: Tensor::from_array(NDArray::zeros(&[dim], DType::F32)?, true)?,
            eps: 1e-5,
        })
    }
}

impl Module for LayerNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let d = self.weight.shape()[0];
        if x.ndim() == 0 || x.shape()[x.ndim() - 1] != d {
            return Err(Error::ShapeMismatch {
                op: "LayerNorm",
                lhs: x.shape().into(),
                rhs: vec![d].into(),
                hint: " (the last dim must be the normalised dim)".into(),
            });
        }
        x.layer_norm(&self.weight, &self.bias, self.eps)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![
            ("weight".into(), self.weight.clone()),
            ("bias".into(), self.bias.clone()),
        ]
    }
}

/// Normalises over the last dim by the root mean square (no centring, no bias), then scales:
/// `x / sqrt(mean(x^2) + eps) * weight` (PyTorch's `nn.RMSNorm`; LLaMA's norm). One fused op.
pub struct RMSNorm {
    /// The scale, (D), ones at first.
    pub weight: Tensor,
    /// Added to the mean square (PyTorch's default is its dtype's epsilon; this one is 1e-6).
    pub eps: f64,
}

impl RMSNorm {
    /// An RMS norm over a last dim of `dim` values, in f32, with `eps` = 1e-6.
    pub fn new(dim: usize) -> Result<RMSNorm> {
        Ok(RMSNorm {
            weight: Tensor::from_array(NDArray::ones(&[dim], DType::F32)?, true)?,
            eps: 1e-6,
        })
    }
}

impl Module for RMSNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let d = self.weight.shape()[0];
        if x.ndim() == 0 || x.shape()[x.ndim() - 1] != d {
            return Err(Error::ShapeMismatch {
                op: "RMSNorm",
                lhs: x.shape().into(),
                rhs: vec![d].into(),
                hint: " (the last dim must be the normalised dim)".into(),
            });
        }
        x.rms_norm(&self.weight, self.eps)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        vec![("weight".into(), self.weight.clone())]
    }
}

/// Zeroes each element with probability `p` in training and scales the rest by 1/(1-p);
/// the identity in eval. The mask of the k-th call comes from `seed` and k, and k is a buffer
/// (`"calls"`), so a resumed checkpoint draws the same masks as an uninterrupted run.
pub struct Dropout {
    /// Probability of zeroing an element, in [0, 1]; checked by [`Dropout::new`], not when
    /// assigned directly.
    pub p: f64,
    seed: u64,
    calls: Tensor,
    training: Cell<bool>,
}

impl Dropout {
    /// Dropout with rate `p`, in training mode, its masks seeded by `seed`. Errors when `p` is
    /// not in [0, 1] (NaN included).
    pub fn new(p: f64, seed: u64) -> Result<Dropout> {
        crate::check::probability("Dropout", "p", p)?;
        Ok(Dropout {
            p,
            seed,
            calls: Tensor::zeros(&[], DType::I64)?,
            training: Cell::new(true),
        })
    }
}

impl Module for Dropout {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if !self.training.get() || self.p == 0.0 {
            return Ok(x.clone());
        }
        if self.p == 1.0 {
            // Every element dropped (PyTorch's p = 1): no mask to draw, no 1 / (1 - p).
            return x.mul_scalar(0.0);
        }
        let k = self.calls.array().item::<i64>()?;
        self.calls.array().assign_scalar(k.wrapping_add(1))?;
        let s = self
            .seed
            .wrapping_add((k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        // Drawn on the host: the same masks on every device, so a resumed or moved run
        // reproduces an uninterrupted CPU one.
        let mask = NDArray::dropout_mask(x.shape(), self.p, s, x.dtype())?.to_device(x.device())?;
        x.mul(&Tensor::new(mask))
    }
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        vec![("calls".into(), self.calls.clone())]
    }
    fn set_training(&self, training: bool) {
        self.training.set(training)
    }
}
