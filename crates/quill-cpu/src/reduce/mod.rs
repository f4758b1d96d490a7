//! Reductions over any set of axes of a strided input: sum, prod, max, min, argmax, argmin,
//! any, all (`reduce`), and mean, var / std and logsumexp, which run two passes over the same
//! plan. Inputs may have any strides (permuted, stepped, reversed, broadcast, offset); nothing
//! is compacted. Outputs are fresh contiguous buffers over the kept dims in their original order
//! (the caller adds keepdims' size-1 dims; they do not change a contiguous buffer).
//!
//! Callers validate: `axes` are distinct and in range, and ops without an identity (max, min,
//! arg*) are not asked for an empty reduction (this module would return the identity / -1).

mod complex;
mod elem;
mod exec;
mod fast;
mod kernels;
mod plan;
mod simd;

use crate::{pool, with_storage, CpuElement, CpuStorage};
use elem::{Flt, Num, RElem};
use exec::Kernel;
use kernels::{max_nan, min_nan, ArgK, FoldK};
use plan::ReducePlan;
use quill_core::shape::contiguous_strides;
use quill_core::{Layout, ReduceOp, Result};
use std::marker::PhantomData;

/// `op` over `axes` of `src` seen through `l`; the result dtype is `op.result_dtype(..)`.
pub fn reduce(op: ReduceOp, src: &CpuStorage, l: &Layout, axes: &[usize]) -> Result<CpuStorage> {
    match src {
        CpuStorage::C64(s) => complex::reduce(op, s, l, axes),
        CpuStorage::C128(s) => complex::reduce(op, s, l, axes),
        _ => {
            with_storage!(src, s => reduce_typed(op, s, l, axes), complex => Err(complex::refused(op.name(), src.dtype())))
        }
    }
}

/// The mean (f64 for integer and bool inputs; f16 / bf16 accumulate in f32; complex in its
/// own precision). Empty: NaN.
pub fn mean(src: &CpuStorage, l: &Layout, axes: &[usize]) -> Result<CpuStorage> {
    match src {
        CpuStorage::C64(s) => complex::mean(s, l, axes),
        CpuStorage::C128(s) => complex::mean(s, l, axes),
        _ => {
            with_storage!(src, s => mean_typed(s, l, axes), complex => Err(complex::refused("mean", src.dtype())))
        }
    }
}

/// Variance with `ddof` (NumPy: divides by `max(n - ddof, 0)`), or its square root when `std`.
/// Two passes (the mean, then the squared deviations), so no cancellation.
pub fn var(
    src: &CpuStorage,
    l: &Layout,
    axes: &[usize],
    ddof: usize,
    std: bool,
) -> Result<CpuStorage> {
    with_storage!(src, s => var_typed(s, l, axes, ddof, std), complex => Err(complex::not_yet(if std { "std" } else { "var" }, src.dtype())))
}

/// `log(sum(exp(x)))` computed as `m + log(sum(exp(x - m)))` with `m` the max; a slice whose
/// max is not finite gives that max (all -inf: -inf, any +inf: +inf, any NaN: NaN).
pub fn logsumexp(src: &CpuStorage, l: &Layout, axes: &[usize]) -> Result<CpuStorage> {
    with_storage!(src, s => logsumexp_typed(s, l, axes), complex => Err(complex::not_yet("logsumexp", src.dtype())))
}

fn run<T: Sync, K: Kernel<T>>(p: &ReducePlan, src: &[T], k: &K) -> Result<CpuStorage>
where
    K::Out: CpuElement,
{
    let out = values(p, src, k)?;
    reorder(p, CpuStorage::from_vec(out))
}

/// The results in the plan's kept order.
fn values<T: Sync, K: Kernel<T>>(p: &ReducePlan, src: &[T], k: &K) -> Result<Vec<K::Out>>
where
    K::Out: CpuElement,
{
    let mut out = pool::take::<K::Out>("reduce", p.n_out)?;
    exec::execute(k, src, p, &mut out);
    Ok(out)
}

/// Brings a result from the plan's kept order into the output's order.
fn reorder(p: &ReducePlan, s: CpuStorage) -> Result<CpuStorage> {
    let Some((sizes, pos)) = &p.perm else {
        return Ok(s);
    };
    let cs = contiguous_strides(&p.kept.shape);
    let strides: Vec<isize> = pos.iter().map(|&q| cs[q]).collect();
    let l = Layout::as_strided(sizes, &strides, 0, s.len())?;
    crate::compact(&s, &l)
}

fn reduce_typed<T: RElem>(op: ReduceOp, s: &[T], l: &Layout, axes: &[usize]) -> Result<CpuStorage> {
    use ReduceOp::*;
    let p = ReducePlan::new(l, axes, matches!(op, ArgMax | ArgMin));
    let ident = |a, _| a;
    match op {
        Sum => {
            // The identity only shows in an empty sum, which is +0 (NumPy).
            let init = if p.n_red == 0 {
                T::S::ZERO
            } else {
                T::S::ADD_ID
            };
            run(
                &p,
                s,
                &FoldK::new(init, |x: T, _| x.to_s(), Num::add, |a, _| T::s_out(a))
                    .with_run(T::sum_run),
            )
        }
        Prod => run(
            &p,
            s,
            &FoldK::new(T::S::ONE, |x: T, _| x.to_s(), Num::mul, |a, _| T::s_out(a)),
        ),
        Max => run(
            &p,
            s,
            &FoldK::new(T::LOWEST, |x: T, _| x, max_nan, ident).with_run(T::max_run),
        ),
        Min => run(
            &p,
            s,
            &FoldK::new(T::HIGHEST, |x: T, _| x, min_nan, ident).with_run(T::min_run),
        ),
        Any => run(
            &p,
            s,
            &FoldK::new(false, |x: T, _| x.truthy(), |a, b| a | b, |a, _| a),
        ),
        All => run(
            &p,
            s,
            &FoldK::new(true, |x: T, _| x.truthy(), |a, b| a & b, |a, _| a),
        ),
        ArgMax => run(&p, s, &ArgK::<T, true>(PhantomData)),
        ArgMin => run(&p, s, &ArgK::<T, false>(PhantomData)),
    }
}

/// The per-output means in the plan's order, in the float accumulator type.
fn means<T: RElem>(p: &ReducePlan, s: &[T]) -> Result<Vec<T::F>>
where
    T::F: CpuElement,
{
    let n = T::F::from_usize(p.n_red);
    values(
        p,
        s,
        &FoldK::new(
            T::F::ADD_ID,
            |x: T, _| x.to_f(),
            Num::add,
            |a: T::F, _| a.div(n),
        )
        .with_run(T::f_sum_run),
    )
}

fn mean_typed<T: RElem>(s: &[T], l: &Layout, axes: &[usize]) -> Result<CpuStorage>
where
    T::F: CpuElement,
{
    let p = ReducePlan::new(l, axes, false);
    let m = means(&p, s)?;
    let mut out = pool::take::<T::FOut>("mean", m.len())?;
    for (o, &v) in out.iter_mut().zip(&m) {
        *o = T::f_out(v);
    }
    pool::give(m);
    reorder(&p, CpuStorage::from_vec(out))
}

fn var_typed<T: RElem>(
    s: &[T],
    l: &Layout,
    axes: &[usize],
    ddof: usize,
    std: bool,
) -> Result<CpuStorage>
where
    T::F: CpuElement,
{
    let p = ReducePlan::new(l, axes, false);
    let m = means(&p, s)?;
    let denom = T::F::from_usize(p.n_red.saturating_sub(ddof));
    let sq = |x: T, o: usize| {
        let d = x.to_f().sub(m[o]);
        d.mul(d)
    };
    let fin = |a: T::F, _| {
        let v = a.div(denom);
        T::f_out(if std { v.sqrt() } else { v })
    };
    let r = run(&p, s, &FoldK::new(T::F::ZERO, sq, Num::add, fin));
    pool::give(m);
    r
}

fn logsumexp_typed<T: RElem>(s: &[T], l: &Layout, axes: &[usize]) -> Result<CpuStorage>
where
    T::F: CpuElement,
{
    let p = ReducePlan::new(l, axes, false);
    let lowest = T::LOWEST.to_f();
    let mx = values(
        &p,
        s,
        &FoldK::new(lowest, |x: T, _| x.to_f(), max_nan, |a, _| a),
    )?;
    let ex = |x: T, o: usize| {
        let m = mx[o];
        if m.is_finite() {
            x.to_f().sub(m).exp()
        } else {
            T::F::ZERO
        }
    };
    let fin = |a: T::F, o: usize| {
        let m = mx[o];
        T::f_out(if m.is_finite() { m.add(a.ln()) } else { m })
    };
    let r = run(&p, s, &FoldK::new(T::F::ZERO, ex, Num::add, fin));
    pool::give(mx);
    r
}
