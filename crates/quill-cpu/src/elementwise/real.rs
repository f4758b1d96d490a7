//! `Real`: the float arithmetic the kernels compute in (f32 for f32, f16 and bf16; f64 for
//! f64), and `FloatElement`, which maps each float dtype to its `Real`. f32's exp, log, tanh
//! and sigmoid are the vectorisable ones of `math`; the rest come from std and libm.

use super::math;
use half::{bf16, f16};
use quill_core::UnaryOp;

/// The arithmetic a float kernel computes in (f32 or f64): every float `UnaryOp` and
/// `BinaryOp` is written once against it, and each method inlines into the SIMD loop.
pub trait Real: Copy + Send + Sync + PartialOrd + std::fmt::Debug {
    /// `op` for every float `UnaryOp` (predicates have kernels of their own).
    fn f(self, op: UnaryOp) -> Self;
    /// IEEE `self + b` (`BinaryOp::Add`).
    fn add(self, b: Self) -> Self;
    /// IEEE `self - b` (`BinaryOp::Sub`).
    fn sub(self, b: Self) -> Self;
    /// IEEE `self * b` (`BinaryOp::Mul`).
    fn mul(self, b: Self) -> Self;
    /// IEEE `self / b` (`BinaryOp::Div`): a zero divisor gives +-inf or NaN, never an error.
    fn div(self, b: Self) -> Self;
    /// `self` to the power `b`, as std's `powf` (NaN for a negative base and a non-integral
    /// exponent).
    fn powf(self, b: Self) -> Self;
    /// The angle of the point `(b, self)` in radians, in `[-pi, pi]`, as std's `atan2`.
    fn atan2(self, b: Self) -> Self;
    /// NumPy's `remainder`: the result has the sign of the divisor `b`; a zero divisor gives
    /// NaN.
    fn rem_floor(self, b: Self) -> Self;
    /// NumPy's `floor_divide`, consistent with [`Real::rem_floor`]; a zero divisor gives
    /// `self / b` (+-inf or NaN).
    fn floor_div(self, b: Self) -> Self;
    /// For `UnaryOp::IsNan`.
    fn is_nan(self) -> bool;
    /// For `UnaryOp::IsInf`: +inf or -inf.
    fn is_infinite(self) -> bool;
    /// For `UnaryOp::SignBit`: true for -0.0 and for NaNs with the sign bit set.
    fn is_sign_negative(self) -> bool;
    /// For `UnaryOp::IsFinite`: neither infinite nor NaN.
    fn is_finite(self) -> bool;
    /// For `UnaryOp::LogicalNot` of a float: true for +0.0 and -0.0 only (NaN is truthy).
    fn is_zero(self) -> bool;
}

macro_rules! real {
    ($t:ident, $exp:expr, $ln:expr, $tanh:expr, $sigmoid:expr, $erf:expr, $erfc:expr) => {
        impl Real for $t {
            #[inline(always)]
            fn f(self, op: UnaryOp) -> $t {
                let x = self;
                match op {
                    UnaryOp::Neg => -x,
                    UnaryOp::Abs => x.abs(),
                    UnaryOp::Sign => {
                        if x > 0.0 {
                            1.0
                        } else if x < 0.0 {
                            -1.0
                        } else {
                            // +0 for either zero (NumPy, PyTorch, the Array API); NaN stays NaN.
                            x + 0.0
                        }
                    }
                    UnaryOp::Exp => $exp(x),
                    UnaryOp::Exp2 => x.exp2(),
                    UnaryOp::Log => $ln(x),
                    UnaryOp::Log2 => x.log2(),
                    UnaryOp::Log10 => x.log10(),
                    UnaryOp::Log1p => x.ln_1p(),
                    UnaryOp::Expm1 => x.exp_m1(),
                    UnaryOp::Sqrt => x.sqrt(),
                    UnaryOp::Rsqrt => 1.0 / x.sqrt(),
                    UnaryOp::Square => x * x,
                    UnaryOp::Reciprocal => 1.0 / x,
                    UnaryOp::Sin => x.sin(),
                    UnaryOp::Cos => x.cos(),
                    UnaryOp::Tan => x.tan(),
                    UnaryOp::Tanh => $tanh(x),
                    // In f64: std's f32 versions lose digits near the edges of their domains.
                    UnaryOp::Asin => (x as f64).asin() as $t,
                    UnaryOp::Acos => (x as f64).acos() as $t,
                    UnaryOp::Atan => (x as f64).atan() as $t,
                    UnaryOp::Sinh => (x as f64).sinh() as $t,
                    UnaryOp::Cosh => (x as f64).cosh() as $t,
                    UnaryOp::Asinh => (x as f64).asinh() as $t,
                    UnaryOp::Acosh => (x as f64).acosh() as $t,
                    UnaryOp::Atanh => (x as f64).atanh() as $t,
                    UnaryOp::Sigmoid => $sigmoid(x),
                    // NaN passes through, as PyTorch's relu.
                    UnaryOp::Relu => {
                        if x < 0.0 {
                            0.0
                        } else {
                            x
                        }
                    }
                    // erfc keeps the relative accuracy where 1 + erf(x) would cancel (x << 0).
                    UnaryOp::Gelu => 0.5 * x * $erfc(-x * std::$t::consts::FRAC_1_SQRT_2),
                    // 0.5 (1 + tanh u) = sigmoid(2u), without tanh's cancellation near -1.
                    UnaryOp::GeluTanh => {
                        let k = std::$t::consts::FRAC_2_SQRT_PI * std::$t::consts::SQRT_2; // 2 sqrt(2 / pi)
                        x * $sigmoid(k * (x + 0.044715 * x * x * x))
                    }
                    UnaryOp::Erf => $erf(x),
                    UnaryOp::Floor => x.floor(),
                    UnaryOp::Ceil => x.ceil(),
                    UnaryOp::Round => x.round_ties_even(),
                    UnaryOp::Trunc => x.trunc(),
                    // Never passed: predicates return bool and run their own kernels.
                    UnaryOp::LogicalNot
                    | UnaryOp::IsNan
                    | UnaryOp::IsInf
                    | UnaryOp::IsFinite
                    | UnaryOp::SignBit => x,
                }
            }
            #[inline(always)]
            fn add(self, b: Self) -> Self {
                self + b
            }
            #[inline(always)]
            fn sub(self, b: Self) -> Self {
                self - b
            }
            #[inline(always)]
            fn mul(self, b: Self) -> Self {
                self * b
            }
            #[inline(always)]
            fn div(self, b: Self) -> Self {
                self / b
            }
            #[inline(always)]
            fn powf(self, b: Self) -> Self {
                self.powf(b)
            }
            #[inline(always)]
            fn atan2(self, b: Self) -> Self {
                self.atan2(b)
            }
            /// NumPy's `remainder`: the sign of the divisor; `x % 0` is NaN.
            #[inline(always)]
            fn rem_floor(self, b: Self) -> Self {
                if b == 0.0 {
                    return $t::NAN;
                }
                let m = self % b;
                if m != 0.0 {
                    if (b < 0.0) != (m < 0.0) {
                        m + b
                    } else {
                        m
                    }
                } else {
                    (0.0 as $t).copysign(b)
                }
            }
            /// NumPy's `floor_divide` (`npy_floor_divide`), as `quill_core::ops::float_floor_divide`.
            #[inline(always)]
            fn floor_div(self, b: Self) -> Self {
                if b == 0.0 {
                    return self / b;
                }
                let m = self % b;
                let mut div = (self - m) / b;
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
                    (0.0 as $t).copysign(self / b)
                }
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                self.is_nan()
            }
            #[inline(always)]
            fn is_infinite(self) -> bool {
                self.is_infinite()
            }
            #[inline(always)]
            fn is_sign_negative(self) -> bool {
                self.is_sign_negative()
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                self.is_finite()
            }
            #[inline(always)]
            fn is_zero(self) -> bool {
                self == 0.0
            }
        }
    };
}

real!(
    f32,
    math::exp,
    math::ln,
    math::tanh,
    math::sigmoid,
    libm::erff,
    libm::erfcf
);
real!(
    f64,
    f64::exp,
    f64::ln,
    f64::tanh,
    sigmoid64,
    libm::erf,
    libm::erfc
);

#[inline(always)]
fn sigmoid64(x: f64) -> f64 {
    // exp of -|x| never overflows (see math::sigmoid).
    let e = (-x.abs()).exp();
    if x >= 0.0 {
        1.0 / (1.0 + e)
    } else {
        e / (1.0 + e)
    }
}

/// A float dtype and the `Real` it computes in.
pub trait FloatElement: crate::CpuElement {
    /// f32 for f32, f16 and bf16 (half-precision math rounds once, on the way back); f64 for
    /// f64.
    type C: Real;
    /// Widens to `C`, exactly.
    fn up(self) -> Self::C;
    /// Rounds a result in `C` back to this type, to nearest (ties to even).
    fn down(c: Self::C) -> Self;
}

macro_rules! float_element {
    ($t:ty, $c:ty, $up:expr, $down:expr) => {
        impl FloatElement for $t {
            type C = $c;
            #[inline(always)]
            fn up(self) -> $c {
                $up(self)
            }
            #[inline(always)]
            fn down(c: $c) -> $t {
                $down(c)
            }
        }
    };
}
float_element!(f32, f32, |x| x, |c| c);
float_element!(f64, f64, |x| x, |c| c);
float_element!(f16, f32, f16::to_f32, f16::from_f32);
float_element!(bf16, f32, bf16::to_f32, bf16::from_f32);
