//! Attention modules with needle hw4's semantics: `MultiHeadAttention` (attention over
//! already split heads, with dropout on the probabilities) and `AttentionLayer` (pre-LayerNorm
//! on q, k, v, bias-free projections into heads, attention, out projection). Causal masks use
//! PyTorch's top-left alignment (query `i` sees keys `j <= i`); needle aligns bottom-right,
//! which differs only when the query and key lengths differ.

use super::module::{prefixed, Module};
use super::{Dropout, LayerNorm, Linear};
use crate::tensor::Tensor;
use crate::NDArray;
use quill_core::{DType, Error, Result};
use std::cell::Cell;

/// Attention over (batch, heads, seq, dim_head) inputs. Without active dropout (eval, or
/// `p = 0`) it runs the fused kernel and returns no probabilities; with dropout in training it
/// runs the composite path (dropout on the probabilities) and returns them.
pub struct MultiHeadAttention {
    /// Mask so that query `i` attends only to keys `j <= i` (top-left aligned).
    pub causal: bool,
    dropout: Dropout,
    training: Cell<bool>,
}

impl MultiHeadAttention {
    /// Attention with dropout rate `dropout` on the probabilities (masks seeded by `seed`), in
    /// training mode. Errors when `dropout` is not in [0, 1].
    pub fn new(dropout: f64, causal: bool, seed: u64) -> Result<MultiHeadAttention> {
        Ok(MultiHeadAttention {
            causal,
            dropout: Dropout::new(dropout, seed)?,
            training: Cell::new(true),
        })
    }

    /// `(output, probabilities or None)` for q (B, H, Lq, D), k (B, H, Lk, D), v (B, H, Lk, Dv).
    pub fn attend(&self, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<(Tensor, Option<Tensor>)> {
        for (x, name) in [(q, "q"), (k, "k"), (v, "v")] {
            if x.ndim() != 4 {
                return Err(Error::invalid(
                    "MultiHeadAttention",
                    format!(
                        "{name} must be (batch, heads, seq, dim_head), got shape {:?}",
                        x.shape()
                    ),
                ));
            }
        }
        if !self.training.get() || self.dropout.p == 0.0 {
            let out = q.scaled_dot_product_attention(k, v, self.causal, None)?;
            return Ok((out, None));
        }
        let probs = q.attention_probs(k, self.causal, None)?;
        let out = self.dropout.forward(&probs)?.matmul(v)?;
        Ok((out, Some(probs)))
    }
}

impl Module for MultiHeadAttention {
    /// Self-attention: `x` is q, k and v.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.attend(x, x, x)?.0)
    }
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        prefixed("dropout", self.dropout.named_buffers())
    }
    fn set_training(&self, training: bool) {
        self.training.set(training);
        self.dropout.set_training(training);
    }
}

/// A LayerNorm over `dim` features in `dtype` (LayerNorm::new makes f32).
pub(crate) fn layer_norm(dim: usize, dtype: DType) -> Result<LayerNorm> {
    Ok(LayerNorm {
        weight: Tensor::from_array(NDArray::ones(&[dim], dtype)?, true)?,
        bias: Tensor::from_array(NDArray::zeros(&[dim], dtype)?, true)?,
        eps: 1e-5,
    })
}

/// needle's `AttentionLayer`: inputs (batch, seq, features); q, k and v each pass a
/// LayerNorm (unless built without, as the post-norm Transformer layer does), a bias-free
/// projection to `num_head * dim_head` features split into heads, `MultiHeadAttention`, and
/// a bias-free projection to `out_features`.
pub struct AttentionLayer {
    /// LayerNorms applied to q, k and v (in that order) before projection; `None` for a
    /// post-norm layer, whose caller normalises instead.
    pub prenorm: Option<[LayerNorm; 3]>,
    /// q features -> `num_head * dim_head`, no bias.
    pub q_projection: Linear,
    /// k features -> `num_head * dim_head`, no bias.
    pub k_projection: Linear,
    /// v features -> `num_head * dim_head`, no bias.
    pub v_projection: Linear,
    /// `num_head * dim_head` -> out features, no bias.
    pub out_projection: Linear,
    /// The attention over the split heads, which holds the causal flag and the dropout.
    pub attn: MultiHeadAttention,
    /// Number of heads H the projections are split into.
    pub num_head: usize,
    /// Features per head D; the attention scores are scaled by 1 / sqrt(D).
    pub dim_head: usize,
}

impl AttentionLayer {
    /// f32 parameters; see `with_dtype`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        q_features: usize,
        num_head: usize,
        dim_head: usize,
        k_features: usize,
        v_features: usize,
        out_features: usize,
        dropout: f64,
        causal: bool,
        seed: u64,
    ) -> Result<AttentionLayer> {
        AttentionLayer::with_dtype(
            [q_features, k_features, v_features, out_features],
            num_head,
            dim_head,
            dropout,
            causal,
            true,
            seed,
            DType::F32,
        )
    }

    /// The layer with `[q, k, v, out]` feature counts, parameters of `dtype`, and the
    /// pre-LayerNorms only when `prenorm`.
    #[allow(clippy::too_many_arguments)]
    pub fn with_dtype(
        [qf, kf, vf, of]: [usize; 4],
        num_head: usize,
        dim_head: usize,
        dropout: f64,
        causal: bool,
        prenorm: bool,
        seed: u64,
        dtype: DType,
    ) -> Result<AttentionLayer> {
        let inner = num_head * dim_head;
        let lin = |i: usize, o: usize, s: u64| Linear::with_dtype(i, o, false, seed ^ s, dtype);
        Ok(AttentionLayer {
            prenorm: if prenorm {
                Some([
                    layer_norm(qf, dtype)?,
                    layer_norm(kf, dtype)?,
                    layer_norm(vf, dtype)?,
                ])
            } else {
                None
            },
            q_projection: lin(qf, inner, 0x11)?,
            k_projection: lin(kf, inner, 0x22)?,
            v_projection: lin(vf, inner, 0x33)?,
            out_projection: lin(inner, of, 0x44)?,
            attn: MultiHeadAttention::new(dropout, causal, seed ^ 0x55)?,
            num_head,
            dim_head,
        })
    }

    /// (B, L, F) -> (B, H, L, dim_head).
    fn heads(&self, x: &Tensor) -> Result<Tensor> {
        let (b, l) = (x.shape()[0] as isize, x.shape()[1] as isize);
        x.reshape(&[b, l, self.num_head as isize, self.dim_head as isize])?
            .permute(&[0, 2, 1, 3])
    }

    /// Cross-attention of `q` (B, Lq, Fq) over `k` (B, Lk, Fk) and `v` (B, Lk, Fv): (B, Lq, out).
    pub fn attend(&self, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
        for (x, name) in [(q, "q"), (k, "k"), (v, "v")] {
            if x.ndim() != 3 {
                return Err(Error::invalid(
                    "AttentionLayer",
                    format!(
                        "{name} must be (batch, seq, features), got shape {:?}",
                        x.shape()
                    ),
                ));
            }
        }
        let (q, k, v) = match &self.prenorm {
            Some([nq, nk, nv]) => (nq.forward(q)?, nk.forward(k)?, nv.forward(v)?),
            None => (q.clone(), k.clone(), v.clone()),
        };
        let qh = self.heads(&self.q_projection.forward(&q)?)?;
        let kh = self.heads(&self.k_projection.forward(&k)?)?;
        let vh = self.heads(&self.v_projection.forward(&v)?)?;
        let (o, _) = self.attn.attend(&qh, &kh, &vh)?;
        let (b, l) = (q.shape()[0] as isize, q.shape()[1] as isize);
        let o =
            o.permute(&[0, 2, 1, 3])?
                .reshape(&[b, l, (self.num_head * self.dim_head) as isize])?;
        self.out_projection.forward(&o)
    }
}

impl Module for AttentionLayer {
    /// Self-attention: `x` (B, L, F) is q, k and v.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.attend(x, x, x)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = Vec::new();
        if let Some(n) = &self.prenorm {
            for (name, m) in ["prenorm_q", "prenorm_k", "prenorm_v"].iter().zip(n) {
                v.extend(prefixed(name, m.named_parameters()));
            }
        }
        for (name, m) in [
            ("q_projection", &self.q_projection),
            ("k_projection", &self.k_projection),
            ("v_projection", &self.v_projection),
            ("out_projection", &self.out_projection),
        ] {
            v.extend(prefixed(name, m.named_parameters()));
        }
        v
    }
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        prefixed("attn", self.attn.named_buffers())
    }
    fn set_training(&self, training: bool) {
        self.attn.set_training(training)
    }
}
