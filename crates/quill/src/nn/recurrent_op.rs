//! One recurrent layer over a whole sequence as a single graph node (RNN, LSTM or GRU), over
//! quill-array's fused op (`NDArray::recurrent_layer`: the time loop and the gate math in one
//! kernel, see `quill_array::fused`). Where the device has no kernel for the dtypes the op
//! answers `None` and the layer is the per-step graph (`layer_composite`). When the backward is
//! itself recorded (`create_graph`) it is the gradient of that per-step graph, so higher
//! derivatives hold.

use super::recurrent::{layer_composite, CellKind, Nonlinearity};
use crate::fused::{Activation, Cell, RecurrentTape};
use crate::tensor::{grad, is_grad_enabled, Backward, BackwardOptions, Tensor};
use quill_core::Result;

impl CellKind {
    /// The fused op's name for this recurrence.
    fn cell(self) -> Cell {
        match self {
            CellKind::Rnn(Nonlinearity::Tanh) => Cell::Rnn(Activation::Tanh),
            CellKind::Rnn(Nonlinearity::Relu) => Cell::Rnn(Activation::Relu),
            CellKind::Lstm => Cell::Lstm,
            CellKind::Gru => Cell::Gru,
        }
    }
}

/// The fused layer (see the module doc), or the per-step graph where the fused op has no
/// kernel.
pub(crate) fn layer_fused(
    kind: CellKind,
    xg: &Tensor,
    w_hh: &Tensor,
    b_hh: &Tensor,
    h0: &Tensor,
    c0: Option<&Tensor>,
) -> Result<Tensor> {
    let fused = xg.array().recurrent_layer(
        kind.cell(),
        w_hh.array(),
        b_hh.array(),
        h0.array(),
        c0.map(|c| c.array()),
    )?;
    match fused {
        Some((out, tape)) => {
            let all: Vec<&Tensor> = [xg, w_hh, b_hh, h0].into_iter().chain(c0).collect();
            Ok(Tensor::make(out, &all, LayerOp { kind, tape }))
        }
        None => layer_composite(kind, xg, w_hh, b_hh, h0, c0),
    }
}

/// The graph node of a fused layer run.
struct LayerOp {
    kind: CellKind,
    tape: RecurrentTape,
}

impl Backward for LayerOp {
    fn name(&self) -> &'static str {
        match self.kind {
            CellKind::Rnn(_) => "RNNLayerBackward",
            CellKind::Lstm => "LSTMLayerBackward",
            CellKind::Gru => "GRULayerBackward",
        }
    }

    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let need: Vec<bool> = inputs.iter().map(|t| t.requires_grad()).collect();
        if is_grad_enabled() {
            // Recorded backward: differentiate the per-step graph instead, so that the
            // gradients see their own dependence on the inputs.
            let y = layer_composite(
                self.kind,
                &inputs[0],
                &inputs[1],
                &inputs[2],
                &inputs[3],
                inputs.get(4),
            )?;
            let wanted: Vec<Tensor> = inputs
                .iter()
                .filter(|t| t.requires_grad())
                .cloned()
                .collect();
            let opts = BackwardOptions {
                retain_graph: true,
                create_graph: true,
                overwrite_grad: false,
            };
            let mut gs = grad(&y, &wanted, Some(g), opts)?.into_iter();
            return Ok(need
                .iter()
                .map(|&n| if n { gs.next() } else { None })
                .collect());
        }
        let gs = self.tape.backward(g.array(), inputs[1].array(), &need)?;
        Ok(gs.into_iter().map(|a| a.map(Tensor::new)).collect())
    }
}
