//! One recurrent layer over a whole sequence as a single graph node (RNN, LSTM or GRU):
//! the forward runs the time loop with one matmul per step (`h W_hh^T`) and the gate math
//! of each step in one pass over host slices; the backward runs the loop in reverse the same
//! way and ends with one matmul for `dW_hh` over every step. Per-step primitive ops made
//! about 15 graph nodes per step and, worse, each step's slice of the input projection
//! scattered a gradient the size of the whole sequence. CPU f32 / f64 only: other devices
//! and dtypes take the per-step graph. When the backward is itself recorded
//! (`create_graph`) it is the gradient of that per-step graph, so higher derivatives hold.

use super::recurrent::{layer_composite, CellKind};
use super::recurrent_kernels::{
    backward_step, forward_step, GradIn, GradOut, Real, StepIn, StepOut,
};
use crate::tensor::{grad, is_grad_enabled, Backward, BackwardOptions, Tensor};
use crate::{Device, NDArray};
use quill_core::{DType, Result};

/// Sizes of one layer run.
#[derive(Clone, Copy)]
struct Dims {
    steps: usize,
    batch: usize,
    hidden: usize,
}

impl Dims {
    fn bh(self) -> usize {
        self.batch * self.hidden
    }
}

/// What the backward needs, saved by the forward (host copies).
struct Layer<R: Real> {
    kind: CellKind,
    d: Dims,
    /// h0 then h_1 .. h_T (T + 1 blocks of B*H); LSTM: the same for c.
    hs: Vec<R>,
    cs: Vec<R>,
    /// Per step and row: LSTM i, f, g, o, tanh(c); GRU r, z, n, (W_hn h + b_hn). Blocks of H.
    saved: Vec<R>,
}

/// The fused layer (see the module doc); falls back to the per-step graph off the CPU or for
/// dtypes other than f32 / f64.
pub(crate) fn layer_fused(
    kind: CellKind,
    xg: &Tensor,
    w_hh: &Tensor,
    b_hh: &Tensor,
    h0: &Tensor,
    c0: Option<&Tensor>,
) -> Result<Tensor> {
    let all: Vec<&Tensor> = [xg, w_hh, b_hh, h0].into_iter().chain(c0).collect();
    let on_cpu = all.iter().all(|t| t.device() == Device::Cpu);
    let same = all.iter().all(|t| t.dtype() == xg.dtype());
    let arrays = || -> Vec<&NDArray> { all.iter().map(|t| t.array()).collect() };
    match xg.dtype() {
        DType::F32 if on_cpu && same => {
            let (out, op) = forward::<f32>(kind, &arrays())?;
            Ok(Tensor::make(out, &all, op))
        }
        DType::F64 if on_cpu && same => {
            let (out, op) = forward::<f64>(kind, &arrays())?;
            Ok(Tensor::make(out, &all, op))
        }
        _ => layer_composite(kind, xg, w_hh, b_hh, h0, c0),
    }
}

/// `inputs`: xg (T, B, G*H), w_hh (G*H, H), b_hh (G*H), h0 (B, H) [, c0 (B, H)].
fn forward<R: Real>(kind: CellKind, inputs: &[&NDArray]) -> Result<(NDArray, Layer<R>)> {
    let (xg, w_hh) = (inputs[0], inputs[1]);
    let d = Dims {
        steps: xg.shape()[0],
        batch: xg.shape()[1],
        hidden: w_hh.shape()[1],
    };
    let (bh, h, gh) = (d.bh(), d.hidden, kind.gates() * d.hidden);
    let x: Vec<R> = inputs[0].to_vec()?;
    let bias: Vec<R> = inputs[2].to_vec()?;
    let w_t = w_hh.transpose(0, 1)?;
    let lstm = kind == CellKind::Lstm;
    let mut hs: Vec<R> = vec![R::ZERO; (d.steps + 1) * bh];
    hs[..bh].copy_from_slice(&inputs[3].to_vec::<R>()?);
    let mut cs: Vec<R> = Vec::new();
    if lstm {
        cs = vec![R::ZERO; (d.steps + 1) * bh];
        cs[..bh].copy_from_slice(&inputs[4].to_vec::<R>()?);
    }
    let sw = kind.saved_width() * h;
    let mut saved = vec![R::ZERO; d.steps * d.batch * sw];
    for t in 0..d.steps {
        let h_prev = NDArray::from_vec(hs[t * bh..(t + 1) * bh].to_vec(), &[d.batch, h])?;
        let proj = h_prev.matmul(&w_t)?;
        let (head, tail) = hs.split_at_mut((t + 1) * bh);
        let (ch, ct) = cs.split_at_mut(if lstm { (t + 1) * bh } else { 0 });
        let (x_t, hp) = (
            &x[t * d.batch * gh..(t + 1) * d.batch * gh],
            &head[t * bh..],
        );
        let cp: &[R] = if lstm { &ch[t * bh..] } else { &[] };
        let out = StepOut {
            h: &mut tail[..bh],
            c: if lstm { &mut ct[..bh] } else { &mut [] },
            saved: &mut saved[t * d.batch * sw..(t + 1) * d.batch * sw],
        };
        proj.with_host_slice(|g: &[R]| {
            let inp = StepIn {
                x: x_t,
                g,
                bias: &bias,
                hp,
                cp,
            };
            forward_step(kind, h, inp, out)
        })?;
    }
    let out = if lstm {
        let mut v = hs[bh..].to_vec();
        v.extend_from_slice(&cs[bh..]);
        NDArray::from_vec(v, &[2, d.steps, d.batch, h])?
    } else {
        NDArray::from_vec(hs[bh..].to_vec(), &[d.steps, d.batch, h])?
    };
    Ok((
        out,
        Layer {
            kind,
            d,
            hs,
            cs,
            saved,
        },
    ))
}

impl<R: Real> Layer<R> {
    /// Gradients of (xg, w_hh, b_hh, h0, c0) from `g` (the output's gradient) and `w_hh`.
    fn grads(&self, g: &NDArray, w_hh: &NDArray, need: &[bool]) -> Result<Vec<Option<NDArray>>> {
        let (d, kind) = (self.d, self.kind);
        let (bh, h, gh) = (d.bh(), d.hidden, kind.gates() * d.hidden);
        let lstm = kind == CellKind::Lstm;
        let gru = kind == CellKind::Gru;
        let gv: Vec<R> = g.to_vec()?;
        let (gh_seq, gc_seq) = gv.split_at(d.steps * bh);
        let sw = kind.saved_width() * h;
        let blk = d.batch * gh;
        // d(pre-activation) of the input side and, for GRU, of the hidden side (they differ
        // in the n gate, which r scales); for RNN and LSTM they are one array.
        let mut dgx = vec![R::ZERO; d.steps * blk];
        let mut dgh = if gru {
            vec![R::ZERO; d.steps * blk]
        } else {
            Vec::new()
        };
        let mut dh_next = vec![R::ZERO; bh];
        let mut dc_next = vec![R::ZERO; if lstm { bh } else { 0 }];
        let mut direct = vec![R::ZERO; if gru { bh } else { 0 }];
        for t in (0..d.steps).rev() {
            let dh: Vec<R> = (0..bh).map(|k| gh_seq[t * bh + k] + dh_next[k]).collect();
            let inp = GradIn {
                dh: &dh,
                dc_out: if lstm {
                    &gc_seq[t * bh..(t + 1) * bh]
                } else {
                    &[]
                },
                h: &self.hs[(t + 1) * bh..(t + 2) * bh],
                hp: &self.hs[t * bh..(t + 1) * bh],
                cp: if lstm {
                    &self.cs[t * bh..(t + 1) * bh]
                } else {
                    &[]
                },
                saved: &self.saved[t * d.batch * sw..(t + 1) * d.batch * sw],
            };
            let out = GradOut {
                gx: &mut dgx[t * blk..(t + 1) * blk],
                gh: if gru {
                    &mut dgh[t * blk..(t + 1) * blk]
                } else {
                    &mut []
                },
                carry: if lstm { &mut dc_next } else { &mut direct },
            };
            backward_step(kind, h, inp, out);
            // dh_{t-1} = (direct path) + d(gates_h) W_hh; not needed below step 0 unless h0
            // wants a gradient.
            if t > 0 || need[3] || (lstm && need.get(4) == Some(&true)) {
                let side = if gru { &dgh } else { &dgx };
                let dg = NDArray::from_vec(side[t * blk..(t + 1) * blk].to_vec(), &[d.batch, gh])?;
                let back: Vec<R> = dg.matmul(w_hh)?.to_vec()?;
                for (k, v) in back.into_iter().enumerate() {
                    dh_next[k] = if gru { direct[k] + v } else { v };
                }
            }
        }
        let side = if gru { &dgh } else { &dgx };
        let gw = need[1]
            .then(|| -> Result<NDArray> {
                let dgm = NDArray::from_vec(side.clone(), &[d.steps * d.batch, gh])?;
                let hp =
                    NDArray::from_vec(self.hs[..d.steps * bh].to_vec(), &[d.steps * d.batch, h])?;
                dgm.transpose(0, 1)?.matmul(&hp)
            })
            .transpose()?;
        let gb = need[2]
            .then(|| {
                let mut acc = vec![R::ZERO; gh];
                for rowv in side.chunks_exact(gh) {
                    for (a, &v) in acc.iter_mut().zip(rowv) {
                        *a = *a + v;
                    }
                }
                NDArray::from_vec(acc, &[gh])
            })
            .transpose()?;
        let gx = need[0]
            .then(|| NDArray::from_vec(dgx, &[d.steps, d.batch, gh]))
            .transpose()?;
        let g0 = need[3]
            .then(|| NDArray::from_vec(dh_next, &[d.batch, h]))
            .transpose()?;
        let mut out = vec![gx, gw, gb, g0];
        if lstm {
            out.push(
                need[4]
                    .then(|| NDArray::from_vec(dc_next, &[d.batch, h]))
                    .transpose()?,
            );
        }
        Ok(out)
    }
}

impl<R: Real> Backward for Layer<R> {
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
        let gs = self.grads(g.array(), inputs[1].array(), &need)?;
        Ok(gs.into_iter().map(|a| a.map(Tensor::new)).collect())
    }
}
