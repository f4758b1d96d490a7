//! Binary kernels: `op(a, b)` over two strided inputs of one (broadcast) shape into a
//! contiguous output. Inputs arrive in the op's compute dtype; comparisons write bool. The inner
//! loop takes the contiguous, stride-0 (scalar or row/column broadcast) or strided path per run.

use super::real::{FloatElement, Real};
use super::walk::{for_each_run, map2, map_inplace};
use crate::simd::with_best_simd;
use crate::{CpuElement, CpuStorage};
use quill_core::{BinaryOp, Error, LoopPlan, Result};

/// Where a binary kernel writes: `same` takes ops whose result has the operands' dtype,
/// `test` the comparisons (bool results).
pub trait Sink<T> {
    /// Runs `f` over every element pair, writing `T`. `f` may be called from several threads.
    fn same(&mut self, f: impl Fn(T, T) -> T + Sync);
    /// Runs the comparison `f` over every element pair, writing bool (or refusing, where the
    /// destination has the operands' dtype).
    fn test(&mut self, f: impl Fn(T, T) -> bool + Sync);
}

/// Into `out[at..at + numel]`, reading operands 1 and 2 of `plan`.
pub struct Fresh<'a, T> {
    /// The two operands' whole buffers, indexed by the offsets `plan` gives operands 1 and 2.
    pub ab: (&'a [T], &'a [T]),
    /// Operand 0 is the output, written in C order; 1 and 2 are `a` and `b` (any strides).
    pub plan: &'a LoopPlan,
    /// Holds the op's result dtype (`T`, or bool for a comparison) and at least
    /// `at + plan.numel()` elements; a wrong dtype panics.
    pub out: &'a mut CpuStorage,
    /// The element of `out` where the result starts.
    pub at: usize,
}

impl<T: CpuElement> Fresh<'_, T> {
    fn run<U: CpuElement>(&mut self, f: impl Fn(T, T) -> U + Sync) {
        let o = U::slice_mut(self.out).expect("output dtype is the op's result dtype");
        let o = &mut o[self.at..self.at + self.plan.numel()];
        let ab = self.ab;
        for_each_run(o, self.plan, |o, offs, sts| {
            with_best_simd(
                #[inline(always)]
                || map2(o, ab, offs, sts, &f),
            )
        });
    }
}

impl<T: CpuElement> Sink<T> for Fresh<'_, T> {
    fn same(&mut self, f: impl Fn(T, T) -> T + Sync) {
        self.run(f)
    }
    fn test(&mut self, f: impl Fn(T, T) -> bool + Sync) {
        self.run(f)
    }
}

/// `o = f(o, b)` over a contiguous destination `o` (operand 0 of `plan`) and `b` (operand 1).
/// Comparisons cannot write in place; `test` records that and the caller reports it.
pub struct InPlace<'a, T> {
    /// Exactly the destination's `plan.numel()` elements, in C order; read and overwritten.
    pub o: &'a mut [T],
    /// The second operand's whole buffer, indexed by `plan`'s offsets for operand 1; must not
    /// alias `o`.
    pub b: &'a [T],
    /// Operand 0 is `o` (contiguous), operand 1 is `b` (any strides, broadcast included).
    pub plan: &'a LoopPlan,
    /// Set when the op was a comparison and nothing was written; start it `false`.
    pub refused: bool,
}

impl<T: CpuElement> Sink<T> for InPlace<'_, T> {
    fn same(&mut self, f: impl Fn(T, T) -> T + Sync) {
        let b = self.b;
        for_each_run(self.o, self.plan, |o, [ob], [sb]| {
            with_best_simd(
                #[inline(always)]
                || map_inplace(o, b, ob, sb, &f),
            )
        });
    }
    fn test(&mut self, _f: impl Fn(T, T) -> bool + Sync) {
        self.refused = true;
    }
}

/// An element type with binary kernels: maps each `BinaryOp` to its function on `Self`, or to
/// an error naming the dtype where it has none (bitwise ops on floats, `Div` on integers).
pub trait BinaryKernel: CpuElement {
    /// Hands `op`'s elementwise function to `sink`.
    fn binary(op: BinaryOp, sink: &mut impl Sink<Self>) -> Result<()>;
}

fn unsupported(op: BinaryOp, dtype: quill_core::DType) -> Error {
    Error::invalid(op.name(), format!("no kernel for dtype {dtype}"))
}

/// The comparisons, shared by every element type with a total or IEEE order.
macro_rules! compare {
    ($op:expr, $sink:expr, $conv:expr) => {
        match $op {
            BinaryOp::Eq => $sink.test(|x, y| $conv(x) == $conv(y)),
            BinaryOp::Ne => $sink.test(|x, y| $conv(x) != $conv(y)),
            BinaryOp::Lt => $sink.test(|x, y| $conv(x) < $conv(y)),
            BinaryOp::Le => $sink.test(|x, y| $conv(x) <= $conv(y)),
            BinaryOp::Gt => $sink.test(|x, y| $conv(x) > $conv(y)),
            _ => $sink.test(|x, y| $conv(x) >= $conv(y)),
        }
    };
}

fn float_binary<T: FloatElement>(op: BinaryOp, sink: &mut impl Sink<T>) -> Result<()> {
    use BinaryOp::*;
    // A macro, not a helper taking `fn` pointers: the closure must inline into the SIMD loop.
    macro_rules! f {
        (|$x:ident, $y:ident| $e:expr) => {
            |a: T, b: T| {
                let ($x, $y) = (a.up(), b.up());
                T::down($e)
            }
        };
    }
    match op {
        Add => sink.same(f!(|x, y| x.add(y))),
        Sub => sink.same(f!(|x, y| x.sub(y))),
        Mul => sink.same(f!(|x, y| x.mul(y))),
        Div => sink.same(f!(|x, y| x.div(y))),
        Pow => sink.same(f!(|x, y| x.powf(y))),
        // NumPy's formulas: NaN in either operand propagates.
        Maximum => sink.same(f!(|x, y| if x >= y || x.is_nan() { x } else { y })),
        Minimum => sink.same(f!(|x, y| if x <= y || x.is_nan() { x } else { y })),
        Remainder => sink.same(f!(|x, y| x.rem_floor(y))),
        FloorDiv => sink.same(f!(|x, y| x.floor_div(y))),
        Atan2 => sink.same(f!(|x, y| x.atan2(y))),
        Eq | Ne | Lt | Le | Gt | Ge => compare!(op, sink, |v: T| v.up()),
        LogicalAnd | LogicalOr | LogicalXor | BitAnd | BitOr | BitXor | Shl | Shr => {
            return Err(unsupported(op, T::DTYPE))
        }
    }
    Ok(())
}

macro_rules! float_kernel {
    ($($t:ty),*) => {$(
        impl BinaryKernel for $t {
            fn binary(op: BinaryOp, sink: &mut impl Sink<Self>) -> Result<()> {
                float_binary(op, sink)
            }
        }
    )*};
}
float_kernel!(f32, f64, half::f16, half::bf16);

macro_rules! int_kernel {
    ($($t:ty),*) => {$(
        impl BinaryKernel for $t {
            fn binary(op: BinaryOp, sink: &mut impl Sink<Self>) -> Result<()> {
                use BinaryOp::*;
                match op {
                    // Integer arithmetic wraps, as NumPy's.
                    Add => sink.same(|x: $t, y: $t| x.wrapping_add(y)),
                    Sub => sink.same(|x: $t, y: $t| x.wrapping_sub(y)),
                    Mul => sink.same(|x: $t, y: $t| x.wrapping_mul(y)),
                    Pow => sink.same(int_pow::<$t>),
                    Maximum => sink.same(|x: $t, y: $t| x.max(y)),
                    Minimum => sink.same(|x: $t, y: $t| x.min(y)),
                    Remainder => sink.same(|x: $t, y: $t| {
                        // Floor modulo (Python's %); NumPy gives 0 for a zero divisor.
                        if y == 0 {
                            0
                        } else {
                            let m = x.wrapping_rem(y);
                            #[allow(unused_comparisons)]
                            if m != 0 && ((m < 0) != (y < 0)) { m.wrapping_add(y) } else { m }
                        }
                    }),
                    FloorDiv => sink.same(|x: $t, y: $t| {
                        // Floored; NumPy gives 0 for a zero divisor and MIN for MIN // -1
                        // (wrapping_div's result).
                        if y == 0 {
                            0
                        } else {
                            let q = x.wrapping_div(y);
                            #[allow(unused_comparisons)]
                            if x.wrapping_rem(y) != 0 && ((x < 0) != (y < 0)) { q - 1 } else { q }
                        }
                    }),
                    Eq | Ne | Lt | Le | Gt | Ge => compare!(op, sink, |v: $t| v),
                    BitAnd => sink.same(|x: $t, y: $t| x & y),
                    BitOr => sink.same(|x: $t, y: $t| x | y),
                    BitXor => sink.same(|x: $t, y: $t| x ^ y),
                    #[allow(unused_comparisons)]
                    Shl => sink.same(|x: $t, y: $t| {
                        if y < 0 || y as u64 >= <$t>::BITS as u64 { 0 } else { x.wrapping_shl(y as u32) }
                    }),
                    #[allow(unused_comparisons)]
                    Shr => sink.same(|x: $t, y: $t| {
                        if y < 0 || y as u64 >= <$t>::BITS as u64 {
                            if x < 0 { !(0 as $t) } else { 0 }
                        } else {
                            x >> (y as u32)
                        }
                    }),
                    Div | Atan2 | LogicalAnd | LogicalOr | LogicalXor => {
                        return Err(unsupported(op, <$t as quill_core::Element>::DTYPE))
                    }
                }
                Ok(())
            }
        }
    )*};
}
int_kernel!(i8, i16, i32, i64, u8, u16, u32, u64);

/// Integer power by squaring, wrapping. A negative exponent (which NumPy rejects for integer
/// arrays) gives the truncated exact result: 1 for base 1, +-1 for base -1, else 0.
#[inline(always)]
fn int_pow<T: IntPow>(x: T, y: T) -> T {
    x.int_pow(y)
}

trait IntPow: Copy {
    fn int_pow(self, e: Self) -> Self;
}

macro_rules! int_pow_impl {
    ($($t:ty),*) => {$(
        impl IntPow for $t {
            #[inline(always)]
            #[allow(unused_comparisons)]
            fn int_pow(self, e: $t) -> $t {
                if e < 0 {
                    return match self as i64 {
                        1 => 1,
                        -1 => if e as i64 % 2 == 0 { 1 } else { self },
                        _ => 0,
                    };
                }
                // Square and multiply over all 64 bits of the exponent (wrapping_pow takes a
                // u32, which would cut large u64/i64 exponents).
                let (mut base, mut e, mut r) = (self, e as u64, 1 as $t);
                while e > 0 {
                    if e & 1 == 1 {
                        r = r.wrapping_mul(base);
                    }
                    base = base.wrapping_mul(base);
                    e >>= 1;
                }
                r
            }
        }
    )*};
}
int_pow_impl!(i8, i16, i32, i64, u8, u16, u32, u64);

impl BinaryKernel for bool {
    fn binary(op: BinaryOp, sink: &mut impl Sink<Self>) -> Result<()> {
        use BinaryOp::*;
        match op {
            // NumPy: + and maximum are `or`, * and minimum are `and` on bools.
            Add | Maximum | LogicalOr => sink.same(|x: bool, y: bool| x | y),
            Mul | Minimum | LogicalAnd | BitAnd => sink.same(|x: bool, y: bool| x & y),
            LogicalXor | BitXor => sink.same(|x: bool, y: bool| x ^ y),
            BitOr => sink.same(|x: bool, y: bool| x | y),
            Eq | Ne | Lt | Le | Gt | Ge => compare!(op, sink, |v: bool| v),
            Sub | Div | Pow | Remainder | FloorDiv | Atan2 | Shl | Shr => {
                return Err(unsupported(op, quill_core::DType::Bool))
            }
        }
        Ok(())
    }
}
