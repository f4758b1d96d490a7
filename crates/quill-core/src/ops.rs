//! The op vocabulary: every elementwise and reduction op as an enum value, with its name, the
//! dtype rule of its result, and a scalar reference implementation in f64 that tests (and the
//! fallback kernels) compare against. Kernels are chosen per op value, so adding an op touches
//! this file, one kernel table per backend and one autograd rule.

use crate::promote::promote_types;
use crate::{DType, Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Abs,
    Sign,
    Exp,
    Exp2,
    Log,
    Log2,
    Log1p,
    Expm1,
    Sqrt,
    Rsqrt,
    Square,
    Reciprocal,
    Sin,
    Cos,
    Tan,
    Tanh,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Sigmoid,
    Relu,
    /// Exact GELU: `x * Phi(x)` with the normal CDF through erf.
    Gelu,
    /// GELU's tanh approximation (PyTorch's `approximate="tanh"`).
    GeluTanh,
    Erf,
    Floor,
    Ceil,
    /// Round half to even, as NumPy's `round` / `rint`.
    Round,
    Trunc,
    LogicalNot,
    IsNan,
    IsInf,
    IsFinite,
    /// True where the sign bit is set: negatives, -0.0 and NaNs with the bit (Array API).
    SignBit,
}

/// How a unary op's result dtype follows from its input's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UnaryKind {
    /// Same dtype as the input (neg, abs, square, ...), for numbers; bool is rejected.
    SameNumeric,
    /// A float op: float inputs keep their dtype, integers and bool give f64 (NumPy).
    Float,
    /// Rounding: floats keep their dtype, integers are returned unchanged.
    Rounding,
    /// Always bool.
    Predicate,
}

impl UnaryOp {
    pub const ALL: [UnaryOp; 39] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sign,
        UnaryOp::Exp,
        UnaryOp::Exp2,
        UnaryOp::Log,
        UnaryOp::Log2,
        UnaryOp::Log1p,
        UnaryOp::Expm1,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Square,
        UnaryOp::Reciprocal,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tan,
        UnaryOp::Tanh,
        UnaryOp::Asin,
        UnaryOp::Acos,
        UnaryOp::Atan,
        UnaryOp::Sinh,
        UnaryOp::Cosh,
        UnaryOp::Asinh,
        UnaryOp::Acosh,
        UnaryOp::Atanh,
        UnaryOp::Sigmoid,
        UnaryOp::Relu,
        UnaryOp::Gelu,
        UnaryOp::GeluTanh,
        UnaryOp::Erf,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Round,
        UnaryOp::Trunc,
        UnaryOp::LogicalNot,
        UnaryOp::IsNan,
        UnaryOp::IsInf,
        UnaryOp::IsFinite,
        UnaryOp::SignBit,
    ];

    pub fn name(self) -> &'static str {
        use UnaryOp::*;
        match self {
            Neg => "neg",
            Abs => "abs",
            Sign => "sign",
            Exp => "exp",
            Exp2 => "exp2",
            Log => "log",
            Log2 => "log2",
            Log1p => "log1p",
            Expm1 => "expm1",
            Sqrt => "sqrt",
            Rsqrt => "rsqrt",
            Square => "square",
            Reciprocal => "reciprocal",
            Sin => "sin",
            Cos => "cos",
            Tan => "tan",
            Tanh => "tanh",
            Asin => "asin",
            Acos => "acos",
            Atan => "atan",
            Sinh => "sinh",
            Cosh => "cosh",
            Asinh => "asinh",
            Acosh => "acosh",
            Atanh => "atanh",
            Sigmoid => "sigmoid",
            Relu => "relu",
            Gelu => "gelu",
            GeluTanh => "gelu_tanh",
            Erf => "erf",
            Floor => "floor",
            Ceil => "ceil",
            Round => "round",
            Trunc => "trunc",
            LogicalNot => "logical_not",
            IsNan => "isnan",
            IsInf => "isinf",
            IsFinite => "isfinite",
            SignBit => "signbit",
        }
    }

    fn kind(self) -> UnaryKind {
        use UnaryOp::*;
        match self {
            Neg | Abs | Sign | Square | Relu => UnaryKind::SameNumeric,
            Floor | Ceil | Round | Trunc => UnaryKind::Rounding,
            LogicalNot | IsNan | IsInf | IsFinite | SignBit => UnaryKind::Predicate,
            _ => UnaryKind::Float,
        }
    }

    /// The dtype of `op(x)` for `x` of dtype `input` (NumPy's rules), or an error for a dtype the
    /// op does not accept.
    pub fn result_dtype(self, input: DType) -> Result<DType> {
        match self.kind() {
            UnaryKind::SameNumeric if input == DType::Bool => Err(Error::invalid(
                self.name(),
                "not defined for bool arrays; use logical_not, or astype to a number first",
            )),
            UnaryKind::SameNumeric | UnaryKind::Rounding => Ok(input),
            UnaryKind::Float if input.is_float() => Ok(input),
            UnaryKind::Float => Ok(DType::F64),
            UnaryKind::Predicate => Ok(DType::Bool),
        }
    }

    /// The dtype the kernel computes in: the result's, except predicates, which look at the
    /// input as it is.
    pub fn compute_dtype(self, input: DType) -> Result<DType> {
        match self.kind() {
            UnaryKind::Predicate => Ok(input),
            _ => self.result_dtype(input),
        }
    }

    /// The reference implementation, in f64 (bool as 0/1). Integer kernels that wrap (neg and
    /// abs of the minimum) differ from this only there.
    pub fn eval_f64(self, x: f64) -> f64 {
        use UnaryOp::*;
        let b = |v: bool| v as u8 as f64;
        match self {
            Neg => -x,
            Abs => x.abs(),
            Sign => {
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
            Exp => x.exp(),
            Exp2 => x.exp2(),
            Log => x.ln(),
            Log2 => x.log2(),
            Log1p => x.ln_1p(),
            Expm1 => x.exp_m1(),
            Sqrt => x.sqrt(),
            Rsqrt => 1.0 / x.sqrt(),
            Square => x * x,
            Reciprocal => 1.0 / x,
            Sin => x.sin(),
            Cos => x.cos(),
            Tan => x.tan(),
            Tanh => x.tanh(),
            Asin => x.asin(),
            Acos => x.acos(),
            Atan => x.atan(),
            Sinh => x.sinh(),
            Cosh => x.cosh(),
            Asinh => x.asinh(),
            Acosh => x.acosh(),
            Atanh => x.atanh(),
            // exp(-|x|) cannot overflow, so tiny results stay accurate for very negative x.
            Sigmoid => {
                let e = (-x.abs()).exp();
                if x >= 0.0 {
                    1.0 / (1.0 + e)
                } else {
                    e / (1.0 + e)
                }
            }
            Relu => {
                if x < 0.0 {
                    0.0
                } else {
                    x
                }
            }
            Gelu => 0.5 * x * libm::erfc(-x * std::f64::consts::FRAC_1_SQRT_2),
            GeluTanh => {
                let k = (2.0 / std::f64::consts::PI).sqrt();
                let u = 2.0 * k * (x + 0.044715 * x * x * x);
                // 0.5 (1 + tanh(u / 2)) written as the sigmoid, which does not cancel.
                x * UnaryOp::Sigmoid.eval_f64(u)
            }
            Erf => libm::erf(x),
            Floor => x.floor(),
            Ceil => x.ceil(),
            Round => x.round_ties_even(),
            Trunc => x.trunc(),
            LogicalNot => b(x == 0.0),
            IsNan => b(x.is_nan()),
            IsInf => b(x.is_infinite()),
            IsFinite => b(x.is_finite()),
            SignBit => b(x.is_sign_negative()),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Maximum,
    Minimum,
    /// Python's `%`: the result has the sign of the divisor (NumPy's `remainder`).
    Remainder,
    Atan2,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    LogicalAnd,
    LogicalOr,
    LogicalXor,
    BitAnd,
    BitOr,
    BitXor,
    /// `a << b`; shifts of the width or more (or negative) give 0, as NumPy.
    Shl,
    /// `a >> b`, arithmetic for signed types; shifts of the width or more give 0 or -1.
    Shr,
}

impl BinaryOp {
    pub const ALL: [BinaryOp; 23] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
        BinaryOp::Remainder,
        BinaryOp::Atan2,
        BinaryOp::Eq,
        BinaryOp::Ne,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
        BinaryOp::LogicalAnd,
        BinaryOp::LogicalOr,
        BinaryOp::LogicalXor,
        BinaryOp::BitAnd,
        BinaryOp::BitOr,
        BinaryOp::BitXor,
        BinaryOp::Shl,
        BinaryOp::Shr,
    ];

    pub fn name(self) -> &'static str {
        use BinaryOp::*;
        match self {
            Add => "add",
            Sub => "sub",
            Mul => "mul",
            Div => "div",
            Pow => "pow",
            Maximum => "maximum",
            Minimum => "minimum",
            Remainder => "remainder",
            Atan2 => "atan2",
            Eq => "eq",
            Ne => "ne",
            Lt => "lt",
            Le => "le",
            Gt => "gt",
            Ge => "ge",
            LogicalAnd => "logical_and",
            LogicalOr => "logical_or",
            LogicalXor => "logical_xor",
            BitAnd => "bitwise_and",
            BitOr => "bitwise_or",
            BitXor => "bitwise_xor",
            Shl => "bitwise_left_shift",
            Shr => "bitwise_right_shift",
        }
    }

    pub fn is_comparison(self) -> bool {
        use BinaryOp::*;
        matches!(self, Eq | Ne | Lt | Le | Gt | Ge)
    }

    pub fn is_logical(self) -> bool {
        use BinaryOp::*;
        matches!(self, LogicalAnd | LogicalOr | LogicalXor)
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
        match self {
            _ if self.is_logical() => Ok(DType::Bool),
            // Division and the transcendental ops are float ops: integers give f64, as NumPy.
            Div | Atan2 if !common.is_float() => Ok(DType::F64),
            Sub if common == DType::Bool => {
                bad("bool subtraction is not supported; use logical_xor")
            }
            Pow | Remainder if common == DType::Bool => bad("astype to a number first"),
            BitAnd | BitOr | BitXor | Shl | Shr if common.is_float() => {
                bad("bitwise ops take integers and bool")
            }
            Shl | Shr if common == DType::Bool => bad("shifts take integers; astype first"),
            _ => Ok(common),
        }
    }

    /// The dtype of the result: bool for comparisons and logical ops, else the compute dtype.
    pub fn result_dtype(self, lhs: DType, rhs: DType) -> Result<DType> {
        let c = self.compute_dtype(lhs, rhs)?;
        Ok(if self.is_comparison() { DType::Bool } else { c })
    }

    /// The reference implementation in f64 (bool as 0/1).
    pub fn eval_f64(self, a: f64, b: f64) -> f64 {
        use BinaryOp::*;
        let t = |v: bool| v as u8 as f64;
        match self {
            Add => a + b,
            Sub => a - b,
            Mul => a * b,
            Div => a / b,
            Pow => a.powf(b),
            // NaN propagates, as NumPy's maximum / minimum.
            Maximum => {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.max(b)
                }
            }
            Minimum => {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.min(b)
                }
            }
            Remainder => float_remainder(a, b),
            Atan2 => a.atan2(b),
            Eq => t(a == b),
            Ne => t(a != b),
            Lt => t(a < b),
            Le => t(a <= b),
            Gt => t(a > b),
            Ge => t(a >= b),
            LogicalAnd => t(a != 0.0 && b != 0.0),
            LogicalOr => t(a != 0.0 || b != 0.0),
            LogicalXor => t((a != 0.0) != (b != 0.0)),
            BitAnd => (a as i64 & b as i64) as f64,
            BitOr => (a as i64 | b as i64) as f64,
            BitXor => (a as i64 ^ b as i64) as f64,
            // The i64 reference; narrower types agree wherever the result fits them.
            Shl => {
                if (0.0..64.0).contains(&b) {
                    (a as i64).wrapping_shl(b as u32) as f64
                } else {
                    0.0
                }
            }
            Shr => {
                if (0.0..64.0).contains(&b) {
                    ((a as i64) >> b as u32) as f64
                } else if a < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
        }
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Prod,
    Max,
    Min,
    ArgMax,
    ArgMin,
    Any,
    All,
}

impl ReduceOp {
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

    /// The result dtype (NumPy on 64-bit Linux): sums and products of bool and integers widen
    /// to i64, floats keep theirs; max/min keep the input's; arg* give i64; any/all give bool.
    pub fn result_dtype(self, input: DType) -> DType {
        use ReduceOp::*;
        match self {
            Sum | Prod if !input.is_float() => DType::I64,
            Sum | Prod | Max | Min => input,
            ArgMax | ArgMin => DType::I64,
            Any | All => DType::Bool,
        }
    }
}
