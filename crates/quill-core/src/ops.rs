//! The op vocabulary: every elementwise and reduction op as an enum value, with its name, the
//! dtype rule of its result, and a scalar reference implementation in f64 that tests (and the
//! fallback kernels) compare against.
//!
//! # The op tables
//! Every elementwise op is declared once, as one row of `unary_ops!` or `binary_ops!`.
//! Both are "for each" macros: `unary_ops!(cb)` expands to `cb! { [] ROW, ROW, ... }` and
//! `unary_ops!(cb { ARGS })` to `cb! { [ARGS] ROW, ... }`, so each crate stamps its per-op code
//! from the same list:
//! - here: the `UnaryOp` / `BinaryOp` enums, `ALL`, `name`, `from_name`, the dtype kind and
//!   `eval_f64`;
//! - quill: the NDArray and Tensor methods (`a.exp()`, `a.add_scalar(1.0)`, `a.sub_assign(&b)`);
//! - quill-cpu: the per-op dispatch of the unary float kernels (each op its own loop);
//! - quill-cuda: the kernel names and the `.cu` stamping macros (which (op, dtype) kernels exist
//!   follows from each op's `compute_dtype`);
//! - quill-py: the op names Python builds its functions and methods from.
//!
//! A new unary float op is then: its row here, its CPU kernel arm (`quill-cpu`'s `real.rs`),
//! its CUDA functor line (`QUILL_UNARY(name, expr)` or `QUILL_UNARY_MATH(name, floatfn,
//! doublefn)` in `elementwise.cu`) and its backward rule (quill's `tensor/ops/elementwise.rs`).
//! Tests check that none is missing: the CPU's `Real::f` match is exhaustive, quill-cuda checks
//! every op has its functor, the gradient check lists every op.

use crate::promote::promote_types;
use crate::{DType, Error, Result};
use std::f64::consts::{FRAC_1_SQRT_2, PI};

/// The unary op table. Each row is `(Variant, name, Kind, reference)`, doc comments before it:
/// - `Variant`: the `UnaryOp` variant;
/// - `name`: the op's name (`UnaryOp::name`), which is also the NDArray / Tensor method and the
///   CUDA kernel's op word (`unary_NAME_f32`);
/// - `Kind`: a [`UnaryKind`], the dtype rule;
/// - `reference`: the f64 reference, a closure or fn of `x: f64` giving `f64` (or `bool` for
///   predicates), used by `UnaryOp::eval_f64`.
///
/// `unary_ops!(cb)` expands to `cb! { [] ROW, ... }`; `unary_ops!(cb { ARGS })` passes `ARGS`
/// through as `cb! { [ARGS] ROW, ... }`. A callback matches the rows with
/// `$( $(#[$m:meta])* ($v:ident, $n:ident, $k:ident, $r:expr) ),* $(,)?`.
#[macro_export]
macro_rules! unary_ops {
    ($($cb:ident)::+ $({ $($args:tt)* })?) => {
        $($cb)::+! { [$($($args)*)?]
            /// `-x`.
            (Neg, neg, SameNumeric, |x| -x),
            /// `|x|`.
            (Abs, abs, SameNumeric, f64::abs),
            /// -1, 0 or 1 by the sign of `x`; NaN stays NaN.
            (Sign, sign, SameNumeric, sign_ref),
            /// `e^x`.
            (Exp, exp, Float, f64::exp),
            /// `2^x`.
            (Exp2, exp2, Float, f64::exp2),
            /// Natural logarithm.
            (Log, log, Float, f64::ln),
            /// Base-2 logarithm.
            (Log2, log2, Float, f64::log2),
            /// Base-10 logarithm.
            (Log10, log10, Float, f64::log10),
            /// `ln(1 + x)`, accurate for `x` near 0.
            (Log1p, log1p, Float, f64::ln_1p),
            /// `e^x - 1`, accurate for `x` near 0.
            (Expm1, expm1, Float, f64::exp_m1),
            /// Square root; NaN for negative `x`.
            (Sqrt, sqrt, Float, f64::sqrt),
            /// Reciprocal square root, `1 / sqrt(x)`.
            (Rsqrt, rsqrt, Float, |x| 1.0 / x.sqrt()),
            /// `x * x`, in the input's dtype.
            (Square, square, SameNumeric, |x| x * x),
            /// `1 / x`.
            (Reciprocal, reciprocal, Float, |x| 1.0 / x),
            /// Sine of `x` in radians.
            (Sin, sin, Float, f64::sin),
            /// Cosine of `x` in radians.
            (Cos, cos, Float, f64::cos),
            /// Tangent of `x` in radians.
            (Tan, tan, Float, f64::tan),
            /// Hyperbolic tangent.
            (Tanh, tanh, Float, f64::tanh),
            /// Arcsine, in radians; NaN outside `[-1, 1]`.
            (Asin, asin, Float, f64::asin),
            /// Arccosine, in radians; NaN outside `[-1, 1]`.
            (Acos, acos, Float, f64::acos),
            /// Arctangent, in radians.
            (Atan, atan, Float, f64::atan),
            /// Hyperbolic sine.
            (Sinh, sinh, Float, f64::sinh),
            /// Hyperbolic cosine.
            (Cosh, cosh, Float, f64::cosh),
            /// Inverse hyperbolic sine.
            (Asinh, asinh, Float, f64::asinh),
            /// Inverse hyperbolic cosine; NaN below 1.
            (Acosh, acosh, Float, f64::acosh),
            /// Inverse hyperbolic tangent; NaN outside `[-1, 1]`.
            (Atanh, atanh, Float, f64::atanh),
            /// The logistic function `1 / (1 + e^-x)`.
            (Sigmoid, sigmoid, Float, sigmoid_ref),
            /// `max(x, 0)`; NaN passes through, as PyTorch's relu.
            (Relu, relu, SameNumeric, |x| if x < 0.0 { 0.0 } else { x }),
            /// Exact GELU: `x * Phi(x)` with the normal CDF through erf.
            (Gelu, gelu, Float, |x| 0.5 * x * libm::erfc(-x * FRAC_1_SQRT_2)),
            /// GELU's tanh approximation (PyTorch's `approximate="tanh"`).
            (GeluTanh, gelu_tanh, Float, gelu_tanh_ref),
            /// The Gauss error function.
            (Erf, erf, Float, libm::erf),
            /// Largest integer not above `x`.
            (Floor, floor, Rounding, f64::floor),
            /// Smallest integer not below `x`.
            (Ceil, ceil, Rounding, f64::ceil),
            /// Round half to even, as NumPy's `round` / `rint`.
            (Round, round, Rounding, f64::round_ties_even),
            /// `x` rounded toward zero.
            (Trunc, trunc, Rounding, f64::trunc),
            /// True where `x` is zero (or false).
            (LogicalNot, logical_not, Predicate, |x| x == 0.0),
            /// True where `x` is NaN.
            (IsNan, isnan, Predicate, f64::is_nan),
            /// True where `x` is positive or negative infinity.
            (IsInf, isinf, Predicate, f64::is_infinite),
            /// True where `x` is neither infinite nor NaN.
            (IsFinite, isfinite, Predicate, f64::is_finite),
            /// True where the sign bit is set: negatives, -0.0 and NaNs with the bit (Array API).
            (SignBit, signbit, Predicate, f64::is_sign_negative),
        }
    };
}

/// The binary op table. Each row is
/// `(Variant, name, Kind, reference, scalar_method, [reversed_scalar_method], [assign_method,
/// scalar_assign_method])`, doc comments before it:
/// - `Variant`, `name` and `reference` (a closure or fn of `a, b: f64` giving `f64` or `bool`)
///   as in `unary_ops!`; `name` is also the array-array method;
/// - `Kind`: a [`BinaryKind`], the dtype rule;
/// - the method names of the scalar form (`a.add_scalar(1.0)`), of the reversed scalar form
///   (`a.rsub_scalar(1.0)` is `1 - a`; `[]` for none) and of the in-place forms (`[]` for none).
///   They are spelled out because `macro_rules!` cannot join identifiers.
///
/// Invoked like `unary_ops!`; a callback matches the rows with
/// `$( $(#[$m:meta])* ($v:ident, $n:ident, $k:ident, $r:expr, $s:ident, [$($rs:ident)?],
/// [$($a:ident, $sa:ident)?]) ),* $(,)?`.
#[macro_export]
macro_rules! binary_ops {
    ($($cb:ident)::+ $({ $($args:tt)* })?) => {
        $($cb)::+! { [$($($args)*)?]
            /// `a + b`.
            (Add, add, Arith, |a, b| a + b, add_scalar, [], [add_assign, add_scalar_assign]),
            /// `a - b`.
            (Sub, sub, Arith, |a, b| a - b, sub_scalar, [rsub_scalar], [sub_assign, sub_scalar_assign]),
            /// `a * b`.
            (Mul, mul, Arith, |a, b| a * b, mul_scalar, [], [mul_assign, mul_scalar_assign]),
            /// True division `a / b`, always in a float dtype.
            (Div, div, Float, |a, b| a / b, div_scalar, [rdiv_scalar], [div_assign, div_scalar_assign]),
            /// `a` raised to the power `b`.
            (Pow, pow, Arith, f64::powf, pow_scalar, [rpow_scalar], [pow_assign, pow_scalar_assign]),
            /// NaN propagates, as NumPy's `maximum`.
            (Maximum, maximum, Arith, maximum_ref, maximum_scalar, [],
                [maximum_assign, maximum_scalar_assign]),
            /// NaN propagates, as NumPy's `minimum`.
            (Minimum, minimum, Arith, minimum_ref, minimum_scalar, [],
                [minimum_assign, minimum_scalar_assign]),
            /// Python's `%`: the result has the sign of the divisor (NumPy's `remainder`).
            (Remainder, remainder, Arith, float_remainder, remainder_scalar, [rremainder_scalar],
                [remainder_assign, remainder_scalar_assign]),
            /// Python's `//`, as NumPy's `floor_divide`: floats follow `npy_floor_divide` (NaN
            /// for inf // finite, signed zeros, `x // 0` is `x / 0`), integers give 0 for a zero
            /// divisor and wrap `MIN // -1` to `MIN`.
            (FloorDiv, floor_divide, Arith, float_floor_divide, floor_divide_scalar,
                [rfloor_divide_scalar], [floor_divide_assign, floor_divide_scalar_assign]),
            /// Angle in radians of the point `(b, a)`: `atan(a / b)` with the quadrant from both signs.
            (Atan2, atan2, Float, f64::atan2, atan2_scalar, [ratan2_scalar], []),
            /// True where `a == b`.
            (Eq, eq, Compare, |a, b| a == b, eq_scalar, [], []),
            /// True where `a != b` (and where either is NaN).
            (Ne, ne, Compare, |a, b| a != b, ne_scalar, [], []),
            /// True where `a < b`.
            (Lt, lt, Compare, |a, b| a < b, lt_scalar, [], []),
            /// True where `a <= b`.
            (Le, le, Compare, |a, b| a <= b, le_scalar, [], []),
            /// True where `a > b`.
            (Gt, gt, Compare, |a, b| a > b, gt_scalar, [], []),
            /// True where `a >= b`.
            (Ge, ge, Compare, |a, b| a >= b, ge_scalar, [], []),
            /// True where both operands are non-zero.
            (LogicalAnd, logical_and, Logical, |a, b| a != 0.0 && b != 0.0, logical_and_scalar, [], []),
            /// True where either operand is non-zero.
            (LogicalOr, logical_or, Logical, |a, b| a != 0.0 || b != 0.0, logical_or_scalar, [], []),
            /// True where exactly one operand is non-zero.
            (LogicalXor, logical_xor, Logical, |a, b| (a != 0.0) != (b != 0.0), logical_xor_scalar,
                [], []),
            /// Bitwise AND (logical AND for bool).
            (BitAnd, bitwise_and, Bitwise, |a, b| (a as i64 & b as i64) as f64, bitwise_and_scalar,
                [], []),
            /// Bitwise OR (logical OR for bool).
            (BitOr, bitwise_or, Bitwise, |a, b| (a as i64 | b as i64) as f64, bitwise_or_scalar,
                [], []),
            /// Bitwise XOR (logical XOR for bool).
            (BitXor, bitwise_xor, Bitwise, |a, b| (a as i64 ^ b as i64) as f64, bitwise_xor_scalar,
                [], []),
            /// `a << b`; shifts of the width or more (or negative) give 0, as NumPy.
            (Shl, bitwise_left_shift, Shift, shl_ref, bitwise_left_shift_scalar, [], []),
            /// `a >> b`, arithmetic for signed types; shifts of the width or more give 0 or -1.
            (Shr, bitwise_right_shift, Shift, shr_ref, bitwise_right_shift_scalar, [], []),
        }
    };
}

/// How a unary op's result dtype follows from its input's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryKind {
    /// Same dtype as the input (neg, abs, square, ...), for numbers; bool is rejected.
    SameNumeric,
    /// A float op: float inputs keep their dtype, bool and uint8 give f16, wider integers f64
    /// (NumPy).
    Float,
    /// Rounding: floats keep their dtype, integers and bool are returned unchanged.
    Rounding,
    /// Always bool, computed on the input as it is.
    Predicate,
}

/// How a binary op's compute and result dtypes follow from its operands'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryKind {
    /// In the promoted dtype (add, pow, maximum, ...).
    Arith,
    /// A float op: integers and bool give f64 (div, atan2).
    Float,
    /// In the promoted dtype, a bool result.
    Compare,
    /// On the operands' truth values: bool in, bool out.
    Logical,
    /// Integers and bool (and, or, xor).
    Bitwise,
    /// Integers only.
    Shift,
}

/// What a reference fn returns: a number or a truth value (0/1).
trait RefOut {
    fn into_f64(self) -> f64;
}
impl RefOut for f64 {
    fn into_f64(self) -> f64 {
        self
    }
}
impl RefOut for bool {
    fn into_f64(self) -> f64 {
        self as u8 as f64
    }
}

fn reference1<R: RefOut>(f: impl Fn(f64) -> R, x: f64) -> f64 {
    f(x).into_f64()
}

fn reference2<R: RefOut>(f: impl Fn(f64, f64) -> R, a: f64, b: f64) -> f64 {
    f(a, b).into_f64()
}

macro_rules! define_unary_op {
    ([] $( $(#[$m:meta])* ($v:ident, $n:ident, $k:ident, $r:expr) ),* $(,)?) => {
        /// An elementwise op of one operand (the rows of `unary_ops!`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum UnaryOp {
            $( $(#[$m])* $v, )*
        }

        impl UnaryOp {
            /// Every unary op, in table order.
            pub const ALL: [UnaryOp; [$(stringify!($v)),*].len()] = [$(UnaryOp::$v),*];

            /// The op's name: its method name and its word in kernel names.
            pub fn name(self) -> &'static str {
                match self {
                    $(UnaryOp::$v => stringify!($n),)*
                }
            }

            /// The op's dtype rule.
            pub fn kind(self) -> UnaryKind {
                match self {
                    $(UnaryOp::$v => UnaryKind::$k,)*
                }
            }

            /// The reference implementation, in f64 (bool as 0/1). Integer kernels that wrap
            /// (neg and abs of the minimum) differ from this only there.
            pub fn eval_f64(self, x: f64) -> f64 {
                match self {
                    $(UnaryOp::$v => reference1($r, x),)*
                }
            }
        }
    };
}
unary_ops!(define_unary_op);

macro_rules! define_binary_op {
    ([] $( $(#[$m:meta])* ($v:ident, $n:ident, $k:ident, $r:expr, $s:ident, [$($rs:ident)?],
        [$($a:ident, $sa:ident)?]) ),* $(,)?) => {
        /// An elementwise op of two operands (the rows of `binary_ops!`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum BinaryOp {
            $( $(#[$m])* $v, )*
        }

        impl BinaryOp {
            /// Every binary op, in table order.
            pub const ALL: [BinaryOp; [$(stringify!($v)),*].len()] = [$(BinaryOp::$v),*];

            /// The op's name: its method name and its word in kernel names.
            pub fn name(self) -> &'static str {
                match self {
                    $(BinaryOp::$v => stringify!($n),)*
                }
            }

            /// The op's dtype rule.
            pub fn kind(self) -> BinaryKind {
                match self {
                    $(BinaryOp::$v => BinaryKind::$k,)*
                }
            }

            /// The reference implementation in f64 (bool as 0/1).
            pub fn eval_f64(self, a: f64, b: f64) -> f64 {
                match self {
                    $(BinaryOp::$v => reference2($r, a, b),)*
                }
            }
        }
    };
}
binary_ops!(define_binary_op);

fn sign_ref(x: f64) -> f64 {
    if x.is_nan() {
        f64::NAN
    } else if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// exp(-|x|) cannot overflow, so tiny results stay accurate for very negative x.
fn sigmoid_ref(x: f64) -> f64 {
    let e = (-x.abs()).exp();
    if x >= 0.0 {
        1.0 / (1.0 + e)
    } else {
        e / (1.0 + e)
    }
}

fn gelu_tanh_ref(x: f64) -> f64 {
    let k = (2.0 / PI).sqrt();
    let u = 2.0 * k * (x + 0.044715 * x * x * x);
    // 0.5 (1 + tanh(u / 2)) written as the sigmoid, which does not cancel.
    x * sigmoid_ref(u)
}

fn maximum_ref(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

fn minimum_ref(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// The i64 reference; narrower types agree wherever the result fits them.
fn shl_ref(a: f64, b: f64) -> f64 {
    if (0.0..64.0).contains(&b) {
        (a as i64).wrapping_shl(b as u32) as f64
    } else {
        0.0
    }
}

fn shr_ref(a: f64, b: f64) -> f64 {
    if (0.0..64.0).contains(&b) {
        ((a as i64) >> b as u32) as f64
    } else if a < 0.0 {
        -1.0
    } else {
        0.0
    }
}

impl UnaryOp {
    /// The op called `name` (see [`UnaryOp::name`]).
    pub fn from_name(name: &str) -> Option<UnaryOp> {
        UnaryOp::ALL.into_iter().find(|u| u.name() == name)
    }

    /// True for the ops with a bool result (isnan, logical_not, ...).
    pub fn is_predicate(self) -> bool {
        self.kind() == UnaryKind::Predicate
    }

    /// The dtype of `op(x)` for `x` of dtype `input` (NumPy's rules), or an error for a dtype the
    /// op does not accept.
    pub fn result_dtype(self, input: DType) -> Result<DType> {
        if input.is_complex() {
            return self.complex_result(input);
        }
        match self.kind() {
            // NumPy's absolute of bool is the identity.
            UnaryKind::SameNumeric if input == DType::Bool && self == UnaryOp::Abs => Ok(input),
            UnaryKind::SameNumeric if input == DType::Bool => Err(Error::invalid(
                self.name(),
                "not defined for bool arrays; use logical_not, or astype to a number first",
            )),
            UnaryKind::SameNumeric | UnaryKind::Rounding => Ok(input),
            UnaryKind::Float if input.is_float() => Ok(input),
            // NumPy's smallest float that holds the input: f16 for bool and 8-bit integers, f32
            // for 16-bit ones, f64 above.
            UnaryKind::Float => Ok(promote_types(input, DType::F16)),
            UnaryKind::Predicate => Ok(DType::Bool),
        }
    }

    /// The dtype the kernel computes in: the result's, except predicates, which look at the
    /// input as it is, and `abs` of a complex (a real result computed from the complex input).
    pub fn compute_dtype(self, input: DType) -> Result<DType> {
        match self.kind() {
            UnaryKind::Predicate => Ok(input),
            _ if input.is_complex() => self.complex_result(input).map(|_| input),
            _ => self.result_dtype(input),
        }
    }

    /// Whether the op has a complex form (NumPy's complex loops): arithmetic, `sign` (z / |z|),
    /// the exponentials, logarithms, roots, trigonometric and hyperbolic functions and their
    /// inverses, and the predicates but `signbit`. Not the orderings (`relu`, rounding), `erf`,
    /// the GELUs or `sigmoid`.
    pub fn takes_complex(self) -> bool {
        use UnaryOp::*;
        !matches!(
            self,
            Relu | Gelu | GeluTanh | Erf | Sigmoid | Floor | Ceil | Round | Trunc | SignBit
        )
    }

    fn complex_result(self, input: DType) -> Result<DType> {
        if !self.takes_complex() {
            return Err(Error::invalid(
                self.name(),
                format!(
                    "not defined for complex dtype {input} (it needs an ordering or a real \
                     function); apply it to .real or abs() instead"
                ),
            ));
        }
        Ok(match self.kind() {
            UnaryKind::Predicate => DType::Bool,
            _ if self == UnaryOp::Abs => input.real_part(),
            _ => input,
        })
    }
}

impl BinaryOp {
    /// The op called `name` (see [`BinaryOp::name`]).
    pub fn from_name(name: &str) -> Option<BinaryOp> {
        BinaryOp::ALL.into_iter().find(|b| b.name() == name)
    }

    /// Whether the op compares its operands (`eq`, `lt`, ...) and so returns bool.
    pub fn is_comparison(self) -> bool {
        self.kind() == BinaryKind::Compare
    }

    /// Whether the op combines truth values (`logical_and`, `logical_or`, `logical_xor`).
    pub fn is_logical(self) -> bool {
        self.kind() == BinaryKind::Logical
    }

    /// The dtype both operands are converted to before the kernel runs, given the promoted
    /// dtype of the operands. Errors name the op and both dtypes.
    pub fn compute_dtype(self, lhs: DType, rhs: DType) -> Result<DType> {
        use BinaryOp::*;
        let common = promote_types(lhs, rhs);
        let bad = |why: &str| {
            Err(Error::invalid(
                self.name(),
                format!("not defined for dtypes {lhs} and {rhs}: {why}"),
            ))
        };
        if common.is_complex() {
            return match self {
                Add | Sub | Mul | Div | Pow | Eq | Ne => Ok(common),
                _ if self.is_logical() => Ok(DType::Bool),
                _ => bad("complex numbers have no order, remainder, atan2 or bits"),
            };
        }
        match self.kind() {
            BinaryKind::Logical => Ok(DType::Bool),
            // Division and the transcendental ops are float ops: integers give f64, as NumPy;
            // atan2 (a plain float loop in NumPy, unlike true_divide) gives the smallest float
            // that holds the integers (f16 for bool and 8-bit ones).
            BinaryKind::Float if self == Atan2 && !common.is_float() => {
                Ok(promote_types(common, DType::F16))
            }
            BinaryKind::Float if !common.is_float() => Ok(DType::F64),
            BinaryKind::Bitwise | BinaryKind::Shift if common.is_float() => {
                bad("bitwise ops take integers and bool")
            }
            BinaryKind::Shift if common == DType::Bool => bad("shifts take integers; astype first"),
            _ if common != DType::Bool => Ok(common),
            _ => match self {
                Sub => bad("bool subtraction is not supported; use logical_xor"),
                // NumPy's bool loops for these are its int8 ones.
                Pow | Remainder | FloorDiv => Ok(DType::I8),
                _ => Ok(common),
            },
        }
    }

    /// The dtype of the result: bool for comparisons and logical ops, else the compute dtype.
    pub fn result_dtype(self, lhs: DType, rhs: DType) -> Result<DType> {
        let c = self.compute_dtype(lhs, rhs)?;
        Ok(if self.is_comparison() { DType::Bool } else { c })
    }
}

/// NumPy's float `remainder` (`npy_divmod`): `a - floor(a / b) * b` computed as `fmod` and
/// corrected to the divisor's sign; `x % 0` is NaN, and a zero result carries `b`'s sign.
pub fn float_remainder(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return f64::NAN;
    }
    let m = a % b;
    if m != 0.0 {
        if (b < 0.0) != (m < 0.0) {
            m + b
        } else {
            m
        }
    } else {
        0.0f64.copysign(b)
    }
}

/// NumPy's float `floor_divide` (`npy_floor_divide` / `npy_divmod`): the quotient of `a - fmod(a,
/// b)` by `b`, corrected down when the remainder's sign differs from `b`'s and rounded to the
/// nearest integer; a zero quotient takes the sign of `a / b`, and `x // 0` is `x / 0`.
pub fn float_floor_divide(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return a / b;
    }
    let m = a % b;
    let mut div = (a - m) / b;
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        div -= 1.0;
    }
    if div != 0.0 {
        let f = div.floor();
        if div - f > 0.5 {
            f + 1.0
        } else {
            f
        }
    } else {
        0.0f64.copysign(a / b)
    }
}

/// A reduction that folds the elements along some axes with one op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum of the elements (0 for none).
    Sum,
    /// The product of the elements (1 for none).
    Prod,
    /// The largest element.
    Max,
    /// The smallest element.
    Min,
    /// The index (i64) of the first largest of the reduced elements (NaN counts as largest).
    ArgMax,
    /// The index (i64) of the first smallest of the reduced elements.
    ArgMin,
    /// True if any element is non-zero.
    Any,
    /// True if every element is non-zero (true for none).
    All,
}

impl ReduceOp {
    /// Every reduction op, in declaration order.
    pub const ALL: [ReduceOp; 8] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::ArgMax,
        ReduceOp::ArgMin,
        ReduceOp::Any,
        ReduceOp::All,
    ];

    /// The op's name (`"sum"`, `"argmax"`, ...), as errors print it.
    pub fn name(self) -> &'static str {
        use ReduceOp::*;
        match self {
            Sum => "sum",
            Prod => "prod",
            Max => "max",
            Min => "min",
            ArgMax => "argmax",
            ArgMin => "argmin",
            Any => "any",
            All => "all",
        }
    }

    /// The result dtype (NumPy on 64-bit Linux): sums and products of unsigned integers widen
    /// to u64, of bool and signed integers to i64, floats keep theirs; max/min keep the
    /// input's; arg* give i64; any/all give bool.
    pub fn result_dtype(self, input: DType) -> DType {
        use ReduceOp::*;
        match self {
            Sum | Prod if input.is_complex() => input,
            Sum | Prod if input.is_unsigned_int() => DType::U64,
            Sum | Prod if !input.is_float() => DType::I64,
            Sum | Prod | Max | Min => input,
            ArgMax | ArgMin => DType::I64,
            Any | All => DType::Bool,
        }
    }
}
