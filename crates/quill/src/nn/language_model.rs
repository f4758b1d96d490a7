//! needle's LanguageModel: token ids (seq_len, batch) -> Embedding -> a sequence model (RNN,
//! LSTM, GRU or a causal Transformer) -> Linear -> logits (seq_len * batch, vocab), with the
//! recurrent state handed in and out so training can carry it across windows (truncated BPTT).

use super::module::{prefixed, Module};
use super::{Embedding, Linear, Nonlinearity, Transformer, GRU, LSTM, RNN};
use crate::tensor::Tensor;
use crate::NDArray;
use quill_core::{Error, Result};

/// Which sequence model sits between the embedding and the output layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqKind {
    /// An Elman [`RNN`] with tanh.
    RnnTanh,
    /// An Elman [`RNN`] with ReLU.
    RnnRelu,
    /// An [`LSTM`]; its state is `[h, c]`.
    Lstm,
    /// A [`GRU`]; its state is `[h]`.
    Gru,
    /// A causal, pre-norm Transformer with a learned positional embedding; heads of 32 (or
    /// fewer when the embedding is smaller). It carries no state between windows.
    Transformer,
}

/// The state a recurrent model carries between windows: `[h]` (RNN, GRU), `[h, c]` (LSTM), or
/// nothing (Transformer); each (num_layers, batch, hidden).
#[derive(Clone)]
pub struct SeqState(pub Vec<Tensor>);

impl SeqState {
    /// The same values cut from the graph, so the next window's backward stops here.
    pub fn detach(&self) -> SeqState {
        SeqState(self.0.iter().map(Tensor::detach).collect())
    }
}

enum Body {
    Rnn(RNN),
    Lstm(LSTM),
    Gru(GRU),
    Transformer(Transformer),
}

/// needle's language model (word or character level): ids (seq_len, batch) -> logits
/// (seq_len * batch, vocab) for the next token at every position. Parameters are named
/// `embedding.*`, `seq_model.*` and `linear.*`, as needle's.
pub struct LanguageModel {
    /// Token vectors (vocab, embedding_size).
    pub embedding: Embedding,
    body: Body,
    /// The output layer, sequence-model width -> vocab, giving unnormalised logits (pair with
    /// cross-entropy).
    pub linear: Linear,
    vocab: usize,
}

const OP: &str = "LanguageModel";

impl LanguageModel {
    /// A model over `vocab` tokens: Embedding(vocab, embedding_size), the sequence model with
    /// `num_layers` layers of `hidden_size` (the Transformer's MLP width; its model width is the
    /// embedding size), and Linear(width, vocab). `seq_len` bounds the Transformer's positions.
    pub fn new(
        vocab: usize,
        embedding_size: usize,
        hidden_size: usize,
        num_layers: usize,
        kind: SeqKind,
        seq_len: usize,
        seed: u64,
    ) -> Result<LanguageModel> {
        if vocab == 0 || embedding_size == 0 || hidden_size == 0 || num_layers == 0 {
            return Err(Error::invalid(
                OP,
                format!(
                    "vocab {vocab}, embedding {embedding_size}, hidden {hidden_size} and layers \
                     {num_layers} must all be at least 1"
                ),
            ));
        }
        let (e, h, l) = (embedding_size, hidden_size, num_layers);
        let s = seed.wrapping_add(1);
        let (body, width) = match kind {
            SeqKind::RnnTanh => (
                Body::Rnn(RNN::new(e, h, l, true, Nonlinearity::Tanh, s)?),
                h,
            ),
            SeqKind::RnnRelu => (
                Body::Rnn(RNN::new(e, h, l, true, Nonlinearity::Relu, s)?),
                h,
            ),
            SeqKind::Lstm => (Body::Lstm(LSTM::new(e, h, l, true, s)?), h),
            SeqKind::Gru => (Body::Gru(GRU::new(e, h, l, true, s)?), h),
            SeqKind::Transformer => {
                let dim_head = e.min(32);
                if e % dim_head != 0 {
                    return Err(Error::invalid(
                        OP,
                        format!("a Transformer needs an embedding size divisible by 32 (or below 32), got {e}"),
                    ));
                }
                let t = Transformer::new(
                    e,
                    h,
                    l,
                    e / dim_head,
                    dim_head,
                    0.0,
                    true,
                    false,
                    seq_len,
                    true,
                    s,
                )?;
                (Body::Transformer(t), e)
            }
        };
        Ok(LanguageModel {
            embedding: Embedding::new(vocab, e, seed)?,
            body,
            linear: Linear::new(width, vocab, true, seed.wrapping_add(2))?,
            vocab,
        })
    }

    /// Whether the model carries no state between windows (the Transformer): generation then
    /// re-reads its context window instead of feeding one token with the state.
    pub fn is_stateless(&self) -> bool {
        matches!(self.body, Body::Transformer(_))
    }

    /// Logits (seq_len * batch, vocab) for the ids (seq_len, batch) (any integer dtype), and
    /// the state after the last step; `state` = `None` starts from zeros.
    pub fn forward_with(
        &self,
        ids: &NDArray,
        state: Option<&SeqState>,
    ) -> Result<(Tensor, SeqState)> {
        if ids.ndim() != 2 {
            return Err(Error::invalid(
                OP,
                format!("ids must be (seq_len, batch), got shape {:?}", ids.shape()),
            ));
        }
        let x = self.embedding.lookup(ids)?;
        let want = |n: usize| -> Result<&[Tensor]> {
            match state {
                None => Ok(&[]),
                Some(s) if s.0.len() == n => Ok(&s.0),
                Some(s) => Err(Error::invalid(
                    OP,
                    format!("this model carries {n} state tensors, got {}", s.0.len()),
                )),
            }
        };
        let (out, next) = match &self.body {
            Body::Rnn(m) => {
                let (o, h) = m.forward_with(&x, want(1)?.first())?;
                (o, SeqState(vec![h]))
            }
            Body::Gru(m) => {
                let (o, h) = m.forward_with(&x, want(1)?.first())?;
                (o, SeqState(vec![h]))
            }
            Body::Lstm(m) => {
                let s = want(2)?;
                let (o, (h, c)) = m.forward_with(&x, s.first().zip(s.get(1)))?;
                (o, SeqState(vec![h, c]))
            }
            Body::Transformer(m) => {
                want(0)?;
                (m.forward(&x)?, SeqState(Vec::new()))
            }
        };
        let width = out.shape()[2] as isize;
        let logits = self.linear.forward(&out.reshape(&[-1, width])?)?;
        Ok((logits, next))
    }

    /// The vocabulary size: the number of embedding rows and of logit columns. Ids must be below
    /// it.
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    fn body(&self) -> &dyn Module {
        match &self.body {
            Body::Rnn(m) => m,
            Body::Lstm(m) => m,
            Body::Gru(m) => m,
            Body::Transformer(m) => m,
        }
    }
}

impl Module for LanguageModel {
    /// `x` holds the ids (seq_len, batch); returns the logits from a zero state.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.forward_with(x.array(), None)?.0)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v = prefixed("embedding", self.embedding.named_parameters());
        v.extend(prefixed("seq_model", self.body().named_parameters()));
        v.extend(prefixed("linear", self.linear.named_parameters()));
        v
    }
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        prefixed("seq_model", self.body().named_buffers())
    }
    fn set_training(&self, training: bool) {
        self.body().set_training(training)
    }
}
