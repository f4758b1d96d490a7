//! Unary kernels: `op(x)` for every element of a strided input into a contiguous output. One
//! table per kind of element (floats through `Real`, integers, bool); the op is matched once per
//! call and each arm runs its own monomorphised, SIMD-compiled loop.

use super::real::{FloatElement, Real};
use super::walk::{for_each_run, map1};
use crate::simd::with_best_simd;
use crate::{CpuElement, CpuStorage};
use quill_core::{Error, LoopPlan, Result, UnaryOp};

/// Writes `f(a)` for each element of `plan`'s operand 1 into `out[at..at + numel]`.
pub(crate) fn run<T: CpuElement, U: CpuElement>(
    a: &[T],
    plan: &LoopPlan,
    out: &mut CpuStorage,
    at: usize,
    f: impl Fn(T) -> U + Sync,
) {
    let o = U::slice_mut(out).expect("output dtype is the op's result dtype");
    let o = &mut o[at..at + plan.numel()];
    for_each_run(o, plan, |o, [off], [st]| {
        with_best_simd(
            #[inline(always)]
            || map1(o, a, off, st, &f),
        )
    });
}

/// An element type with unary kernels; an op it has none for (a float function on an integer,
/// say) is an error naming the op and the dtype.
pub trait UnaryKernel: CpuElement {
    /// `op` over `a` (operand 1 of `plan`; operand 0 is the output) into `out` from `at`.
    /// `Self` is the op's compute dtype and `out` holds its result dtype.
    fn unary(
        op: UnaryOp,
        a: &[Self],
        plan: &LoopPlan,
        out: &mut CpuStorage,
        at: usize,
    ) -> Result<()>;
}

fn unsupported(op: UnaryOp, dtype: quill_core::DType) -> Error {
    Error::invalid(op.name(), format!("no kernel for dtype {dtype}"))
}

/// Expands `$body` once per float `UnaryOp` with `$F` a constant, so each loop is
/// specialised; predicates go to `$pred`. The arms come from quill-core's op table, so a new
/// float op needs only its arm in `Real::f`.
macro_rules! per_real_fn {
    ($op:expr, $F:ident => $body:expr, $pred:expr) => {{
        let op: UnaryOp = $op;
        if op.is_predicate() {
            $pred
        } else {
            quill_core::unary_ops!(per_real_match { op, $F => $body })
        }
    }};
}

/// `match op` with one arm per non-predicate row of the table (see `per_real_fn`).
macro_rules! per_real_match {
    ([$op:ident, $F:ident => $body:expr]
        $( $(#[$m:meta])* ($v:ident, $n:ident, $k:ident, $r:expr) ),* $(,)?) => {
        match $op {
            $( UnaryOp::$v => per_real_arm!($k, $v, $F => $body), )*
        }
    };
}

macro_rules! per_real_arm {
    (Predicate, $v:ident, $F:ident => $body:expr) => {
        unreachable!("predicates have kernels of their own")
    };
    ($k:ident, $v:ident, $F:ident => $body:expr) => {{
        const $F: UnaryOp = UnaryOp::$v;
        $body
    }};
}

fn float_unary<T: FloatElement>(
    op: UnaryOp,
    a: &[T],
    plan: &LoopPlan,
    out: &mut CpuStorage,
    at: usize,
) -> Result<()> {
    per_real_fn!(
        op,
        F => run(a, plan, out, at, |x: T| T::down(x.up().f(F))),
        match op {
            UnaryOp::LogicalNot => run(a, plan, out, at, |x: T| x.up().is_zero()),
            UnaryOp::IsNan => run(a, plan, out, at, |x: T| x.up().is_nan()),
            UnaryOp::IsInf => run(a, plan, out, at, |x: T| x.up().is_infinite()),
            UnaryOp::SignBit => run(a, plan, out, at, |x: T| x.up().is_sign_negative()),
            _ => run(a, plan, out, at, |x: T| x.up().is_finite()),
        }
    );
    Ok(())
}

macro_rules! float_kernel {
    ($($t:ty),*) => {$(
        impl UnaryKernel for $t {
            fn unary(op: UnaryOp, a: &[Self], plan: &LoopPlan, out: &mut CpuStorage, at: usize)
                -> Result<()> {
                float_unary(op, a, plan, out, at)
            }
        }
    )*};
}
float_kernel!(f32, f64, half::f16, half::bf16);

macro_rules! int_kernel {
    ($t:ty, $abs:expr, $sign:expr) => {
        impl UnaryKernel for $t {
            fn unary(
                op: UnaryOp,
                a: &[Self],
                plan: &LoopPlan,
                out: &mut CpuStorage,
                at: usize,
            ) -> Result<()> {
                use UnaryOp::*;
                match op {
                    // Integers wrap, as NumPy's (abs of the minimum is the minimum).
                    Neg => run(a, plan, out, at, |x: $t| x.wrapping_neg()),
                    Abs => run(a, plan, out, at, $abs),
                    Sign => run(a, plan, out, at, $sign),
                    Square => run(a, plan, out, at, |x: $t| x.wrapping_mul(x)),
                    Relu => run(a, plan, out, at, |x: $t| x.max(0)),
                    Floor | Ceil | Round | Trunc => run(a, plan, out, at, |x: $t| x),
                    LogicalNot => run(a, plan, out, at, |x: $t| x == 0),
                    IsNan | IsInf => run(a, plan, out, at, |_: $t| false),
                    IsFinite => run(a, plan, out, at, |_: $t| true),
                    #[allow(unused_comparisons)]
                    SignBit => run(a, plan, out, at, |x: $t| x < 0),
                    _ => return Err(unsupported(op, <$t as quill_core::Element>::DTYPE)),
                }
                Ok(())
            }
        }
    };
}
int_kernel!(i32, |x: i32| x.wrapping_abs(), |x: i32| x.signum());
int_kernel!(i64, |x: i64| x.wrapping_abs(), |x: i64| x.signum());
int_kernel!(u8, |x: u8| x, |x: u8| x.min(1));
int_kernel!(i8, |x: i8| x.wrapping_abs(), |x: i8| x.signum());
int_kernel!(i16, |x: i16| x.wrapping_abs(), |x: i16| x.signum());
int_kernel!(u16, |x: u16| x, |x: u16| x.min(1));
int_kernel!(u32, |x: u32| x, |x: u32| x.min(1));
int_kernel!(u64, |x: u64| x, |x: u64| x.min(1));

impl UnaryKernel for bool {
    fn unary(
        op: UnaryOp,
        a: &[Self],
        plan: &LoopPlan,
        out: &mut CpuStorage,
        at: usize,
    ) -> Result<()> {
        use UnaryOp::*;
        match op {
            LogicalNot => run(a, plan, out, at, |x: bool| !x),
            Floor | Ceil | Round | Trunc => run(a, plan, out, at, |x: bool| x),
            IsNan | IsInf => run(a, plan, out, at, |_: bool| false),
            IsFinite => run(a, plan, out, at, |_: bool| true),
            SignBit => run(a, plan, out, at, |_: bool| false),
            _ => return Err(unsupported(op, quill_core::DType::Bool)),
        }
        Ok(())
    }
}
