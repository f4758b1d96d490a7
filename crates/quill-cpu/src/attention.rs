//! Fused scaled-dot-product attention on the CPU, flash-attention style: for each block of
//! query rows the keys are visited tile by tile with an online softmax, so no (Lq, Lk) score
//! matrix ever exists; the forward keeps only the output and each row's logsumexp. The
//! backward recomputes the scores tile by tile from that logsumexp (FlashAttention-2's
//! recurrence, `dS = P * (dP - rowsum(dO * O))`). Every tile product goes through the
//! single-threaded GEMM of `matmul`; threads split the (batch * head) problems and, in the
//! forward, the query blocks of each.
//!
//! Causal masking is PyTorch's top-left convention: query `i` sees keys `j <= i`, also when
//! `lq != lk`.

use crate::simd::with_best_simd;
use crate::CpuStorage;
use quill_core::{AttnDims, DType, Error, Result};
use quill_gemm::{select, Cvt, Gemm, Mat, Real};
use std::ops::{Div, Sub};

/// Query rows per block.
const BQ: usize = 128;
/// Keys per tile.
const BK: usize = 256;
/// Multiply-adds below which a call stays on one thread.
const GRAIN: usize = 1 << 16;

/// The float types the kernel computes in.
pub(crate) trait AttnReal:
    Real + Cvt<Self> + PartialOrd + Sub<Output = Self> + Div<Output = Self>
{
    const NEG_INF: Self;
    const ZERO: Self;
    const ONE: Self;
    fn of(x: f64) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn gemm() -> Gemm<Self>;
}

impl AttnReal for f32 {
    const NEG_INF: f32 = f32::NEG_INFINITY;
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    fn of(x: f64) -> f32 {
        x as f32
    }
    #[inline(always)]
    fn exp(self) -> f32 {
        // The branch-free polynomial vectorises inside `with_best_simd`; libm's would not.
        crate::elementwise::math::exp(self)
    }
    fn ln(self) -> f32 {
        f32::ln(self)
    }
    fn gemm() -> Gemm<f32> {
        select::<f32>()
    }
}

impl AttnReal for f64 {
    const NEG_INF: f64 = f64::NEG_INFINITY;
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    fn of(x: f64) -> f64 {
        x
    }
    #[inline(always)]
    fn exp(self) -> f64 {
        f64::exp(self)
    }
    fn ln(self) -> f64 {
        f64::ln(self)
    }
    fn gemm() -> Gemm<f64> {
        select::<f64>()
    }
}

/// How many keys of the tile starting at `j0` (of width `nk`) query row `i` sees.
#[inline(always)]
fn visible(dims: &AttnDims, i: usize, j0: usize, nk: usize) -> usize {
    if dims.causal {
        (i + 1).saturating_sub(j0).min(nk)
    } else {
        nk
    }
}

/// The key tiles query rows `i0..i1` see: under the causal mask, none past column `i1 - 1`.
fn key_end(dims: &AttnDims, i1: usize) -> usize {
    if dims.causal {
        i1.min(dims.lk)
    } else {
        dims.lk
    }
}

fn slice<T: crate::CpuElement>(s: &CpuStorage, off: usize, len: usize) -> Result<&[T]> {
    let v = T::slice(s).ok_or(Error::DTypeMismatch {
        op: "scaled_dot_product_attention",
        expected: T::DTYPE,
        got: s.dtype(),
    })?;
    v.get(off..off + len).ok_or_else(|| {
        Error::invalid(
            "scaled_dot_product_attention",
            format!(
                "internal: a buffer of {} elements read at {off}..{}",
                v.len(),
                off + len
            ),
        )
    })
}

fn check_dtype(s: &CpuStorage) -> Result<DType> {
    match s.dtype() {
        d @ (DType::F32 | DType::F64) => Ok(d),
        d => Err(quill_core::backend::unsupported(
            "scaled_dot_product_attention",
            "cpu",
            d,
        )),
    }
}

fn parallel(dims: &AttnDims) -> bool {
    let work = dims.batch * dims.lq * dims.lk * (dims.d + dims.dv);
    work >= GRAIN && crate::par::threads() > 1
}

/// The forward: `(out, lse)` for contiguous `q`, `k`, `v` read from the given offsets.
pub fn forward(
    q: (&CpuStorage, usize),
    k: (&CpuStorage, usize),
    v: (&CpuStorage, usize),
    dims: &AttnDims,
) -> Result<(CpuStorage, CpuStorage)> {
    match check_dtype(q.0)? {
        DType::F32 => forward_t::<f32>(q, k, v, dims),
        _ => forward_t::<f64>(q, k, v, dims),
    }
}

fn forward_t<T: AttnReal + crate::CpuElement>(
    q: (&CpuStorage, usize),
    k: (&CpuStorage, usize),
    v: (&CpuStorage, usize),
    dims: &AttnDims,
) -> Result<(CpuStorage, CpuStorage)> {
    let AttnDims {
        batch,
        lq,
        lk,
        d,
        dv,
        ..
    } = *dims;
    let qs = slice::<T>(q.0, q.1, batch * lq * d)?;
    let ks = slice::<T>(k.0, k.1, batch * lk * d)?;
    let vs = slice::<T>(v.0, v.1, batch * lk * dv)?;
    // Pooled: a fresh buffer this size costs a page fault per 4 KiB on every call.
    let mut out = crate::pool::take_zeroed::<T>("attention", batch * lq * dv)?;
    let mut lse = vec![T::NEG_INF; batch * lq];
    if batch * lq > 0 {
        let g = T::gemm();
        let blocks_per_head = lq.div_ceil(BQ);
        let outs = split(&mut out, batch * blocks_per_head, |t| {
            rows(t % blocks_per_head, lq) * dv
        });
        let lses = split(&mut lse, batch * blocks_per_head, |t| {
            rows(t % blocks_per_head, lq)
        });
        let block = |(t, (o, l)): (usize, (&mut [T], &mut [T]))| {
            let (b, blk) = (t / blocks_per_head, t % blocks_per_head);
            let head = Head {
                q: &qs[b * lq * d..(b + 1) * lq * d],
                k: &ks[b * lk * d..(b + 1) * lk * d],
                v: &vs[b * lk * dv..(b + 1) * lk * dv],
            };
            forward_block(&g, dims, &head, blk * BQ, o, l);
        };
        let tasks = outs.into_iter().zip(lses).enumerate();
        if parallel(dims) {
            crate::par::for_each_item(tasks, crate::par::threads(), block);
        } else {
            tasks.for_each(block);
        }
    }
    Ok((T::wrap(out), T::wrap(lse)))
}

/// Rows in query block `blk` of a head of `lq` rows.
fn rows(blk: usize, lq: usize) -> usize {
    BQ.min(lq - blk * BQ)
}

/// `buf` cut into `n` consecutive parts, part `t` of length `len(t)` (zero lengths allowed).
fn split<T>(mut buf: &mut [T], n: usize, len: impl Fn(usize) -> usize) -> Vec<&mut [T]> {
    (0..n)
        .map(|t| {
            let (a, b) = std::mem::take(&mut buf).split_at_mut(len(t));
            buf = b;
            a
        })
        .collect()
}

/// One (batch * head) problem's inputs.
struct Head<'a, T> {
    q: &'a [T],
    k: &'a [T],
    v: &'a [T],
}

/// Rows `i0..` of one head (as many as `lse` holds): the online softmax over key tiles.
fn forward_block<T: AttnReal>(
    g: &Gemm<T>,
    dims: &AttnDims,
    h: &Head<T>,
    i0: usize,
    out: &mut [T],
    lse: &mut [T],
) {
    let (d, dv) = (dims.d, dims.dv);
    let nq = lse.len();
    let scale = T::of(dims.scale);
    let mut s = vec![T::ZERO; nq * BK];
    let mut pv = vec![T::ZERO; nq * dv];
    let mut m = vec![T::NEG_INF; nq];
    let mut l = vec![T::ZERO; nq];
    let mut alpha = vec![T::ONE; nq];
    let qm = Mat::new(h.q, i0 * d, d as isize, 1);
    for j0 in (0..key_end(dims, i0 + nq)).step_by(BK) {
        let nk = BK.min(dims.lk - j0);
        let st = &mut s[..nq * nk];
        // S = Q_blk K_tile^T: K's rows read as columns (row stride 1, column stride d).
        let kt = Mat::new(h.k, j0 * d, 1, d as isize);
        g.run([nq, nk, d], &qm, &kt, st, 1);
        with_best_simd(
            #[inline(always)]
            || {
                for (r, row) in st.chunks_exact_mut(nk).enumerate() {
                    let n = visible(dims, i0 + r, j0, nk);
                    online_row(row, n, scale, &mut m[r], &mut l[r], &mut alpha[r]);
                }
            },
        );
        // acc = acc * alpha + P V_tile.
        let vm = Mat::new(h.v, j0 * dv, dv as isize, 1);
        g.run(
            [nq, dv, nk],
            &Mat::new(st, 0, nk as isize, 1),
            &vm,
            &mut pv,
            1,
        );
        with_best_simd(
            #[inline(always)]
            || {
                for ((o, p), &a) in out
                    .chunks_exact_mut(dv)
                    .zip(pv.chunks_exact(dv))
                    .zip(&alpha)
                {
                    for (o, &p) in o.iter_mut().zip(p) {
                        *o = *o * a + p;
                    }
                }
            },
        );
    }
    for r in 0..nq {
        let o = &mut out[r * dv..(r + 1) * dv];
        if l[r] > T::ZERO {
            let inv = T::ONE / l[r];
            o.iter_mut().for_each(|x| *x = *x * inv);
            lse[r] = m[r] + l[r].ln();
        } else {
            // No visible key (lk = 0): an empty softmax gives a zero output.
            o.iter_mut().for_each(|x| *x = T::ZERO);
            lse[r] = T::NEG_INF;
        }
    }
}

/// One row of one tile: scales the first `n` scores, turns them into `exp(s - m_new)` (the
/// rest, masked, into 0), and updates the row's running max `m`, sum `l` and the factor
/// `alpha` by which its accumulated output must shrink.
#[inline(always)]
fn online_row<T: AttnReal>(row: &mut [T], n: usize, scale: T, m: &mut T, l: &mut T, alpha: &mut T) {
    let (vis, masked) = row.split_at_mut(n);
    masked.iter_mut().for_each(|x| *x = T::ZERO);
    // The max and the sum run in 8 lanes so that these loops, and above all the exp between
    // them, vectorise: a serial float reduction in the exp loop kept it scalar. The max is
    // the same in any order.
    let mut lanes = [*m; 8];
    let mut chunks = vis.chunks_exact_mut(8);
    for c in &mut chunks {
        for (x, mx) in c.iter_mut().zip(&mut lanes) {
            *x = *x * scale;
            if *x > *mx {
                *mx = *x;
            }
        }
    }
    let mut mt = *m;
    for x in chunks.into_remainder() {
        *x = *x * scale;
        if *x > mt {
            mt = *x;
        }
    }
    for v in lanes {
        if v > mt {
            mt = v;
        }
    }
    if mt == T::NEG_INF {
        // Nothing finite seen yet (no visible key, or -inf scores): keep the state.
        vis.iter_mut().for_each(|x| *x = T::ZERO);
        *alpha = T::ONE;
        return;
    }
    for x in vis.iter_mut() {
        *x = (*x - mt).exp();
    }
    let mut acc = [T::ZERO; 8];
    let chunks = vis.chunks_exact(8);
    let mut sum = chunks.remainder().iter().fold(T::ZERO, |s, &x| s + x);
    for c in chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a = *a + x;
        }
    }
    sum = sum + ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    let a = (*m - mt).exp();
    *alpha = a;
    *l = *l * a + sum;
    *m = mt;
}

/// The backward: `(dq, dk, dv)` for contiguous inputs read from the given offsets.
pub fn backward(
    q: (&CpuStorage, usize),
    k: (&CpuStorage, usize),
    v: (&CpuStorage, usize),
    o: (&CpuStorage, usize),
    go: (&CpuStorage, usize),
    lse: (&CpuStorage, usize),
    dims: &AttnDims,
) -> Result<(CpuStorage, CpuStorage, CpuStorage)> {
    match check_dtype(q.0)? {
        DType::F32 => backward_t::<f32>(q, k, v, o, go, lse, dims),
        _ => backward_t::<f64>(q, k, v, o, go, lse, dims),
    }
}

/// One head's forward results and incoming gradient.
struct Saved<'a, T> {
    o: &'a [T],
    go: &'a [T],
    lse: &'a [T],
}

/// One head's gradients, accumulated in place.
struct Grads<'a, T> {
    dq: &'a mut [T],
    dk: &'a mut [T],
    dv: &'a mut [T],
}

/// A head's index and its (dq, dk), dv slices.
type HeadGrads<'a, T> = (usize, ((&'a mut [T], &'a mut [T]), &'a mut [T]));

#[allow(clippy::too_many_arguments)]
fn backward_t<T: AttnReal + crate::CpuElement>(
    q: (&CpuStorage, usize),
    k: (&CpuStorage, usize),
    v: (&CpuStorage, usize),
    o: (&CpuStorage, usize),
    go: (&CpuStorage, usize),
    lse: (&CpuStorage, usize),
    dims: &AttnDims,
) -> Result<(CpuStorage, CpuStorage, CpuStorage)> {
    let AttnDims {
        batch,
        lq,
        lk,
        d,
        dv,
        ..
    } = *dims;
    let qs = slice::<T>(q.0, q.1, batch * lq * d)?;
    let ks = slice::<T>(k.0, k.1, batch * lk * d)?;
    let vs = slice::<T>(v.0, v.1, batch * lk * dv)?;
    let os = slice::<T>(o.0, o.1, batch * lq * dv)?;
    let gos = slice::<T>(go.0, go.1, batch * lq * dv)?;
    let ls = slice::<T>(lse.0, lse.1, batch * lq)?;
    let mut dq = crate::pool::take_zeroed::<T>("attention_backward", batch * lq * d)?;
    let mut dk = crate::pool::take_zeroed::<T>("attention_backward", batch * lk * d)?;
    let mut dvv = crate::pool::take_zeroed::<T>("attention_backward", batch * lk * dv)?;
    let g = T::gemm();
    let one = |(b, ((dq, dk), dvh)): HeadGrads<T>| {
        let head = Head {
            q: &qs[b * lq * d..(b + 1) * lq * d],
            k: &ks[b * lk * d..(b + 1) * lk * d],
            v: &vs[b * lk * dv..(b + 1) * lk * dv],
        };
        let saved = Saved {
            o: &os[b * lq * dv..(b + 1) * lq * dv],
            go: &gos[b * lq * dv..(b + 1) * lq * dv],
            lse: &ls[b * lq..(b + 1) * lq],
        };
        let mut grads = Grads { dq, dk, dv: dvh };
        backward_head(&g, dims, &head, &saved, &mut grads);
    };
    let parts = split(&mut dq, batch, |_| lq * d)
        .into_iter()
        .zip(split(&mut dk, batch, |_| lk * d))
        .zip(split(&mut dvv, batch, |_| lk * dv))
        .enumerate();
    if lq * lk > 0 {
        if parallel(dims) {
            crate::par::for_each_item(parts, crate::par::threads(), one);
        } else {
            parts.for_each(one);
        }
    }
    Ok((T::wrap(dq), T::wrap(dk), T::wrap(dvv)))
}

/// One head: for each query block and key tile, recompute `P`, then
/// `dV += P^T dO`, `dP = dO V^T`, `dS = P * (dP - D)`, `dQ += scale dS K`, `dK += scale dS^T Q`.
fn backward_head<T: AttnReal>(
    g: &Gemm<T>,
    dims: &AttnDims,
    h: &Head<T>,
    sv: &Saved<T>,
    gr: &mut Grads<T>,
) {
    let (lq, lk, d, dv) = (dims.lq, dims.lk, dims.d, dims.dv);
    let scale = T::of(dims.scale);
    // D_i = rowsum(dO_i * O_i).
    let drow: Vec<T> = (0..lq)
        .map(|i| {
            let (a, b) = (&sv.o[i * dv..(i + 1) * dv], &sv.go[i * dv..(i + 1) * dv]);
            a.iter().zip(b).fold(T::ZERO, |acc, (&x, &y)| acc + x * y)
        })
        .collect();
    let tile = BQ.min(lq) * BK.min(lk);
    let mut p = vec![T::ZERO; tile];
    let mut ds = vec![T::ZERO; tile];
    let mut tmp = vec![T::ZERO; BK.max(BQ) * d.max(dv)];
    for i0 in (0..lq).step_by(BQ) {
        let nq = BQ.min(lq - i0);
        let qm = Mat::new(h.q, i0 * d, d as isize, 1);
        let gom = Mat::new(sv.go, i0 * dv, dv as isize, 1);
        for j0 in (0..key_end(dims, i0 + nq)).step_by(BK) {
            let nk = BK.min(lk - j0);
            let (pt, dst) = (&mut p[..nq * nk], &mut ds[..nq * nk]);
            g.run(
                [nq, nk, d],
                &qm,
                &Mat::new(h.k, j0 * d, 1, d as isize),
                pt,
                1,
            );
            g.run(
                [nq, nk, dv],
                &gom,
                &Mat::new(h.v, j0 * dv, 1, dv as isize),
                dst,
                1,
            );
            with_best_simd(
                #[inline(always)]
                || {
                    for (r, (pr, sr)) in pt
                        .chunks_exact_mut(nk)
                        .zip(dst.chunks_exact_mut(nk))
                        .enumerate()
                    {
                        let i = i0 + r;
                        let n = visible(dims, i, j0, nk);
                        let (li, di) = (sv.lse[i], drow[i]);
                        for (x, y) in pr[..n].iter_mut().zip(&mut sr[..n]) {
                            *x = (*x * scale - li).exp();
                            *y = *x * (*y - di) * scale;
                        }
                        pr[n..].iter_mut().for_each(|x| *x = T::ZERO);
                        sr[n..].iter_mut().for_each(|x| *x = T::ZERO);
                    }
                },
            );
            let (pt, dst) = (&p[..nq * nk], &ds[..nq * nk]);
            // dV_tile += P^T dO_blk.
            let t = &mut tmp[..nk * dv];
            g.run([nk, dv, nq], &Mat::new(pt, 0, 1, nk as isize), &gom, t, 1);
            add_into(&mut gr.dv[j0 * dv..(j0 + nk) * dv], t);
            // dQ_blk += dS K_tile (scale folded into dS).
            let t = &mut tmp[..nq * d];
            g.run(
                [nq, d, nk],
                &Mat::new(dst, 0, nk as isize, 1),
                &Mat::new(h.k, j0 * d, d as isize, 1),
                t,
                1,
            );
            add_into(&mut gr.dq[i0 * d..(i0 + nq) * d], t);
            // dK_tile += dS^T Q_blk.
            let t = &mut tmp[..nk * d];
            g.run([nk, d, nq], &Mat::new(dst, 0, 1, nk as isize), &qm, t, 1);
            add_into(&mut gr.dk[j0 * d..(j0 + nk) * d], t);
        }
    }
}

fn add_into<T: AttnReal>(dst: &mut [T], src: &[T]) {
    with_best_simd(
        #[inline(always)]
        || {
            for (a, &b) in dst.iter_mut().zip(src) {
                *a = *a + b;
            }
        },
    )
}
