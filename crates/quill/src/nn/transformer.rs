//! needle hw4's Transformer: `TransformerLayer` (self-attention and a ReLU MLP, each in a
//! residual branch with dropout; pre-norm as needle, or post-norm as the original Transformer
//! and PyTorch's `norm_first=False`) and `Transformer` (a learned positional embedding added to
//! the input, then the layers).

use super::attention::{layer_norm, AttentionLayer};
use super::module::{prefixed, Module};
use super::{Dropout, Embedding, LayerNorm, Linear};
use crate::tensor::Tensor;
use crate::NDArray;
use quill_core::{DType, Error, Result};

/// One Transformer block over (batch, seq, q_features).
/// Pre-norm (needle): `x += drop(attn(x))` (the attention layer normalises its inputs), then
/// `x += drop(linear_out(drop(relu(linear_in(norm(x))))))`.
/// Post-norm: `x = norm1(x + drop(attn(x)))`, `x = norm2(x + drop(mlp(x)))`.
pub struct TransformerLayer {
    /// Self-attention from q_features to q_features; it holds the pre-norms in a pre-norm layer.
    pub attn: AttentionLayer,
    /// The MLP's expansion, q_features -> hidden_size, followed by ReLU.
    pub linear_in: Linear,
    /// The MLP's projection back, hidden_size -> q_features, so the residual can add it.
    pub linear_out: Linear,
    /// Pre-norm: the MLP's input norm. Post-norm: the norm after the attention residual.
    pub norm1: LayerNorm,
    /// Post-norm only: the norm after the MLP residual.
    pub norm2: Option<LayerNorm>,
    /// The residual branches' dropout (public so a layer can be assembled from parameters
    /// held elsewhere, as the Python bindings do).
    pub dropout: Dropout,
}

impl TransformerLayer {
    /// f32 parameters; see `with_dtype`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        q_features: usize,
        num_head: usize,
        dim_head: usize,
        hidden_size: usize,
        dropout: f64,
        causal: bool,
        pre_norm: bool,
        seed: u64,
    ) -> Result<TransformerLayer> {
        TransformerLayer::with_dtype(
            q_features,
            num_head,
            dim_head,
            hidden_size,
            dropout,
            causal,
            pre_norm,
            seed,
            DType::F32,
        )
    }

    /// `new` with parameters of `dtype`.
    #[allow(clippy::too_many_arguments)]
    pub fn with_dtype(
        q_features: usize,
        num_head: usize,
        dim_head: usize,
        hidden_size: usize,
        dropout: f64,
        causal: bool,
        pre_norm: bool,
        seed: u64,
        dtype: DType,
    ) -> Result<TransformerLayer> {
        let f = q_features;
        Ok(TransformerLayer {
            attn: AttentionLayer::with_dtype(
                [f, f, f, f],
                num_head,
                dim_head,
                dropout,
                causal,
                pre_norm,
                seed,
                dtype,
            )?,
            linear_in: Linear::with_dtype(f, hidden_size, true, seed ^ 0x66, dtype)?,
            linear_out: Linear::with_dtype(hidden_size, f, true, seed ^ 0x77, dtype)?,
            norm1: layer_norm(f, dtype)?,
            norm2: if pre_norm {
                None
            } else {
                Some(layer_norm(f, dtype)?)
            },
            dropout: Dropout::new(dropout, seed ^ 0x88)?,
        })
    }

    fn mlp(&self, x: &Tensor) -> Result<Tensor> {
        let h = self.dropout.forward(&self.linear_in.forward(x)?.relu()?)?;
        self.dropout.forward(&self.linear_out.forward(&h)?)
    }
}

impl Module for TransformerLayer {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let a = self.dropout.forward(&self.attn.forward(x)?)?;
        match &self.norm2 {
            None => {
                let x = x.add(&a)?;
                x.add(&self.mlp(&self.norm1.forward(&x)?)?)
            }
            Some(norm2) => {
                let x = self.norm1.forward(&x.add(&a)?)?;
                norm2.forward(&x.add(&self.mlp(&x)?)?)
            }
        }
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = prefixed("attn", self.attn.named_parameters());
        v.extend(prefixed("linear_in", self.linear_in.named_parameters()));
        v.extend(prefixed("linear_out", self.linear_out.named_parameters()));
        v.extend(prefixed("norm1", self.norm1.named_parameters()));
        if let Some(n) = &self.norm2 {
            v.extend(prefixed("norm2", n.named_parameters()));
        }
        v
    }
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        let mut v = prefixed("attn", self.attn.named_buffers());
        v.extend(prefixed("dropout", self.dropout.named_buffers()));
        v
    }
    fn set_training(&self, training: bool) {
        self.attn.set_training(training);
        self.dropout.set_training(training);
    }
}

/// A stack of `TransformerLayer`s after a learned positional embedding (an `Embedding` of
/// `sequence_len` rows added to the input). Input and output are (seq, batch, embedding), or
/// (batch, seq, embedding) when `batch_first`.
pub struct Transformer {
    /// Position vectors (sequence_len, embedding); its row count caps the input length, and a
    /// longer sequence is an error.
    pub pos_embedding: Embedding,
    /// The blocks, applied in order; parameters are named `layers.{i}.*`.
    pub layers: Vec<TransformerLayer>,
    /// Inputs and outputs are (batch, seq, embedding) rather than (seq, batch, embedding).
    pub batch_first: bool,
}

impl Transformer {
    /// f32 parameters; see `with_dtype`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        embedding_size: usize,
        hidden_size: usize,
        num_layers: usize,
        num_head: usize,
        dim_head: usize,
        dropout: f64,
        causal: bool,
        batch_first: bool,
        sequence_len: usize,
        pre_norm: bool,
        seed: u64,
    ) -> Result<Transformer> {
        Transformer::with_dtype(
            embedding_size,
            hidden_size,
            num_layers,
            num_head,
            dim_head,
            dropout,
            causal,
            batch_first,
            sequence_len,
            pre_norm,
            seed,
            DType::F32,
        )
    }

    /// `new` with parameters of `dtype`.
    #[allow(clippy::too_many_arguments)]
    pub fn with_dtype(
        embedding_size: usize,
        hidden_size: usize,
        num_layers: usize,
        num_head: usize,
        dim_head: usize,
        dropout: f64,
        causal: bool,
        batch_first: bool,
        sequence_len: usize,
        pre_norm: bool,
        seed: u64,
        dtype: DType,
    ) -> Result<Transformer> {
        let mut pos_embedding = Embedding::new(sequence_len, embedding_size, seed)?;
        if dtype != DType::F32 {
            pos_embedding.weight =
                Tensor::from_array(pos_embedding.weight.array().astype(dtype)?, true)?;
        }
        let layers = (0..num_layers)
            .map(|i| {
                TransformerLayer::with_dtype(
                    embedding_size,
                    num_head,
                    dim_head,
                    hidden_size,
                    dropout,
                    causal,
                    pre_norm,
                    seed.wrapping_add(1 + i as u64).wrapping_mul(0x9E37_79B9),
                    dtype,
                )
            })
            .collect::<Result<_>>()?;
        Ok(Transformer {
            pos_embedding,
            layers,
            batch_first,
        })
    }
}

impl Module for Transformer {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (e, n) = (
            self.pos_embedding.weight.shape()[1],
            self.pos_embedding.weight.shape()[0],
        );
        if x.ndim() != 3 || x.shape()[2] != e {
            return Err(Error::invalid(
                "Transformer",
                format!(
                    "input must be ({}, embedding = {e}), got shape {:?}",
                    if self.batch_first {
                        "batch, seq"
                    } else {
                        "seq, batch"
                    },
                    x.shape()
                ),
            ));
        }
        let x = if self.batch_first {
            x.clone()
        } else {
            x.transpose(0, 1)?
        };
        let l = x.shape()[1];
        if l > n {
            return Err(Error::invalid(
                "Transformer",
                format!("sequence length {l} exceeds the positional embedding's {n} positions"),
            ));
        }
        let pos = NDArray::arange(0.0, l as f64, 1.0, DType::I64)?;
        let mut x = x.add(&self.pos_embedding.lookup(&pos)?)?;
        for layer in &self.layers {
            x = layer.forward(&x)?;
        }
        if self.batch_first {
            Ok(x)
        } else {
            x.transpose(0, 1)
        }
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = prefixed("pos_embedding", self.pos_embedding.named_parameters());
        for (i, l) in self.layers.iter().enumerate() {
            v.extend(prefixed(&format!("layers.{i}"), l.named_parameters()));
        }
        v
    }
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        let mut v = Vec::new();
        for (i, l) in self.layers.iter().enumerate() {
            v.extend(prefixed(&format!("layers.{i}"), l.named_buffers()));
        }
        v
    }
    fn set_training(&self, training: bool) {
        for l in &self.layers {
            l.set_training(training);
        }
    }
}
