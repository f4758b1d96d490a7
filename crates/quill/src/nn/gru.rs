//! Gated recurrent units: `GRUCell` (one step) and `GRU` (a stack of layers over a
//! sequence), PyTorch's formulation and parameters (gates r, z, n in that order):
//! `n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`, `h' = (1 - z) * n + z * h`.

use super::module::Module;
use super::recurrent::{run_cell, run_stack, CellKind, RecurrentParams};
use super::rnn::{named_layers, stack_params};
use crate::tensor::Tensor;
use quill_core::{DType, Result};

/// One GRU step: `x` (B, I) and `h` (B, H) give the next `h`.
pub struct GRUCell {
    /// `weight_ih` (3H, I), `weight_hh` (3H, H), `bias_ih`, `bias_hh` (3H).
    pub params: RecurrentParams,
    /// Run the step as one fused op (the default) rather than a graph of primitive ops.
    pub fused: bool,
}

impl GRUCell {
    /// f32 parameters, uniform in ±1/sqrt(H) (PyTorch's init).
    pub fn new(input_size: usize, hidden_size: usize, bias: bool, seed: u64) -> Result<GRUCell> {
        GRUCell::with_dtype(input_size, hidden_size, bias, seed, DType::F32)
    }

    /// `new` with parameters of `dtype`.
    pub fn with_dtype(
        input_size: usize,
        hidden_size: usize,
        bias: bool,
        seed: u64,
        dtype: DType,
    ) -> Result<GRUCell> {
        Ok(GRUCell {
            params: RecurrentParams::init(
                CellKind::Gru,
                input_size,
                hidden_size,
                bias,
                seed,
                dtype,
            )?,
            fused: true,
        })
    }

    /// The next hidden state from `x` (B, I) and `h` (B, H; zeros when `None`).
    pub fn forward_with(&self, x: &Tensor, h: Option<&Tensor>) -> Result<Tensor> {
        Ok(run_cell(
            "GRUCell",
            CellKind::Gru,
            &self.params,
            self.fused,
            x,
            h,
            None,
        )?
        .0)
    }
}

impl Module for GRUCell {
    /// The next hidden state from a zero state.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_with(x, None)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.params.named("")
    }
}

/// A stack of GRU layers over a sequence (seq_len, batch, input_size).
pub struct GRU {
    /// Layer k's parameters, named `weight_ih_l{k}` etc. as PyTorch.
    pub layers: Vec<RecurrentParams>,
    /// Run each layer as one fused op (the default) rather than a per-step graph.
    pub fused: bool,
}

impl GRU {
    /// `num_layers` layers of `hidden_size` units; f32, PyTorch's init.
    pub fn new(
        input_size: usize,
        hidden_size: usize,
        num_layers: usize,
        bias: bool,
        seed: u64,
    ) -> Result<GRU> {
        GRU::with_dtype(input_size, hidden_size, num_layers, bias, seed, DType::F32)
    }

    /// `new` with parameters of `dtype`.
    pub fn with_dtype(
        input_size: usize,
        hidden_size: usize,
        num_layers: usize,
        bias: bool,
        seed: u64,
        dtype: DType,
    ) -> Result<GRU> {
        Ok(GRU {
            layers: stack_params(
                "GRU",
                CellKind::Gru,
                input_size,
                hidden_size,
                num_layers,
                bias,
                seed,
                dtype,
            )?,
            fused: true,
        })
    }

    /// The output sequence (seq_len, batch, H) and the final hidden state h_n
    /// (num_layers, batch, H), from `x` (seq_len, batch, input_size) and `h0` (zeros when
    /// `None`).
    pub fn forward_with(&self, x: &Tensor, h0: Option<&Tensor>) -> Result<(Tensor, Tensor)> {
        let (out, fin) = run_stack("GRU", CellKind::Gru, &self.layers, self.fused, x, h0, None)?;
        Ok((out, fin.h))
    }
}

impl Module for GRU {
    /// The output sequence from a zero state.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.forward_with(x, None)?.0)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        named_layers(&self.layers)
    }
}
