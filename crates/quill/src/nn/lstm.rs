//! Long short-term memory: `LSTMCell` (one step) and `LSTM` (a stack of layers over a
//! sequence), PyTorch's formulation and parameters (gates i, f, g, o in that order):
//! `c' = sigmoid(f) * c + sigmoid(i) * tanh(g)`, `h' = sigmoid(o) * tanh(c')`.

use super::module::Module;
use super::recurrent::{run_cell, run_stack, CellKind, RecurrentParams};
use super::rnn::{named_layers, stack_params};
use crate::tensor::Tensor;
use quill_core::{DType, Error, Result};

/// One LSTM step: `x` (B, I) and the state `(h, c)` (B, H each) give the next state.
pub struct LSTMCell {
    /// `weight_ih` (4H, I), `weight_hh` (4H, H), `bias_ih`, `bias_hh` (4H).
    pub params: RecurrentParams,
    /// Run the step as one fused op (the default) rather than a graph of primitive ops.
    pub fused: bool,
}

impl LSTMCell {
    /// f32 parameters, uniform in ±1/sqrt(H) (PyTorch's init).
    pub fn new(input_size: usize, hidden_size: usize, bias: bool, seed: u64) -> Result<LSTMCell> {
        LSTMCell::with_dtype(input_size, hidden_size, bias, seed, DType::F32)
    }

    /// `new` with parameters of `dtype`.
    pub fn with_dtype(
        input_size: usize,
        hidden_size: usize,
        bias: bool,
        seed: u64,
        dtype: DType,
    ) -> Result<LSTMCell> {
        Ok(LSTMCell {
            params: RecurrentParams::init(
                CellKind::Lstm,
                input_size,
                hidden_size,
                bias,
                seed,
                dtype,
            )?,
            fused: true,
        })
    }

    /// The next `(h, c)` from `x` (B, I) and `state` (zeros when `None`).
    pub fn forward_with(
        &self,
        x: &Tensor,
        state: Option<(&Tensor, &Tensor)>,
    ) -> Result<(Tensor, Tensor)> {
        let (h, c) = state.unzip();
        let (h2, c2) = run_cell(
            "LSTMCell",
            CellKind::Lstm,
            &self.params,
            self.fused,
            x,
            h,
            c,
        )?;
        Ok((h2, cell_state(c2)?))
    }
}

impl Module for LSTMCell {
    /// The next hidden state from a zero state.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.forward_with(x, None)?.0)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        self.params.named("")
    }
}

/// A stack of LSTM layers over a sequence (seq_len, batch, input_size).
pub struct LSTM {
    /// Layer k's parameters, named `weight_ih_l{k}` etc. as PyTorch.
    pub layers: Vec<RecurrentParams>,
    /// Run each layer as one fused op (the default) rather than a per-step graph.
    pub fused: bool,
}

impl LSTM {
    /// `num_layers` layers of `hidden_size` units; f32, PyTorch's init.
    pub fn new(
        input_size: usize,
        hidden_size: usize,
        num_layers: usize,
        bias: bool,
        seed: u64,
    ) -> Result<LSTM> {
        LSTM::with_dtype(input_size, hidden_size, num_layers, bias, seed, DType::F32)
    }

    /// `new` with parameters of `dtype`.
    pub fn with_dtype(
        input_size: usize,
        hidden_size: usize,
        num_layers: usize,
        bias: bool,
        seed: u64,
        dtype: DType,
    ) -> Result<LSTM> {
        Ok(LSTM {
            layers: stack_params(
                "LSTM",
                CellKind::Lstm,
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

    /// The output sequence (seq_len, batch, H) and the final state `(h_n, c_n)`
    /// (num_layers, batch, H each), from `x` and `state` = `(h0, c0)` (zeros when `None`).
    pub fn forward_with(
        &self,
        x: &Tensor,
        state: Option<(&Tensor, &Tensor)>,
    ) -> Result<(Tensor, (Tensor, Tensor))> {
        let (h0, c0) = state.unzip();
        let (out, fin) = run_stack("LSTM", CellKind::Lstm, &self.layers, self.fused, x, h0, c0)?;
        Ok((out, (fin.h, cell_state(fin.c)?)))
    }
}

impl Module for LSTM {
    /// The output sequence from a zero state.
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(self.forward_with(x, None)?.0)
    }
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        named_layers(&self.layers)
    }
}

fn cell_state(c: Option<Tensor>) -> Result<Tensor> {
    c.ok_or_else(|| Error::invalid("LSTM", "internal: the layer returned no cell state"))
}
