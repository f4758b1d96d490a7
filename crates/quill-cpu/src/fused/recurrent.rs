//! The per-step gate math of the fused recurrent layers over host slices, forward and
//! backward, for one time step and every batch row. Written as plain loops over equal-length
//! row slices and run inside quill-cpu's widest SIMD context (`with_best_simd`): outside it,
//! the f32 sigmoid / tanh polynomials' `mul_add` compiled to libm calls and the LSTM forward
//! spent 0.9 ms per step of 32 x 128 units.

use crate::simd::with_best_simd;
use std::ops::{Add, Mul, Sub};

/// The float arithmetic of the gate math: f32 uses quill-cpu's vectorisable sigmoid and tanh.
/// (Method names differ from the inherent `f32::tanh`, which would win the lookup.)
pub trait Real:
    crate::CpuElement + Copy + PartialOrd + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self>
{
    /// ReLU's floor, and its gradient where the input was not positive.
    const ZERO: Self;
    /// For the `1 - x` factors of the gate derivatives.
    const ONE: Self;
    /// The logistic sigmoid `1 / (1 + e^-x)`, the i, f, o, r and z gates' activation.
    fn sigm(self) -> Self;
    /// The hyperbolic tangent, the candidate and cell activation.
    fn th(self) -> Self;
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    #[inline(always)]
    fn sigm(self) -> f32 {
        crate::elementwise::math::sigmoid(self)
    }
    #[inline(always)]
    fn th(self) -> f32 {
        crate::elementwise::math::tanh(self)
    }
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    #[inline(always)]
    fn sigm(self) -> f64 {
        1.0 / (1.0 + (-self).exp())
    }
    #[inline(always)]
    fn th(self) -> f64 {
        self.tanh()
    }
}

/// The activation of a plain RNN layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `tanh` (PyTorch's default).
    Tanh,
    /// `max(0, x)`.
    Relu,
}

/// The recurrence a layer runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    /// `h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)`.
    Rnn(Activation),
    /// PyTorch's LSTM, gates in the order i, f, g, o.
    Lstm,
    /// PyTorch's GRU, gates in the order r, z, n.
    Gru,
}

impl Cell {
    /// Rows of `weight_ih` per hidden unit: PyTorch's gate count.
    pub fn gates(self) -> usize {
        match self {
            Cell::Rnn(_) => 1,
            Cell::Lstm => 4,
            Cell::Gru => 3,
        }
    }

    /// Values the forward saves per row, in blocks of H: LSTM i, f, g, o, tanh(c'); GRU r,
    /// z, n, (W_hn h + b_hn); RNN none (its output is enough).
    pub fn saved_width(self) -> usize {
        match self {
            Cell::Rnn(_) => 0,
            Cell::Lstm => 5,
            Cell::Gru => 4,
        }
    }
}

/// One step's inputs: the input projection `x` and `g = h W_hh^T` (B, G*H each), `bias`
/// (b_hh, G*H), the previous state `hp`, `cp` (B, H; `cp` empty unless LSTM).
pub struct StepIn<'a, R> {
    /// This step's input projection `x_t W_ih^T + b_ih` (B, G*H), gates in PyTorch's order.
    pub x: &'a [R],
    /// The hidden projection `h_{t-1} W_hh^T` without its bias (B, G*H).
    pub g: &'a [R],
    /// `b_hh` (G*H), added to every row; kept apart from `g` because GRU's n gate scales it by
    /// r along with `g`.
    pub bias: &'a [R],
    /// The previous hidden state h_{t-1} (B, H); its length gives the batch size.
    pub hp: &'a [R],
    /// LSTM: the previous cell state c_{t-1} (B, H); empty otherwise.
    pub cp: &'a [R],
}

/// One step's outputs: the new state and the saved values (B, saved_width * H).
pub struct StepOut<'a, R> {
    /// The new hidden state h_t (B, H), overwritten.
    pub h: &'a mut [R],
    /// LSTM: the new cell state c_t (B, H), overwritten; empty otherwise.
    pub c: &'a mut [R],
    /// The values the backward needs (B, saved_width * H), in [`Cell::saved_width`]'s order;
    /// empty for RNN.
    pub saved: &'a mut [R],
}

/// The forward of one step for `batch` rows of `hidden` units.
pub fn forward_step<R: Real>(kind: Cell, hidden: usize, i: StepIn<R>, o: StepOut<R>) {
    with_best_simd(
        #[inline(always)]
        || forward_rows(kind, hidden, i, o),
    )
}

// The gate math runs as passes of a few streams each (`map2` .. `map4`), not as one loop over
// every gate: written as one loop, the LSTM step reads 13 streams and writes 7, LLVM would
// need a run-time overlap check per pair of them, gives up past its limit and runs the loop
// scalar (the LSTM forward step was seven times slower). The passes' slices arrive as
// function arguments, which LLVM knows cannot overlap, and each pass reads data the previous
// one left in L1.
#[inline(always)]
fn forward_rows<R: Real>(kind: Cell, h: usize, i: StepIn<R>, o: StepOut<R>) {
    let gh = kind.gates() * h;
    let sw = kind.saved_width() * h;
    let rows = i.hp.len() / h;
    for r in 0..rows {
        let x = &i.x[r * gh..(r + 1) * gh];
        let g = &i.g[r * gh..(r + 1) * gh];
        let hn = &mut o.h[r * h..(r + 1) * h];
        match kind {
            Cell::Rnn(act) => map3(hn, x, g, i.bias, |x, g, b| {
                let a = x + g + b;
                match act {
                    Activation::Tanh => a.th(),
                    Activation::Relu if a > R::ZERO => a,
                    Activation::Relu => R::ZERO,
                }
            }),
            Cell::Lstm => {
                let cp = &i.cp[r * h..(r + 1) * h];
                let cn = &mut o.c[r * h..(r + 1) * h];
                // saved: i, f, g, o (the gates in the input's order), then tanh(c').
                let (gates, tc) = o.saved[r * sw..(r + 1) * sw].split_at_mut(4 * h);
                for q in 0..4 {
                    let s = q * h..(q + 1) * h;
                    let (out, x, g, b) = (
                        &mut gates[s.clone()],
                        &x[s.clone()],
                        &g[s.clone()],
                        &i.bias[s],
                    );
                    if q == 2 {
                        map3(out, x, g, b, |x, g, b| (x + g + b).th());
                    } else {
                        map3(out, x, g, b, |x, g, b| (x + g + b).sigm());
                    }
                }
                let (ig, fg, gg, og) = quarters(gates, h);
                let tc = &mut tc[..h];
                map4(cn, fg, cp, ig, gg, |f, cp, i, g| f * cp + i * g);
                map1(tc, cn, |c| c.th());
                map2(hn, og, tc, |o, t| o * t);
            }
            Cell::Gru => {
                let (xr, xz, xn) = thirds(x, h);
                let (gr, gz, gn) = thirds(g, h);
                let (br, bz, bn) = thirds(i.bias, h);
                let hp = &i.hp[r * h..(r + 1) * h];
                let sv = &mut o.saved[r * sw..(r + 1) * sw];
                let (sr, rest) = sv.split_at_mut(h);
                let (sz, rest) = rest.split_at_mut(h);
                let (sn, shn) = rest.split_at_mut(h);
                map3(sr, xr, gr, br, |x, g, b| (x + g + b).sigm());
                map3(sz, xz, gz, bz, |x, g, b| (x + g + b).sigm());
                map2(shn, gn, bn, |g, b| g + b);
                map3(sn, xn, sr, shn, |x, r, hn| (x + r * hn).th());
                map3(hn, sn, sz, hp, |n, z, hp| n + z * (hp - n));
            }
        }
    }
}

/// One step's backward inputs: the gradient reaching h_t (from the output and from step
/// t + 1), for LSTM the gradient reaching c_t, and the forward's values.
pub struct GradIn<'a, R> {
    /// dL/dh_t, total (B, H).
    pub dh: &'a [R],
    /// LSTM: dL/dc_t from the output (B, H); empty otherwise.
    pub dc_out: &'a [R],
    /// The new state h_t (B, H); RNN reads it (its activation's derivative is a function of
    /// the output).
    pub h: &'a [R],
    /// The previous state h_{t-1} (B, H); GRU reads it.
    pub hp: &'a [R],
    /// LSTM: the previous cell state c_{t-1} (B, H); empty otherwise.
    pub cp: &'a [R],
    /// What this step's forward saved in [`StepOut::saved`] (B, saved_width * H).
    pub saved: &'a [R],
}

/// One step's backward outputs.
pub struct GradOut<'a, R> {
    /// d(pre-activation) on the input side (B, G*H).
    pub gx: &'a mut [R],
    /// GRU: d(pre-activation) on the hidden side (B, 3H); empty otherwise (it equals `gx`).
    pub gh: &'a mut [R],
    /// LSTM: in, dL/dc_t from step t + 1; out, dL/dc_{t-1}. GRU: out, the direct part of
    /// dL/dh_{t-1} (dh * z). Empty for RNN.
    pub carry: &'a mut [R],
}

/// The backward of one step for every row.
pub fn backward_step<R: Real>(kind: Cell, hidden: usize, i: GradIn<R>, o: GradOut<R>) {
    with_best_simd(
        #[inline(always)]
        || backward_rows(kind, hidden, i, o),
    )
}

#[inline(always)]
fn backward_rows<R: Real>(kind: Cell, h: usize, i: GradIn<R>, o: GradOut<R>) {
    let gh = kind.gates() * h;
    let sw = kind.saved_width() * h;
    let rows = i.dh.len() / h;
    let one = R::ONE;
    for r in 0..rows {
        let dh = &i.dh[r * h..(r + 1) * h];
        let gx = &mut o.gx[r * gh..(r + 1) * gh];
        match kind {
            Cell::Rnn(act) => {
                let y = &i.h[r * h..(r + 1) * h];
                map2(gx, dh, y, |dh, y| match act {
                    Activation::Tanh => dh * (one - y * y),
                    Activation::Relu if y > R::ZERO => dh,
                    Activation::Relu => R::ZERO,
                });
            }
            Cell::Lstm => {
                let sv = &i.saved[r * sw..(r + 1) * sw];
                let (si, sf, sg, so) = quarters(sv, h);
                let stc = &sv[4 * h..5 * h];
                let dco = &i.dc_out[r * h..(r + 1) * h];
                let cp = &i.cp[r * h..(r + 1) * h];
                // carry: dL/dc_t from step t + 1 in, the total dc_t while the gates read it,
                // dL/dc_{t-1} out.
                let carry = &mut o.carry[r * h..(r + 1) * h];
                let (gi, rest) = gx.split_at_mut(h);
                let (gf, rest) = rest.split_at_mut(h);
                let (gg, go) = rest.split_at_mut(h);
                update4(carry, dco, dh, so, stc, |c, d, dh, og, tc| {
                    d + c + dh * og * (one - tc * tc)
                });
                map3(gi, carry, sg, si, |dc, g, ig| dc * g * ig * (one - ig));
                map3(gf, carry, cp, sf, |dc, cp, fg| dc * cp * fg * (one - fg));
                map3(gg, carry, si, sg, |dc, ig, g| dc * ig * (one - g * g));
                map3(go, dh, stc, so, |dh, tc, og| dh * tc * og * (one - og));
                for (c, &fg) in carry.iter_mut().zip(sf) {
                    *c = *c * fg;
                }
            }
            Cell::Gru => {
                let sv = &i.saved[r * sw..(r + 1) * sw];
                let (sr, rest) = sv.split_at(h);
                let (sz, rest) = rest.split_at(h);
                let (sn, shn) = rest.split_at(h);
                let hp = &i.hp[r * h..(r + 1) * h];
                let carry = &mut o.carry[r * h..(r + 1) * h];
                let hg = &mut o.gh[r * gh..(r + 1) * gh];
                let (gr, rest) = gx.split_at_mut(h);
                let (gz, gn) = rest.split_at_mut(h);
                let (hr, rest) = hg.split_at_mut(h);
                let (hz, hn) = rest.split_at_mut(h);
                map2(carry, dh, sz, |dh, z| dh * z);
                map3(gn, dh, sz, sn, |dh, z, n| dh * (one - z) * (one - n * n));
                map4(gz, dh, hp, sn, sz, |dh, hp, n, z| {
                    dh * (hp - n) * z * (one - z)
                });
                map3(gr, gn, shn, sr, |dan, hnn, rg| dan * hnn * rg * (one - rg));
                hr.copy_from_slice(gr);
                hz.copy_from_slice(gz);
                map2(hn, gn, sr, |dan, rg| dan * rg);
            }
        }
    }
}

/// `out[j] = f(a[j])` over the shorter of the slices.
#[inline(always)]
fn map1<R: Real>(out: &mut [R], a: &[R], f: impl Fn(R) -> R) {
    for (o, &a) in out.iter_mut().zip(a) {
        *o = f(a);
    }
}

/// `out[j] = f(a[j], b[j])`.
#[inline(always)]
fn map2<R: Real>(out: &mut [R], a: &[R], b: &[R], f: impl Fn(R, R) -> R) {
    for (o, (&a, &b)) in out.iter_mut().zip(a.iter().zip(b)) {
        *o = f(a, b);
    }
}

/// `out[j] = f(a[j], b[j], c[j])`.
#[inline(always)]
fn map3<R: Real>(out: &mut [R], a: &[R], b: &[R], c: &[R], f: impl Fn(R, R, R) -> R) {
    for (o, ((&a, &b), &c)) in out.iter_mut().zip(a.iter().zip(b).zip(c)) {
        *o = f(a, b, c);
    }
}

/// `out[j] = f(a[j], b[j], c[j], d[j])`.
#[inline(always)]
fn map4<R: Real>(out: &mut [R], a: &[R], b: &[R], c: &[R], d: &[R], f: impl Fn(R, R, R, R) -> R) {
    for (o, (((&a, &b), &c), &d)) in out.iter_mut().zip(a.iter().zip(b).zip(c).zip(d)) {
        *o = f(a, b, c, d);
    }
}

/// `acc[j] = f(acc[j], a[j], b[j], c[j], d[j])`.
#[inline(always)]
fn update4<R: Real>(
    acc: &mut [R],
    a: &[R],
    b: &[R],
    c: &[R],
    d: &[R],
    f: impl Fn(R, R, R, R, R) -> R,
) {
    for (o, (((&a, &b), &c), &d)) in acc.iter_mut().zip(a.iter().zip(b).zip(c).zip(d)) {
        *o = f(*o, a, b, c, d);
    }
}

#[inline(always)]
fn quarters<R>(v: &[R], h: usize) -> (&[R], &[R], &[R], &[R]) {
    (&v[..h], &v[h..2 * h], &v[2 * h..3 * h], &v[3 * h..4 * h])
}

#[inline(always)]
fn thirds<R>(v: &[R], h: usize) -> (&[R], &[R], &[R]) {
    (&v[..h], &v[h..2 * h], &v[2 * h..3 * h])
}
