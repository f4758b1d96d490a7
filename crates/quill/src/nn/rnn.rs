//! The plain (Elman) recurrent layers: `RNNCell` (one step) and `RNN` (a stack of layers over
//! a sequence), `h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)` with tanh or ReLU, PyTorch's
//! parameters and semantics.

use super::module::Module;
use super::recurrent::{run_cell, run_stack, CellKind, Nonlinearity, RecurrentParams};
use crate::tensor::Tensor;
use quill_core::{DType, Error, Result};

/// One step of an Elman RNN: `x` (B, I) and `h` (B, H) give the next `h` (B, H).
pub struct RNNCell {
    /// The weights, G = 1: `weight_ih` (H, I), `weight_hh` (H, H), biases (H).
    pub params: RecurrentParams,
    /// The activation applied to the new state.
    pub nonlinearity: Nonlinearity,
    /// Run the step as one fused op (the default) rather than a graph of primitive ops.
    pub fused: bool,
}

impl RNNCell {
    /// Parameters `weight_ih` (H, I), `weight_hh` (H, H), `bias_ih`, `bias_hh` (H), each
    /// uniform in ±1/sqrt(H) (PyTorch's init); f32.
    pub fn new(
        input_size: usize,
        hidden_size: usize,
        bias: bool,
        nonlinearity: Nonlinearity,
        seed: u64,
    ) -> Result<RNNCell> {
        RNNCell::with_dtype(
            input_size,
            hidden_size,
            bias,
            nonlinearity,
            seed,
            DType::F32,
        )
    }

    /// `new` with parameters of `dtype`.
    pub fn with_dtype(
        input_size: usize,
        hidden_size: usize,
        bias: bool,
        nonlinearity: Nonlinearity,
        seed: u64,
        dtype: DType,
    ) -> Result<RNNCell> {
        let kind = CellKind::Rnn(nonlinearity);
        Ok(RNNCell {
            params: RecurrentParams::init(kind, input_size, hidden_size, bias, seed, dtype)?,
            nonlinearity,
            fused: true,
        })
    }

    /// The next hidden state from `x` (B, I) and `h` (B, H; zeros when `None`).
    pub fn forward_with(&self, x: &Tensor, h: Option<&Tensor>) -> Result<Tensor> {
        let kind = CellKind::Rnn(self.nonlinearity);
        Ok(run_cell("RNNCell", kind, &self.params, self.fused, x, h, None)?.0)
    }
}

impl Module for RNNCell {
    /// The next hidden state from a zero state.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_with(x, None)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.params.named("")
    }
}

/// A stack of Elman RNN layers over a sequence (seq_len, batch, input_size); layer k > 0
/// reads layer k-1's hidden sequence.
pub struct RNN {
    /// Layer k's parameters, named `weight_ih_l{k}` etc. as PyTorch.
    pub layers: Vec<RecurrentParams>,
    /// The activation of every layer.
    pub nonlinearity: Nonlinearity,
    /// Run each layer as one fused op (the default) rather than a per-step graph.
    pub fused: bool,
}

impl RNN {
    /// `num_layers` layers of `hidden_size` units; f32, PyTorch's init.
    pub fn new(
        input_size: usize,
        hidden_size: usize,
        num_layers: usize,
        bias: bool,
        nonlinearity: Nonlinearity,
        seed: u64,
    ) -> Result<RNN> {
        RNN::with_dtype(
            input_size,
            hidden_size,
            num_layers,
            bias,
            nonlinearity,
            seed,
            DType::F32,
        )
    }

    /// `new` with parameters of `dtype`.
    pub fn with_dtype(
        input_size: usize,
        hidden_size: usize,
        num_layers: usize,
        bias: bool,
        nonlinearity: Nonlinearity,
        seed: u64,
        dtype: DType,
    ) -> Result<RNN> {
        let kind = CellKind::Rnn(nonlinearity);
        Ok(RNN {
            layers: stack_params(
                "RNN",
                kind,
                input_size,
                hidden_size,
                num_layers,
                bias,
                seed,
                dtype,
            )?,
            nonlinearity,
            fused: true,
        })
    }

    /// The output sequence (seq_len, batch, H) and the final hidden state h_n
    /// (num_layers, batch, H), from `x` (seq_len, batch, input_size) and `h0`
    /// (num_layers, batch, H; zeros when `None`).
    pub fn forward_with(&self, x: &Tensor, h0: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        let kind = CellKind::Rnn(self.nonlinearity);
        let (out, fin) = run_stack("RNN", kind, &self.layers, self.fused, x, h0, None)?;
        Ok((out, fin.h))
    }
}

impl Module for RNN {
    /// The output sequence from a zero state.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.forward_with(x, None)?.0)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        named_layers(&self.layers)
    }
}

/// The parameters of `num_layers` layers (layer 0 reads `input`, the others `hidden`), each
/// seeded apart.
#[allow(clippy::too_many_arguments)]
pub(crate) fn stack_params(
    op: &'static str,
    kind: CellKind,
    input: usize,
    hidden: usize,
    num_layers: usize,
    bias: bool,
    seed: u64,
    dtype: DType,
) -> Result<Vec<RecurrentParams>> {
    if num_layers == 0 {
        return Err(Error::invalid(op, "num_layers must be at least 1, got 0"));
    }
    (0..num_layers)
        .map(|k| {
            let i = if k == 0 { input } else { hidden };
            let s = seed.wrapping_add((k as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
            RecurrentParams::init(kind, i, hidden, bias, s, dtype)
        })
        .collect()
}

/// Every layer's parameters in PyTorch's order: `weight_ih_l0, weight_hh_l0, bias_ih_l0,
/// bias_hh_l0, weight_ih_l1, ...`.
pub(crate) fn named_layers(layers: &[RecurrentParams]) -> Vec<(String, Tensor)> {
    layers
        .iter()
        .enumerate()
        .flat_map(|(k, p)| p.named(&format!("_l{k}")))
        .collect()
}
