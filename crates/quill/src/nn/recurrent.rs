//! What RNN, LSTM and GRU share: the cell kinds and one step of their math in Tensor ops,
//! one layer's parameters (PyTorch's names, shapes and init), input and state validation, and
//! the multi-layer driver. Each layer projects the whole input sequence with one matmul
//! (`x W_ih^T + b_ih` for every step at once) and then runs its time loop either as one fused
//! op (`recurrent_op`) or as a per-step graph of primitive ops (`layer_composite`), which is
//! also the fused op's reference and its double-backward.

use super::init;
use super::recurrent_op;
use crate::tensor::Tensor;
use quill_core::{DType, Error, Result, SliceArg};

/// The activation of a plain (Elman) RNN cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nonlinearity {
    /// tanh: a bounded state, PyTorch's default.
    Tanh,
    /// max(x, 0): an unbounded state, which may blow up over long sequences.
    Relu,
}

/// Which recurrence a layer computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CellKind {
    Rnn(Nonlinearity),
    Lstm,
    Gru,
}

impl CellKind {
    /// Rows of `weight_ih` per hidden unit: PyTorch's gate count.
    pub(crate) fn gates(self) -> usize {
        match self {
            CellKind::Rnn(_) => 1,
            CellKind::Lstm => 4,
            CellKind::Gru => 3,
        }
    }
}

/// One layer's (or one cell's) weights, as PyTorch stores them: `weight_ih` (G*H, I),
/// `weight_hh` (G*H, H), `bias_ih` and `bias_hh` (G*H), with G the gate count (1 for RNN,
/// 4 for LSTM in the order i, f, g, o, 3 for GRU in the order r, z, n).
pub struct RecurrentParams {
    /// Input-to-hidden weights (G*H, I), applied to the whole sequence in one matmul.
    pub weight_ih: Tensor,
    /// Hidden-to-hidden weights (G*H, H), applied at every step.
    pub weight_hh: Tensor,
    /// Input-side bias (G*H); `None` for a bias-free layer.
    pub bias_ih: Option<Tensor>,
    /// Hidden-side bias (G*H), kept apart from `bias_ih` as PyTorch does (it matters for GRU's
    /// n gate, where it sits inside the reset product); `None` for a bias-free layer.
    pub bias_hh: Option<Tensor>,
}

impl RecurrentParams {
    /// PyTorch's init: every tensor uniform in ±1/sqrt(hidden).
    pub(crate) fn init(
        kind: CellKind,
        input: usize,
        hidden: usize,
        bias: bool,
        seed: u64,
        dtype: DType,
    ) -> Result<RecurrentParams> {
        if hidden == 0 || input == 0 {
            return Err(Error::invalid(
                "recurrent layer",
                format!("input_size and hidden_size must be at least 1, got {input} and {hidden}"),
            ));
        }
        let gh = kind.gates() * hidden;
        let bound = 1.0 / (hidden as f64).sqrt();
        // Distinct streams per tensor, so that no two parameters share values.
        let sub = |k: u64| seed ^ 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(k);
        let leaf = |shape: &[usize], k: u64| -> Result<Tensor> {
            Tensor::from_array(init::uniform(shape, bound, sub(k), dtype)?, true)
        };
        Ok(RecurrentParams {
            weight_ih: leaf(&[gh, input], 1)?,
            weight_hh: leaf(&[gh, hidden], 2)?,
            bias_ih: bias.then(|| leaf(&[gh], 3)).transpose()?,
            bias_hh: bias.then(|| leaf(&[gh], 4)).transpose()?,
        })
    }

    pub(crate) fn input_size(&self) -> usize {
        self.weight_ih.shape()[1]
    }

    pub(crate) fn hidden_size(&self) -> usize {
        self.weight_hh.shape()[1]
    }

    /// `weight_ih{suffix}`, `weight_hh{suffix}`, then the biases: PyTorch's order.
    pub(crate) fn named(&self, suffix: &str) -> Vec<(String, Tensor)> {
        let mut v = vec![
            (format!("weight_ih{suffix}"), self.weight_ih.clone()),
            (format!("weight_hh{suffix}"), self.weight_hh.clone()),
        ];
        if let Some(b) = &self.bias_ih {
            v.push((format!("bias_ih{suffix}"), b.clone()));
        }
        if let Some(b) = &self.bias_hh {
            v.push((format!("bias_hh{suffix}"), b.clone()));
        }
        v
    }

    /// `x W_ih^T + b_ih` for `x` (..., I): one matmul over every leading position.
    pub(crate) fn project(&self, x: &Tensor) -> Result<Tensor> {
        let i = self.input_size() as isize;
        let lead: Vec<isize> = x.shape()[..x.ndim() - 1]
            .iter()
            .map(|&d| d as isize)
            .collect();
        let y = x.reshape(&[-1, i])?.matmul(&self.weight_ih.mt()?)?;
        let y = match &self.bias_ih {
            Some(b) => y.add(b)?,
            None => y,
        };
        let mut shape = lead;
        shape.push(self.weight_ih.shape()[0] as isize);
        y.reshape(&shape)
    }

    /// `bias_hh`, or zeros (a constant) when the layer has no bias.
    fn bias_hh_or_zeros(&self) -> Result<Tensor> {
        match &self.bias_hh {
            Some(b) => Ok(b.clone()),
            None => Tensor::zeros_on(
                &[self.weight_hh.shape()[0]],
                self.weight_hh.dtype(),
                self.weight_hh.device(),
            ),
        }
    }
}

/// One step of `kind` in primitive Tensor ops: `gx` (B, G*H) is the input's projection,
/// `h` (and `c`) the previous state; returns the new `h` (and `c`).
pub(crate) fn step(
    kind: CellKind,
    gx: &Tensor,
    h: &Tensor,
    c: Option<&Tensor>,
    w_hh: &Tensor,
    b_hh: &Tensor,
) -> Result<(Tensor, Option<Tensor>)> {
    let gh = h.matmul(&w_hh.mt()?)?.add(b_hh)?;
    let hidden = h.shape()[1];
    match kind {
        CellKind::Rnn(act) => {
            let a = gx.add(&gh)?;
            let h2 = match act {
                Nonlinearity::Tanh => a.tanh()?,
                Nonlinearity::Relu => a.relu()?,
            };
            Ok((h2, None))
        }
        CellKind::Lstm => {
            let c = c.ok_or_else(|| Error::invalid("LSTM", "internal: no cell state"))?;
            let a = gx.add(&gh)?.split(&[hidden; 4], 1)?;
            let (i, f) = (a[0].sigmoid()?, a[1].sigmoid()?);
            let (g, o) = (a[2].tanh()?, a[3].sigmoid()?);
            let c2 = f.mul(c)?.add(&i.mul(&g)?)?;
            let h2 = o.mul(&c2.tanh()?)?;
            Ok((h2, Some(c2)))
        }
        CellKind::Gru => {
            let x = gx.split(&[hidden; 3], 1)?;
            let y = gh.split(&[hidden; 3], 1)?;
            let r = x[0].add(&y[0])?.sigmoid()?;
            let z = x[1].add(&y[1])?.sigmoid()?;
            let n = x[2].add(&r.mul(&y[2])?)?.tanh()?;
            // (1 - z) * n + z * h
            let h2 = n.add(&z.mul(&h.sub(&n)?)?)?;
            Ok((h2, None))
        }
    }
}

/// One layer over a whole sequence as a per-step graph of primitive ops. `xg` (T, B, G*H);
/// returns the hidden sequence (T, B, H), or for LSTM the hidden and cell sequences stacked
/// (2, T, B, H): the same contract as the fused op.
pub(crate) fn layer_composite(
    kind: CellKind,
    xg: &Tensor,
    w_hh: &Tensor,
    b_hh: &Tensor,
    h0: &Tensor,
    c0: Option<&Tensor>,
) -> Result<Tensor> {
    let steps = xg.shape()[0];
    let (mut h, mut c) = (h0.clone(), c0.cloned());
    let (mut hs, mut cs) = (Vec::with_capacity(steps), Vec::with_capacity(steps));
    for t in 0..steps {
        let gx = xg.slice(&[SliceArg::Index(t as isize)])?;
        let (h2, c2) = step(kind, &gx, &h, c.as_ref(), w_hh, b_hh)?;
        hs.push(h2.clone());
        h = h2;
        if let Some(c2) = c2 {
            cs.push(c2.clone());
            c = Some(c2);
        }
    }
    let hseq = Tensor::stack(&hs.iter().collect::<Vec<_>>(), 0)?;
    if kind == CellKind::Lstm {
        let cseq = Tensor::stack(&cs.iter().collect::<Vec<_>>(), 0)?;
        Tensor::stack(&[&hseq, &cseq], 0)
    } else {
        Ok(hseq)
    }
}

/// One layer over a sequence, fused or as the per-step graph (see `layer_composite`).
pub(crate) fn layer(
    kind: CellKind,
    fused: bool,
    xg: &Tensor,
    w_hh: &Tensor,
    b_hh: &Tensor,
    h0: &Tensor,
    c0: Option<&Tensor>,
) -> Result<Tensor> {
    if fused {
        recurrent_op::layer_fused(kind, xg, w_hh, b_hh, h0, c0)
    } else {
        layer_composite(kind, xg, w_hh, b_hh, h0, c0)
    }
}

/// Errors unless `state` is (layers, batch, hidden).
fn check_state(op: &'static str, what: &str, state: &Tensor, want: &[usize]) -> Result<()> {
    if state.shape() != want {
        return Err(Error::ShapeMismatch {
            op,
            lhs: state.shape().into(),
            rhs: want.into(),
            hint: format!(" (the {what} must be (num_layers, batch, hidden_size) = {want:?})"),
        });
    }
    Ok(())
}

/// The final states of a stack: `h_n` (L, B, H) and, for LSTM, `c_n`.
pub(crate) struct Finals {
    pub h: Tensor,
    pub c: Option<Tensor>,
}

/// Runs the layers over `x` (T, B, I) from `h0` (and `c0`), each (L, B, H) or zeros;
/// returns the last layer's hidden sequence (T, B, H) and the final states.
pub(crate) fn run_stack(
    op: &'static str,
    kind: CellKind,
    layers: &[RecurrentParams],
    fused: bool,
    x: &Tensor,
    h0: Option<&Tensor>,
    c0: Option<&Tensor>,
) -> Result<(Tensor, Finals)> {
    let first = &layers[0];
    let (input, hidden, nl) = (first.input_size(), first.hidden_size(), layers.len());
    if x.ndim() != 3 || x.shape()[2] != input {
        return Err(Error::ShapeMismatch {
            op,
            lhs: x.shape().into(),
            rhs: first.weight_ih.shape().into(),
            hint: format!(
                " (the input must be (seq_len, batch, input_size) with input_size = {input}; \
                 rhs is weight_ih_l0)"
            ),
        });
    }
    let (steps, batch) = (x.shape()[0], x.shape()[1]);
    if steps == 0 || batch == 0 {
        return Err(Error::invalid(
            op,
            format!(
                "needs seq_len and batch of at least 1, got input shape {:?}",
                x.shape()
            ),
        ));
    }
    let want = [nl, batch, hidden];
    if let Some(h0) = h0 {
        check_state(op, "initial hidden state h0", h0, &want)?;
    }
    if let Some(c0) = c0 {
        check_state(op, "initial cell state c0", c0, &want)?;
    }
    let dtype = first.weight_ih.dtype();
    let initial = |s: Option<&Tensor>, k: usize| -> Result<Tensor> {
        match s {
            Some(s) => s.slice(&[SliceArg::Index(k as isize)])?.astype(dtype),
            None => Tensor::zeros_on(&[batch, hidden], dtype, x.device()),
        }
    };
    let mut seq = x.astype(dtype)?;
    let (mut hn, mut cn) = (Vec::with_capacity(nl), Vec::with_capacity(nl));
    let last = SliceArg::Index(steps as isize - 1);
    for (k, p) in layers.iter().enumerate() {
        let xg = p.project(&seq)?;
        let h0k = initial(h0, k)?;
        let c0k = (kind == CellKind::Lstm)
            .then(|| initial(c0, k))
            .transpose()?;
        let out = layer(
            kind,
            fused,
            &xg,
            &p.weight_hh,
            &p.bias_hh_or_zeros()?,
            &h0k,
            c0k.as_ref(),
        )?;
        if kind == CellKind::Lstm {
            let cseq = out.slice(&[SliceArg::Index(1)])?;
            cn.push(cseq.slice(&[last])?);
            seq = out.slice(&[SliceArg::Index(0)])?;
        } else {
            seq = out;
        }
        hn.push(seq.slice(&[last])?);
    }
    let h = Tensor::stack(&hn.iter().collect::<Vec<_>>(), 0)?;
    let c = (kind == CellKind::Lstm)
        .then(|| Tensor::stack(&cn.iter().collect::<Vec<_>>(), 0))
        .transpose()?;
    Ok((seq, Finals { h, c }))
}

/// One step of a cell: `x` (B, I), `h` and `c` (B, H) or zeros; the new `h` (and `c`).
pub(crate) fn run_cell(
    op: &'static str,
    kind: CellKind,
    p: &RecurrentParams,
    fused: bool,
    x: &Tensor,
    h: Option<&Tensor>,
    c: Option<&Tensor>,
) -> Result<(Tensor, Option<Tensor>)> {
    let (input, hidden) = (p.input_size(), p.hidden_size());
    if x.ndim() != 2 || x.shape()[1] != input || x.shape()[0] == 0 {
        return Err(Error::ShapeMismatch {
            op,
            lhs: x.shape().into(),
            rhs: p.weight_ih.shape().into(),
            hint: format!(
                " (the input must be (batch, input_size) with batch >= 1 and input_size = \
                 {input}; rhs is weight_ih)"
            ),
        });
    }
    let batch = x.shape()[0];
    let want = [batch, hidden];
    let dtype = p.weight_ih.dtype();
    let state = |s: Option<&Tensor>, what: &str| -> Result<Tensor> {
        match s {
            Some(s) if s.shape() != want => Err(Error::ShapeMismatch {
                op,
                lhs: s.shape().into(),
                rhs: want[..].into(),
                hint: format!(" (the {what} must be (batch, hidden_size) = {want:?})"),
            }),
            Some(s) => s.astype(dtype),
            None => Tensor::zeros_on(&want, dtype, x.device()),
        }
    };
    let h = state(h, "hidden state")?;
    let c = (kind == CellKind::Lstm)
        .then(|| state(c, "cell state"))
        .transpose()?;
    let xg = p.project(&x.astype(dtype)?)?.unsqueeze(0)?;
    let out = layer(
        kind,
        fused,
        &xg,
        &p.weight_hh,
        &p.bias_hh_or_zeros()?,
        &h,
        c.as_ref(),
    )?;
    let at = |i: isize| -> Result<Tensor> {
        if kind == CellKind::Lstm {
            out.slice(&[SliceArg::Index(i), SliceArg::Index(0)])
        } else {
            out.slice(&[SliceArg::Index(0)])
        }
    };
    let h2 = at(0)?;
    let c2 = (kind == CellKind::Lstm).then(|| at(1)).transpose()?;
    Ok((h2, c2))
}
