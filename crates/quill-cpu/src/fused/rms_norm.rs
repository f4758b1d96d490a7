//! The host loops of the fused RMS norm over rows of a contiguous (rows, d) slice: the
//! forward (1/rms per row in one pass over the row, then the scaled output) and the backward
//! (`gx`, and `gw` summed over rows). Blocked and summed as `layer_norm`'s loops, so results do
//! not depend on the thread count.

use super::{sum3, sum_by, Float};
use crate::simd::with_best_simd;

/// Rows per block: the unit of parallel work and of the `gw` partial sums.
const BLOCK: usize = 32;
/// Elements below which a call stays on the calling thread.
const PARALLEL: usize = 1 << 15;

/// Writes each row of `x` (rows of `w.len()` values) times `1/sqrt(mean(x^2) + eps)` times
/// `w` into `y`, and each row's `1/sqrt(mean(x^2) + eps)` into `rstd`.
pub fn forward<R: Float>(x: &[R], w: &[R], eps: f64, y: &mut [R], rstd: &mut [R]) {
    let d = w.len();
    if d == 0 || x.is_empty() {
        return;
    }
    let run = |(x, y, rstd): (&[R], &mut [R], &mut [R])| {
        with_best_simd(
            #[inline(always)]
            || forward_rows(x, w, eps, y, rstd),
        )
    };
    let parts = x
        .chunks(BLOCK * d)
        .zip(y.chunks_mut(BLOCK * d))
        .zip(rstd.chunks_mut(BLOCK))
        .map(|((x, y), r)| (x, y, r));
    if x.len() >= PARALLEL {
        crate::par::for_each_item(parts, crate::par::threads(), run);
    } else {
        parts.for_each(run);
    }
}

#[inline(always)]
fn forward_rows<R: Float>(x: &[R], w: &[R], eps: f64, y: &mut [R], rstd: &mut [R]) {
    let d = w.len();
    let inv_d = R::of(1.0 / d as f64);
    for ((x, y), r) in x
        .chunks_exact(d)
        .zip(y.chunks_exact_mut(d))
        .zip(rstd.iter_mut())
    {
        let rs = (sum_by(x, x, |a, b| a * b) * inv_d + R::of(eps)).rsqrt();
        for ((o, &v), &wj) in y.iter_mut().zip(x).zip(w) {
            *o = v * rs * wj;
        }
        *r = rs;
    }
}

/// One block of the backward: (((x, g), gx), rstd), gw partial.
type BackPart<'a, R> = ((((&'a [R], &'a [R]), &'a mut [R]), &'a [R]), &'a mut [R]);

/// The gradients given the output's gradient `g` and the forward's `rstd`: `gx` (same shape
/// as `x`) and `gw` summed over rows.
pub fn backward<R: Float>(x: &[R], g: &[R], w: &[R], rstd: &[R], gx: &mut [R]) -> Vec<R> {
    let d = w.len();
    if d == 0 || x.is_empty() {
        return vec![R::default(); d];
    }
    let blocks = x.len().div_ceil(BLOCK * d);
    let mut partial = vec![R::default(); blocks * d];
    let run = |part: BackPart<R>| {
        let ((((x, g), gx), r), p) = part;
        with_best_simd(
            #[inline(always)]
            || backward_rows(x, g, w, r, gx, p),
        )
    };
    let parts = x
        .chunks(BLOCK * d)
        .zip(g.chunks(BLOCK * d))
        .zip(gx.chunks_mut(BLOCK * d))
        .zip(rstd.chunks(BLOCK))
        .zip(partial.chunks_mut(d));
    if x.len() >= PARALLEL {
        crate::par::for_each_item(parts, crate::par::threads(), run);
    } else {
        parts.for_each(run);
    }
    let mut gw = vec![R::default(); d];
    for p in partial.chunks_exact(d) {
        for (a, &v) in gw.iter_mut().zip(p) {
            *a = *a + v;
        }
    }
    gw
}

#[inline(always)]
fn backward_rows<R: Float>(x: &[R], g: &[R], w: &[R], rstd: &[R], gx: &mut [R], pw: &mut [R]) {
    let d = w.len();
    let inv_d = R::of(1.0 / d as f64);
    for (((x, g), gx), &rs) in x
        .chunks_exact(d)
        .zip(g.chunks_exact(d))
        .zip(gx.chunks_exact_mut(d))
        .zip(rstd)
    {
        // gx = rstd * (gy - xhat * mean(gy * xhat)), gy = g * w, xhat = x * rstd.
        let c = sum3(x, g, w, |xv, gv, wj| gv * wj * (xv * rs)) * inv_d;
        for ((aw, &xv), &gv) in pw.iter_mut().zip(x).zip(g) {
            *aw = *aw + gv * (xv * rs);
        }
        for (((o, &xv), &gv), &wj) in gx.iter_mut().zip(x).zip(g).zip(w) {
            *o = rs * (gv * wj - xv * rs * c);
        }
    }
}
