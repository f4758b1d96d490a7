//! Batch normalisation with batch statistics on the CPU over a contiguous (n, c, inner)
//! buffer, two passes each way where the composite of broadcast ops took about seven:
//!
//! - forward: per-channel sums of `x - s` and `(x - s)^2` (`s` the channel's first value, a
//!   shift that keeps the one-pass variance free of cancellation), then
//!   `y = (x - mean) * scale + b` with `scale = w / sqrt(var + eps)`;
//! - backward: per-channel sums of `g` and `g * (x - mean)`, then
//!   `dx = k1 * g - k2 * (x - mean) - k1 * mean(g)` with `k1 = w * invstd` and
//!   `k2 = k1 * invstd^2 * mean(g * (x - mean))`.
//!
//! With `NormDims::relu` a ReLU rides along: the forward's second pass clamps `y`, and the
//! backward reads the output to gate `g` (zero where `y <= 0`) inside both of its passes, so
//! a CNN's BatchNorm + ReLU costs no pass of its own either way.
//!
//! Each (sample, channel) run of `inner` values is summed in the element type with 16 lanes
//! (vectorised), the runs added in f64. Threads share the samples in four parts each; the
//! parts' partial sums are added in part order, so results depend on the thread count
//! only, not on scheduling.

use crate::simd::with_best_simd;
use crate::storage::read;
use crate::{CpuElement, CpuStorage};
use quill_core::{DType, Error, NormDims, Result};
use std::ops::{Add, Mul, Sub};

/// Elements below which a call stays on one thread.
const GRAIN: usize = 1 << 15;

/// The float types the kernels compute in.
pub(crate) trait NormReal:
    CpuElement
    + Copy
    + Default
    + Send
    + Sync
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + PartialOrd
{
}
impl NormReal for f32 {}
impl NormReal for f64 {}

/// The `K` sums of `f(x, g, y)` over `xs` (and `gs`, `ys`, same length) in 16 lanes of `T`.
#[inline(always)]
fn sums<T: NormReal, const K: usize>(
    xs: &[T],
    gs: &[T],
    ys: &[T],
    f: impl Fn(T, T, T) -> [T; K],
) -> [f64; K] {
    const L: usize = 16;
    let mut acc = [[T::default(); L]; K];
    let (xc, gc, yc) = (xs.chunks_exact(L), gs.chunks_exact(L), ys.chunks_exact(L));
    let (xr, gr, yr) = (xc.remainder(), gc.remainder(), yc.remainder());
    for ((x, g), y) in xc.zip(gc).zip(yc) {
        for i in 0..L {
            let v = f(x[i], g[i], y[i]);
            for k in 0..K {
                acc[k][i] = acc[k][i] + v[k];
            }
        }
    }
    let mut t = [0.0; K];
    for ((&x, &g), &y) in xr.iter().zip(gr).zip(yr) {
        let v = f(x, g, y);
        for k in 0..K {
            t[k] += v[k].to_f64();
        }
    }
    for k in 0..K {
        for a in acc[k] {
            t[k] += a.to_f64();
        }
    }
    t
}

/// How many parts the samples split into: one below the grain, else four per thread, so
/// that a thread slowed by a busy sibling core hands parts over instead of holding the
/// others up (a fixed count for a fixed thread count keeps the sums deterministic).
fn parts(d: &NormDims) -> usize {
    let t = crate::par::threads();
    if t < 2 || d.n * d.c * d.inner < GRAIN {
        1
    } else {
        (4 * t).min(d.n).max(1)
    }
}

/// Per-channel constants handed to the element functions: loaded once per run, so that
/// the run's loop sees plain values and vectorises.
type Consts<T> = [T; 4];

/// The three (n, c, inner) operands an element function reads: the input, the gradient and
/// the forward's output (the last two stand in for each other where a pass needs fewer).
type Runs<'a, T> = [&'a [T]; 3];

/// Per-channel sums of `f(p[ch], x, g, y)` over all samples.
fn channel_sums<T: NormReal, const K: usize>(
    d: &NormDims,
    [x, g, y]: Runs<'_, T>,
    p: &[Consts<T>],
    f: impl Fn(Consts<T>, T, T, T) -> [T; K] + Sync + Copy,
) -> Vec<[f64; K]> {
    let row = d.c * d.inner;
    let np = parts(d);
    let per = d.n.div_ceil(np).max(1);
    let part = |k: usize| {
        let mut acc = vec![[0.0; K]; d.c];
        let rows = k * per..((k + 1) * per).min(d.n);
        with_best_simd(
            #[inline(always)]
            || {
                for r in rows {
                    if d.inner == 1 {
                        // (N, C): a row holds one value per channel.
                        let at = r * row;
                        let (xs, gs, ys) = (&x[at..][..row], &g[at..][..row], &y[at..][..row]);
                        for (ch, s) in acc.iter_mut().enumerate() {
                            let v = f(p[ch], xs[ch], gs[ch], ys[ch]);
                            for i in 0..K {
                                s[i] += v[i].to_f64();
                            }
                        }
                        continue;
                    }
                    for (ch, s) in acc.iter_mut().enumerate() {
                        let at = r * row + ch * d.inner;
                        let run = at..at + d.inner;
                        let (xs, gs, ys) = (&x[run.clone()], &g[run.clone()], &y[run]);
                        let pc = p[ch];
                        let v = sums(xs, gs, ys, |x, g, y| f(pc, x, g, y));
                        for i in 0..K {
                            s[i] += v[i];
                        }
                    }
                }
            },
        );
        acc
    };
    let partials: Vec<Vec<[f64; K]>> = if np == 1 {
        vec![part(0)]
    } else {
        crate::par::map(np, crate::par::threads(), part)
    };
    let mut total = vec![[0.0; K]; d.c];
    for pv in partials {
        for (t, v) in total.iter_mut().zip(pv) {
            for i in 0..K {
                t[i] += v[i];
            }
        }
    }
    total
}

/// `out[r, ch, :] = f(p[ch], x[r, ch, :], g[r, ch, :], y[r, ch, :])` over every run.
fn map_runs<T: NormReal>(
    d: &NormDims,
    [x, g, y]: Runs<'_, T>,
    out: &mut [T],
    p: &[Consts<T>],
    f: impl Fn(Consts<T>, T, T, T) -> T + Sync + Copy,
) {
    let row = d.c * d.inner;
    if row == 0 {
        return;
    }
    let body = |r0: usize, o: &mut [T]| {
        with_best_simd(
            #[inline(always)]
            || {
                for (k, orow) in o.chunks_exact_mut(row).enumerate() {
                    let at = (r0 + k) * row;
                    let (xr, gr, yr) = (&x[at..at + row], &g[at..at + row], &y[at..at + row]);
                    if d.inner == 1 {
                        for (ch, (((o, &xv), &gv), &yv)) in
                            orow.iter_mut().zip(xr).zip(gr).zip(yr).enumerate()
                        {
                            *o = f(p[ch], xv, gv, yv);
                        }
                        continue;
                    }
                    for (ch, (((run, xs), gs), ys)) in orow
                        .chunks_exact_mut(d.inner)
                        .zip(xr.chunks_exact(d.inner))
                        .zip(gr.chunks_exact(d.inner))
                        .zip(yr.chunks_exact(d.inner))
                        .enumerate()
                    {
                        let pc = p[ch];
                        for (((o, &xv), &gv), &yv) in run.iter_mut().zip(xs).zip(gs).zip(ys) {
                            *o = f(pc, xv, gv, yv);
                        }
                    }
                }
            },
        )
    };
    let np = parts(d);
    if np == 1 {
        body(0, out);
    } else {
        let per = d.n.div_ceil(np).max(1);
        let threads = crate::par::threads();
        crate::par::for_each_chunk(out, per * row, threads, |k, o| body(k * per, o));
    }
}

/// The forward: `(y, mean, var)`.
pub fn forward(
    x: (&CpuStorage, usize),
    w: (&CpuStorage, usize),
    b: (&CpuStorage, usize),
    dims: &NormDims,
) -> Result<(CpuStorage, CpuStorage, CpuStorage)> {
    match x.0.dtype() {
        DType::F32 => forward_t::<f32>(x, w, b, dims),
        DType::F64 => forward_t::<f64>(x, w, b, dims),
        d => Err(quill_core::backend::unsupported("batch_norm", "cpu", d)),
    }
}

fn forward_t<T: NormReal>(
    x: (&CpuStorage, usize),
    w: (&CpuStorage, usize),
    b: (&CpuStorage, usize),
    d: &NormDims,
) -> Result<(CpuStorage, CpuStorage, CpuStorage)> {
    const OP: &str = "batch_norm";
    let len = d.n * d.c * d.inner;
    let xs = read::<T>(OP, x.0, x.1, len)?;
    let ws = read::<T>(OP, w.0, w.1, d.c)?;
    let bs = read::<T>(OP, b.0, b.1, d.c)?;
    let count = (d.n * d.inner) as f64;
    if count == 0.0 {
        return Err(Error::invalid(
            OP,
            format!(
                "needs at least one value per channel, got (n, c, inner) = ({}, {}, {})",
                d.n, d.c, d.inner
            ),
        ));
    }
    let shift: Vec<T> = (0..d.c).map(|ch| xs[ch * d.inner]).collect();
    let z = T::default();
    let p: Vec<Consts<T>> = shift.iter().map(|&s| [s, z, z, z]).collect();
    let sums = channel_sums(d, [xs; 3], &p, |[s, ..], v, _, _| {
        let u = v - s;
        [u, u * u]
    });
    let mut mean = Vec::with_capacity(d.c);
    let mut var = Vec::with_capacity(d.c);
    let mut scale = Vec::with_capacity(d.c);
    for (ch, &[s1, s2]) in sums.iter().enumerate() {
        let m1 = s1 / count;
        let v = (s2 / count - m1 * m1).max(0.0);
        let m = shift[ch].to_f64() + m1;
        let k = ws[ch].to_f64() / (v + d.eps).sqrt();
        mean.push(T::from_f64(m));
        var.push(T::from_f64(v));
        scale.push(T::from_f64(k));
    }
    let mut ys = CpuStorage::for_overwrite(OP, T::DTYPE, len)?;
    let out = T::slice_mut(&mut ys).expect("allocated as T");
    // Centred first: `x * scale + (b - mean * scale)` cancels when |mean| >> std.
    // As `(x - s) - (mean - s)`: the stored mean is rounded to T, `mean - s` much less so.
    let p: Vec<Consts<T>> = (0..d.c)
        .map(|ch| {
            [
                shift[ch],
                T::from_f64(sums[ch][0] / count),
                scale[ch],
                bs[ch],
            ]
        })
        .collect();
    let affine = |[s, m1, k, b]: Consts<T>, v: T| ((v - s) - m1) * k + b;
    if d.relu {
        // `UnaryOp::Relu`'s rule: a NaN passes through.
        map_runs(d, [xs; 3], out, &p, |c, v, _, _| {
            let a = affine(c, v);
            if a < T::default() {
                T::default()
            } else {
                a
            }
        });
    } else {
        map_runs(d, [xs; 3], out, &p, |c, v, _, _| affine(c, v));
    }
    Ok((ys, T::wrap(mean), T::wrap(var)))
}

/// The backward: `(dx, dweight, dbias)`.
pub fn backward(
    x: (&CpuStorage, usize),
    gy: (&CpuStorage, usize),
    w: (&CpuStorage, usize),
    var: (&CpuStorage, usize),
    y: (&CpuStorage, usize),
    dims: &NormDims,
) -> Result<(CpuStorage, CpuStorage, CpuStorage)> {
    match x.0.dtype() {
        DType::F32 => backward_t::<f32>(x, gy, w, var, y, dims),
        DType::F64 => backward_t::<f64>(x, gy, w, var, y, dims),
        d => Err(quill_core::backend::unsupported(
            "batch_norm_backward",
            "cpu",
            d,
        )),
    }
}

fn backward_t<T: NormReal>(
    x: (&CpuStorage, usize),
    gy: (&CpuStorage, usize),
    w: (&CpuStorage, usize),
    var: (&CpuStorage, usize),
    y: (&CpuStorage, usize),
    d: &NormDims,
) -> Result<(CpuStorage, CpuStorage, CpuStorage)> {
    if d.relu {
        backward_gated::<T, true>(x, gy, w, var, y, d)
    } else {
        backward_gated::<T, false>(x, gy, w, var, y, d)
    }
}

/// `backward_t` with the gradient gated by the output (`RELU`) or not.
fn backward_gated<T: NormReal, const RELU: bool>(
    x: (&CpuStorage, usize),
    gy: (&CpuStorage, usize),
    w: (&CpuStorage, usize),
    var: (&CpuStorage, usize),
    y: (&CpuStorage, usize),
    d: &NormDims,
) -> Result<(CpuStorage, CpuStorage, CpuStorage)> {
    const OP: &str = "batch_norm_backward";
    let len = d.n * d.c * d.inner;
    let xs = read::<T>(OP, x.0, x.1, len)?;
    let gs = read::<T>(OP, gy.0, gy.1, len)?;
    // Unread (and not required to be as long) without the ReLU.
    let ys = if RELU {
        read::<T>(OP, y.0, y.1, len)?
    } else {
        gs
    };
    // ReLU's gradient: through where its output is positive (not at 0, nor a NaN).
    let gate = |g: T, y: T| {
        if !RELU || y > T::default() {
            g
        } else {
            T::default()
        }
    };
    let ws = read::<T>(OP, w.0, w.1, d.c)?;
    let vs = read::<T>(OP, var.0, var.1, d.c)?;
    let count = ((d.n * d.inner) as f64).max(1.0);
    // Centred on the channel's first value `s` (exact) rather than on the stored mean (rounded
    // to T: for |mean| >> std its rounding error times sum(g) would swamp sum(g * xc)):
    // sum(g (x - mean)) = sum(g (x - s)) - (mean - s) sum(g), with mean - s = sum(x - s) / n.
    let shift: Vec<T> = (0..d.c).map(|ch| xs[ch * d.inner]).collect();
    let z = T::default();
    let p: Vec<Consts<T>> = shift.iter().map(|&s| [s, z, z, z]).collect();
    let sums = channel_sums(d, [xs, gs, ys], &p, |[s, ..], v, g, y| {
        let (u, g) = (v - s, gate(g, y));
        [g, g * u, u]
    });
    let (mut gw, mut gb) = (Vec::with_capacity(d.c), Vec::with_capacity(d.c));
    let mut p = Vec::with_capacity(d.c);
    for (ch, &[sg, sgu, su]) in sums.iter().enumerate() {
        let sgx = sgu - su / count * sg;
        let invstd = 1.0 / (vs[ch].to_f64() + d.eps).sqrt();
        let a = ws[ch].to_f64() * invstd;
        gw.push(T::from_f64(sgx * invstd));
        gb.push(T::from_f64(sg));
        // dx = k1 g - k2 ((x - s) - m1) + k0, with m1 = mean - s.
        let k2 = a * invstd * invstd * sgx / count;
        let (k0, m1) = (-a * sg / count, su / count);
        // Folded: dx = k1 g - k2 (x - s) + (k0 + k2 m1).
        p.push([
            shift[ch],
            T::from_f64(a),
            T::from_f64(k2),
            T::from_f64(k0 + k2 * m1),
        ]);
    }
    let mut dx = CpuStorage::for_overwrite(OP, T::DTYPE, len)?;
    let out = T::slice_mut(&mut dx).expect("allocated as T");
    map_runs(d, [xs, gs, ys], out, &p, |[s, k1, k2, k0], v, g, y| {
        k1 * gate(g, y) - k2 * (v - s) + k0
    });
    Ok((dx, T::wrap(gw), T::wrap(gb)))
}
