//! One recurrent layer over a whole sequence (RNN, LSTM or GRU) as a fused op: the forward
//! runs the time loop with one matmul per step (`h W_hh^T`) and the gate math of each step in
//! one pass over host slices (`quill_cpu::fused::recurrent`); the backward runs the loop in
//! reverse the same way and ends with one matmul for `dW_hh` over every step. Per-step
//! primitive ops made about 15 graph nodes per step and, worse, each step's slice of the input
//! projection scattered a gradient the size of the whole sequence. The kernel takes f32 / f64
//! on the CPU; elsewhere `recurrent_layer` answers `None` and the caller runs its composite,
//! the per-step graph in Tensor ops (a composite that must be differentiated as a graph lives
//! where the graph does). Its sequence-sized host buffers come from quill-cpu's buffer pool
//! and go back to it: fresh, every training step paid a first-touch page fault per 4 KiB of
//! them (about a fifth of an LSTM step).

use super::{f32_f64, none, run, FusedKind, FusedOp};
use crate::NDArray;
use quill_core::{DType, Error, Result};
use quill_cpu::fused::recurrent::{
    backward_step, forward_step, GradIn, GradOut, Real, StepIn, StepOut,
};
pub use quill_cpu::fused::recurrent::{Activation, Cell};
use quill_cpu::pool;

/// The registry entry (its backward is the tape's, which only the kernel makes).
pub(crate) const FORWARD: FusedKind = FusedKind {
    name: "recurrent_layer",
    cpu: f32_f64,
    cuda: none,
    composite: &["matmul", "add", "mul", "sub", "sigmoid", "tanh", "relu"],
};

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
    kind: Cell,
    d: Dims,
    /// h0 then h_1 .. h_T (T + 1 blocks of B*H); LSTM: the same for c.
    hs: Vec<R>,
    cs: Vec<R>,
    /// Per step and row: LSTM i, f, g, o, tanh(c); GRU r, z, n, (W_hn h + b_hn). Blocks of H.
    saved: Vec<R>,
}

impl<R: Real> Drop for Layer<R> {
    fn drop(&mut self) {
        for v in [&mut self.hs, &mut self.cs, &mut self.saved] {
            pool::give(std::mem::take(v));
        }
    }
}

/// A pooled buffer of `n` elements, every one of which the caller overwrites.
fn pooled<R: Real>(n: usize) -> Result<Vec<R>> {
    pool::take::<R>(FORWARD.name, n)
}

/// A pooled host copy of `a`'s elements in C order.
fn pooled_copy<R: Real>(a: &NDArray) -> Result<Vec<R>> {
    let mut v = pooled::<R>(a.numel())?;
    a.with_host_slice(|s: &[R]| v.copy_from_slice(s))?;
    Ok(v)
}

enum Saved {
    F32(Layer<f32>),
    F64(Layer<f64>),
}

/// What the fused layer's backward needs, kept by the forward: each step's states and gates
/// (host copies).
pub struct RecurrentTape(Saved);

impl std::fmt::Debug for RecurrentTape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RecurrentTape({:?})", self.cell())
    }
}

impl RecurrentTape {
    /// The recurrence that made this tape.
    pub fn cell(&self) -> Cell {
        match &self.0 {
            Saved::F32(l) => l.kind,
            Saved::F64(l) => l.kind,
        }
    }

    /// The gradients of (xg, w_hh, b_hh, h0[, c0]) given `grad`, the gradient of the
    /// forward's output, and the `w_hh` it ran with; only those `need` asks for are computed.
    pub fn backward(
        &self,
        grad: &NDArray,
        w_hh: &NDArray,
        need: &[bool],
    ) -> Result<Vec<Option<NDArray>>> {
        const OP: &str = "recurrent_layer_backward";
        let (d, lstm) = match &self.0 {
            Saved::F32(l) => (l.d, l.kind == Cell::Lstm),
            Saved::F64(l) => (l.d, l.kind == Cell::Lstm),
        };
        let want: Vec<usize> = if lstm {
            vec![2, d.steps, d.batch, d.hidden]
        } else {
            vec![d.steps, d.batch, d.hidden]
        };
        let gates = self.cell().gates() * d.hidden;
        if grad.shape() != want
            || w_hh.shape() != [gates, d.hidden]
            || need.len() < 4 + lstm as usize
        {
            return Err(Error::invalid(
                OP,
                format!(
                    "the gradient must be {want:?} and w_hh [{gates}, {}] with {} flags; got \
                     {:?}, {:?} and {}",
                    d.hidden,
                    4 + lstm as usize,
                    grad.shape(),
                    w_hh.shape(),
                    need.len()
                ),
            ));
        }
        match &self.0 {
            Saved::F32(l) => l.grads(
                &grad.astype_if(DType::F32)?,
                &w_hh.astype_if(DType::F32)?,
                need,
            ),
            Saved::F64(l) => l.grads(
                &grad.astype_if(DType::F64)?,
                &w_hh.astype_if(DType::F64)?,
                need,
            ),
        }
    }
}

struct Forward {
    cell: Cell,
}

impl FusedOp for Forward {
    type Output = Option<(NDArray, RecurrentTape)>;
    fn kind(&self) -> &'static FusedKind {
        &FORWARD
    }
    /// xg (T, B, G*H), w_hh (G*H, H), b_hh (G*H), h0 (B, H) [, c0 (B, H)].
    fn check(&self, i: &[&NDArray]) -> Result<()> {
        let lstm = self.cell == Cell::Lstm;
        let ok_count = i.len() == 4 + lstm as usize;
        let (xg, w_hh) = (i[0], i[1]);
        let h = w_hh.shape().get(1).copied().unwrap_or(0);
        let gh = self.cell.gates() * h;
        let (t, b) = (
            xg.shape().first().copied().unwrap_or(0),
            xg.shape().get(1).copied().unwrap_or(0),
        );
        let ok = ok_count
            && xg.shape() == [t, b, gh]
            && w_hh.shape() == [gh, h]
            && i[2].shape() == [gh]
            && i[3..].iter().all(|s| s.shape() == [b, h]);
        if !ok {
            let shapes: Vec<&[usize]> = i.iter().map(|a| a.shape()).collect();
            return Err(Error::invalid(
                FORWARD.name,
                format!(
                    "{:?} takes xg (T, B, G*H), w_hh (G*H, H), b_hh (G*H), h0 (B, H){} with \
                     G = {}; got shapes {shapes:?}",
                    self.cell,
                    if lstm { " and c0 (B, H)" } else { "" },
                    self.cell.gates()
                ),
            ));
        }
        Ok(())
    }
    /// The per-step graph is the caller's (it is differentiated as a graph): `None`.
    fn composite(&self, _: &[&NDArray]) -> Result<Self::Output> {
        Ok(None)
    }
    fn cpu(&self, i: &[&NDArray]) -> Result<Self::Output> {
        Ok(Some(match i[0].dtype() {
            DType::F32 => {
                let (out, l) = forward::<f32>(self.cell, i)?;
                (out, RecurrentTape(Saved::F32(l)))
            }
            _ => {
                let (out, l) = forward::<f64>(self.cell, i)?;
                (out, RecurrentTape(Saved::F64(l)))
            }
        }))
    }
}

impl NDArray {
    /// One recurrent layer over a sequence by the fused kernel: `self` is the input
    /// projection plus its bias, xg (T, B, G*H); `w_hh` (G*H, H), `b_hh` (G*H), `h0` (B, H)
    /// and, for an LSTM, `c0` (B, H). Returns the hidden states (T, B, H) (an LSTM: the
    /// hidden and cell states stacked, (2, T, B, H)) and the tape for the backward; `None`
    /// where the device has no kernel for these dtypes (the caller runs the per-step
    /// composite).
    pub fn recurrent_layer(
        &self,
        cell: Cell,
        w_hh: &NDArray,
        b_hh: &NDArray,
        h0: &NDArray,
        c0: Option<&NDArray>,
    ) -> Result<Option<(NDArray, RecurrentTape)>> {
        let inputs: Vec<&NDArray> = [self, w_hh, b_hh, h0].into_iter().chain(c0).collect();
        run(&Forward { cell }, &inputs)
    }
}

/// `inputs`: xg (T, B, G*H), w_hh (G*H, H), b_hh (G*H), h0 (B, H) [, c0 (B, H)].
fn forward<R: Real>(kind: Cell, inputs: &[&NDArray]) -> Result<(NDArray, Layer<R>)> {
    let (xg, w_hh) = (inputs[0], inputs[1]);
    let d = Dims {
        steps: xg.shape()[0],
        batch: xg.shape()[1],
        hidden: w_hh.shape()[1],
    };
    let (bh, h, gh) = (d.bh(), d.hidden, kind.gates() * d.hidden);
    let x: Vec<R> = pooled_copy(inputs[0])?;
    let bias: Vec<R> = inputs[2].to_vec()?;
    let w_t = w_hh.transpose(0, 1)?;
    let lstm = kind == Cell::Lstm;
    // Every step writes its blocks of hs, cs and saved whole.
    let mut hs: Vec<R> = pooled((d.steps + 1) * bh)?;
    inputs[3].with_host_slice(|s: &[R]| hs[..bh].copy_from_slice(s))?;
    let mut cs: Vec<R> = Vec::new();
    if lstm {
        cs = pooled((d.steps + 1) * bh)?;
        inputs[4].with_host_slice(|s: &[R]| cs[..bh].copy_from_slice(s))?;
    }
    let sw = kind.saved_width() * h;
    let mut saved = pooled(d.steps * d.batch * sw)?;
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
    pool::give(x);
    let n = d.steps * bh;
    let out = if lstm {
        let mut v = pooled(2 * n)?;
        v[..n].copy_from_slice(&hs[bh..]);
        v[n..].copy_from_slice(&cs[bh..]);
        NDArray::from_vec(v, &[2, d.steps, d.batch, h])?
    } else {
        let mut v = pooled(n)?;
        v.copy_from_slice(&hs[bh..]);
        NDArray::from_vec(v, &[d.steps, d.batch, h])?
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
        let lstm = kind == Cell::Lstm;
        let gru = kind == Cell::Gru;
        let gv: Vec<R> = pooled_copy(g)?;
        let (gh_seq, gc_seq) = gv.split_at(d.steps * bh);
        let sw = kind.saved_width() * h;
        let blk = d.batch * gh;
        // d(pre-activation) of the input side and, for GRU, of the hidden side (they differ
        // in the n gate, which r scales); for RNN and LSTM they are one array.
        // Every step writes its blocks of dgx and dgh whole.
        let mut dgx: Vec<R> = pooled(d.steps * blk)?;
        let mut dgh: Vec<R> = if gru {
            pooled(d.steps * blk)?
        } else {
            Vec::new()
        };
        let mut dh_next = vec![R::ZERO; bh];
        let mut dc_next = vec![R::ZERO; if lstm { bh } else { 0 }];
        let mut direct = vec![R::ZERO; if gru { bh } else { 0 }];
        let mut dh = vec![R::ZERO; bh];
        for t in (0..d.steps).rev() {
            for ((d, &g), &n) in dh.iter_mut().zip(&gh_seq[t * bh..]).zip(&dh_next) {
                *d = g + n;
            }
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
        pool::give(gv);
        // dgx becomes the xg gradient; the weight and bias gradients read it (dgh for GRU)
        // through a view rather than a copy.
        let gx_arr = NDArray::from_vec(dgx, &[d.steps, d.batch, gh])?;
        let side = if gru {
            NDArray::from_vec(dgh, &[d.steps * d.batch, gh])?
        } else {
            gx_arr.reshape(&[(d.steps * d.batch) as isize, gh as isize])?
        };
        let gw = need[1]
            .then(|| -> Result<NDArray> {
                let mut hp = pooled::<R>(d.steps * bh)?;
                hp.copy_from_slice(&self.hs[..d.steps * bh]);
                let hp = NDArray::from_vec(hp, &[d.steps * d.batch, h])?;
                side.transpose(0, 1)?.matmul(&hp)
            })
            .transpose()?;
        let gb = need[2]
            .then(|| {
                let acc = side.with_host_slice(|side: &[R]| {
                    let mut acc = vec![R::ZERO; gh];
                    for rowv in side.chunks_exact(gh) {
                        for (a, &v) in acc.iter_mut().zip(rowv) {
                            *a = *a + v;
                        }
                    }
                    acc
                })?;
                NDArray::from_vec(acc, &[gh])
            })
            .transpose()?;
        let gx = need[0].then_some(gx_arr);
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
