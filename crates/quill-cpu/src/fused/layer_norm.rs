//! The host loops of the fused layer norm over rows of a contiguous (rows, d) slice: the
//! forward (mean and 1/std per row in two passes over the row while it sits in L1, then the
//! scaled output) and the backward (`gx`, and `gw` / `gb` summed over rows). Rows go in fixed
//! blocks, each block's `gw` / `gb` partial summed in block order, so results do not depend on
//! the thread count. Sums use 8 lanes so that LLVM vectorises them without reassociating.

use super::{sum, sum3, sum_by, Float};
use crate::simd::with_best_simd;

/// Rows per block: the unit of parallel work and of the `gw` / `gb` partial sums.
const BLOCK: usize = 32;
/// Elements below which a call stays on the calling thread.
const PARALLEL: usize = 1 << 15;

/// Normalises each row of `x` (rows of `w.len()` values) into `y`, scaled by `w` and shifted
/// by `b`; writes each row's mean and 1/sqrt(var + eps) (biased variance).
pub fn forward<R: Float>(
    x: &[R],
    w: &[R],
    b: &[R],
    eps: f64,
    y: &mut [R],
    mean: &mut [R],
    rstd: &mut [R],
) {
    let d = w.len();
    if d == 0 || x.is_empty() {
        return;
    }
    let run = |(x, y, mean, rstd): (&[R], &mut [R], &mut [R], &mut [R])| {
        with_best_simd(
            #[inline(always)]
            || forward_rows(x, w, b, eps, y, mean, rstd),
        )
    };
    let parts = x
        .chunks(BLOCK * d)
        .zip(y.chunks_mut(BLOCK * d))
        .zip(mean.chunks_mut(BLOCK))
        .zip(rstd.chunks_mut(BLOCK))
        .map(|(((x, y), m), r)| (x, y, m, r));
    if x.len() >= PARALLEL {
        crate::par::for_each_item(parts, crate::par::threads(), run);
    } else {
        parts.for_each(run);
    }
}

#[inline(always)]
fn forward_rows<R: Float>(
    x: &[R],
    w: &[R],
    b: &[R],
    eps: f64,
    y: &mut [R],
    mean: &mut [R],
    rstd: &mut [R],
) {
    let d = w.len();
    let inv_d = R::of(1.0 / d as f64);
    for (((x, y), m), r) in x
        .chunks_exact(d)
        .zip(y.chunks_exact_mut(d))
        .zip(mean.iter_mut())
        .zip(rstd.iter_mut())
    {
        let mu = sum(x) * inv_d;
        let var = sum_by(x, x, |v, _| (v - mu) * (v - mu)) * inv_d;
        let rs = (var + R::of(eps)).rsqrt();
        for (((o, &v), &wj), &bj) in y.iter_mut().zip(x).zip(w).zip(b) {
            *o = (v - mu) * rs * wj + bj;
        }
        *m = mu;
        *r = rs;
    }
}

/// One block of the backward: ((((x, g), gx), (mean, rstd)), gw / gb partial).
type BackPart<'a, R> = (
    (((&'a [R], &'a [R]), &'a mut [R]), (&'a [R], &'a [R])),
    &'a mut [R],
);

/// The gradients at `x` given the output's gradient `g` and the forward's `mean` / `rstd`:
/// `gx` (same shape as `x`, written when given), and `(gw, gb)` summed over rows.
pub fn backward<R: Float>(
    x: &[R],
    g: &[R],
    w: &[R],
    mean: &[R],
    rstd: &[R],
    gx: &mut [R],
) -> (Vec<R>, Vec<R>) {
    let d = w.len();
    if d == 0 || x.is_empty() {
        return (vec![R::default(); d], vec![R::default(); d]);
    }
    let blocks = x.len().div_ceil(BLOCK * d);
    // Per block: gw partial then gb partial.
    let mut partial = vec![R::default(); blocks * 2 * d];
    let run = |part: BackPart<R>| {
        let ((((x, g), gx), (m, r)), p) = part;
        with_best_simd(
            #[inline(always)]
            || backward_rows(x, g, w, m, r, gx, p),
        )
    };
    let parts = x
        .chunks(BLOCK * d)
        .zip(g.chunks(BLOCK * d))
        .zip(gx.chunks_mut(BLOCK * d))
        .zip(mean.chunks(BLOCK).zip(rstd.chunks(BLOCK)))
        .zip(partial.chunks_mut(2 * d));
    if x.len() >= PARALLEL {
        crate::par::for_each_item(parts, crate::par::threads(), run);
    } else {
        parts.for_each(run);
    }
    let (mut gw, mut gb) = (vec![R::default(); d], vec![R::default(); d]);
    for p in partial.chunks_exact(2 * d) {
        let (pw, pb) = p.split_at(d);
        for (a, &v) in gw.iter_mut().zip(pw) {
            *a = *a + v;
        }
        for (a, &v) in gb.iter_mut().zip(pb) {
            *a = *a + v;
        }
    }
    (gw, gb)
}

#[inline(always)]
fn backward_rows<R: Float>(
    x: &[R],
    g: &[R],
    w: &[R],
    mean: &[R],
    rstd: &[R],
    gx: &mut [R],
    partial: &mut [R],
) {
    let d = w.len();
    let inv_d = R::of(1.0 / d as f64);
    let (pw, pb) = partial.split_at_mut(d);
    for ((((x, g), gx), &mu), &rs) in x
        .chunks_exact(d)
        .zip(g.chunks_exact(d))
        .zip(gx.chunks_exact_mut(d))
        .zip(mean)
        .zip(rstd)
    {
        // gx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat)), gy = g * w.
        let a = sum_by(g, w, |gv, wj| gv * wj) * inv_d;
        let c = sum3(x, g, w, |xv, gv, wj| gv * wj * ((xv - mu) * rs)) * inv_d;
        for (((aw, ab), &xv), &gv) in pw.iter_mut().zip(pb.iter_mut()).zip(x).zip(g) {
            *aw = *aw + gv * ((xv - mu) * rs);
            *ab = *ab + gv;
        }
        for (((o, &xv), &gv), &wj) in gx.iter_mut().zip(x).zip(g).zip(w) {
            let xhat = (xv - mu) * rs;
            *o = rs * (gv * wj - a - xhat * c);
        }
    }
}
