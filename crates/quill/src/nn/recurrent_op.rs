//! One recurrent layer over a whole sequence as a single graph node (RNN, LSTM or GRU):
//! the forward runs the time loop with one matmul per step (`h W_hh^T`) and the gate math
//! of each step in one pass over host slices; the backward runs the loop in reverse the same
//! way and ends with one matmul for `dW_hh` over every step. Per-step primitive ops made
//! about 15 graph nodes per step and, worse, each step's slice of the input projection
//! scattered a gradient the size of the whole sequence. CPU f32 / f64 only: other devices
//! and dtypes take the per-step graph. When the backward is itself recorded
//! (`create_graph`) it is the gradient of that per-step graph, so higher derivatives hold.

use super::recurrent::{layer_composite, CellKind, Nonlinearity};
use crate::tensor::{grad, is_grad_enabled, Backward, BackwardOptions, Tensor};
use crate::{Device, NDArray};
use quill_core::{DType, Result};
use std::ops::{Add, Mul, Sub};

/// The float arithmetic of the gate math: f32 uses quill-cpu's vectorisable sigmoid / tanh.
trait Real:
    quill_cpu::CpuElement
    + Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    fn sigmoid(self) -> Self;
    fn tanh(self) -> Self;
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    #[inline(always)]
    fn sigmoid(self) -> f32 {
        quill_cpu::elementwise::math::sigmoid(self)
    }
    #[inline(always)]
    fn tanh(self) -> f32 {
        quill_cpu::elementwise::math::tanh(self)
    }
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    #[inline(always)]
    fn sigmoid(self) -> f64 {
        1.0 / (1.0 + (-self).exp())
    }
    #[inline(always)]
    fn tanh(self) -> f64 {
        f64::tanh(self)
    }
}

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

impl CellKind {
    /// Saved values per hidden unit and row.
    fn saved_width(self) -> usize {
        match self {
            CellKind::Rnn(_) => 0,
            CellKind::Lstm => 5,
            CellKind::Gru => 4,
        }
    }
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
        let (hp, hn) = (&head[t * bh..], &mut tail[..bh]);
        let (cp, cn): (&[R], &mut [R]) = if lstm {
            let (ch, ct) = cs.split_at_mut((t + 1) * bh);
            (&ch[t * bh..], &mut ct[..bh])
        } else {
            (&[], &mut [])
        };
        let sv = &mut saved[t * d.batch * sw..(t + 1) * d.batch * sw];
        let xt = &x[t * d.batch * gh..(t + 1) * d.batch * gh];
        proj.with_host_slice(|g: &[R]| {
            // x + h W_hh^T + b_hh of one row, every gate.
            let mut a = vec![R::ZERO; gh];
            for r in 0..d.batch {
                if kind != CellKind::Gru {
                    for (k, v) in a.iter_mut().enumerate() {
                        *v = xt[r * gh + k] + g[r * gh + k] + bias[k];
                    }
                }
                let (o, s) = (r * h, r * sw);
                match kind {
                    CellKind::Rnn(act) => {
                        for j in 0..h {
                            hn[o + j] = match act {
                                Nonlinearity::Tanh => a[j].tanh(),
                                Nonlinearity::Relu if a[j] > R::ZERO => a[j],
                                Nonlinearity::Relu => R::ZERO,
                            };
                        }
                    }
                    CellKind::Lstm => {
                        for j in 0..h {
                            let i = a[j].sigmoid();
                            let f = a[h + j].sigmoid();
                            let gg = a[2 * h + j].tanh();
                            let og = a[3 * h + j].sigmoid();
                            let c = f * cp[o + j] + i * gg;
                            let tc = c.tanh();
                            cn[o + j] = c;
                            hn[o + j] = og * tc;
                            sv[s + j] = i;
                            sv[s + h + j] = f;
                            sv[s + 2 * h + j] = gg;
                            sv[s + 3 * h + j] = og;
                            sv[s + 4 * h + j] = tc;
                        }
                    }
                    CellKind::Gru => {
                        for j in 0..h {
                            let (xr, xz, xn) =
                                (xt[r * gh + j], xt[r * gh + h + j], xt[r * gh + 2 * h + j]);
                            let hr = g[r * gh + j] + bias[j];
                            let hz = g[r * gh + h + j] + bias[h + j];
                            let hnn = g[r * gh + 2 * h + j] + bias[2 * h + j];
                            let rg = (xr + hr).sigmoid();
                            let z = (xz + hz).sigmoid();
                            let n = (xn + rg * hnn).tanh();
                            hn[o + j] = n + z * (hp[o + j] - n);
                            sv[s + j] = rg;
                            sv[s + h + j] = z;
                            sv[s + 2 * h + j] = n;
                            sv[s + 3 * h + j] = hnn;
                        }
                    }
                }
            }
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
            let sv = &self.saved[t * d.batch * sw..(t + 1) * d.batch * sw];
            let gx = &mut dgx[t * blk..(t + 1) * blk];
            for r in 0..d.batch {
                let (o, s, q) = (r * h, r * sw, r * gh);
                for j in 0..h {
                    let dh = gh_seq[t * bh + o + j] + dh_next[o + j];
                    match kind {
                        CellKind::Rnn(act) => {
                            let y = self.hs[(t + 1) * bh + o + j];
                            gx[q + j] = match act {
                                Nonlinearity::Tanh => dh * (R::ONE - y * y),
                                Nonlinearity::Relu if y > R::ZERO => dh,
                                Nonlinearity::Relu => R::ZERO,
                            };
                        }
                        CellKind::Lstm => {
                            let (i, f, gg) = (sv[s + j], sv[s + h + j], sv[s + 2 * h + j]);
                            let (og, tc) = (sv[s + 3 * h + j], sv[s + 4 * h + j]);
                            let cp = self.cs[t * bh + o + j];
                            let dc = gc_seq[t * bh + o + j]
                                + dc_next[o + j]
                                + dh * og * (R::ONE - tc * tc);
                            dc_next[o + j] = dc * f;
                            let di = dc * gg;
                            let df = dc * cp;
                            let dg = dc * i;
                            let d_o = dh * tc;
                            gx[q + j] = di * i * (R::ONE - i);
                            gx[q + h + j] = df * f * (R::ONE - f);
                            gx[q + 2 * h + j] = dg * (R::ONE - gg * gg);
                            gx[q + 3 * h + j] = d_o * og * (R::ONE - og);
                        }
                        CellKind::Gru => {
                            let (rg, z) = (sv[s + j], sv[s + h + j]);
                            let (n, hnn) = (sv[s + 2 * h + j], sv[s + 3 * h + j]);
                            let hp = self.hs[t * bh + o + j];
                            direct[o + j] = dh * z;
                            let dan = dh * (R::ONE - z) * (R::ONE - n * n);
                            let daz = dh * (hp - n) * z * (R::ONE - z);
                            let dar = dan * hnn * rg * (R::ONE - rg);
                            gx[q + j] = dar;
                            gx[q + h + j] = daz;
                            gx[q + 2 * h + j] = dan;
                            let hg = &mut dgh[t * blk..(t + 1) * blk];
                            hg[q + j] = dar;
                            hg[q + h + j] = daz;
                            hg[q + 2 * h + j] = dan * rg;
                        }
                    }
                }
            }
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
