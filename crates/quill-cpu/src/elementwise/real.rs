//! `Real`: the float arithmetic the kernels compute in (f32 for f32, f16 and bf16; f64 for
//! f64), and `FloatElement`, which maps each float dtype to its `Real`. f32's exp, log, tanh
//! and sigmoid are the vectorisable ones of `math`; the rest come from std and libm.

use super::math;
use half::{bf16, f16};

pub trait Real: Copy + Send + Sync + PartialOrd + std::fmt::Debug {
    fn f(self, op: RealFn) -> Self;
    fn add(self, b: Self) -> Self;
    fn sub(self, b: Self) -> Self;
    fn mul(self, b: Self) -> Self;
    fn div(self, b: Self) -> Self;
    fn powf(self, b: Self) -> Self;
    fn atan2(self, b: Self) -> Self;
    fn rem_floor(self, b: Self) -> Self;
    fn is_nan(self) -> bool;
    fn is_infinite(self) -> bool;
    fn is_finite(self) -> bool;
    fn is_zero(self) -> bool;
}

/// The float functions of one argument, dispatched once per kernel call (the match on a
/// constant inlines away inside each monomorphised loop).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RealFn {
    Neg,
    Abs,
    Sign,
    Exp,
    Exp2,
    Ln,
    Log2,
    Ln1p,
    Expm1,
    Sqrt,
    Rsqrt,
    Square,
    Recip,
    Sin,
    Cos,
    Tan,
    Tanh,
    Sigmoid,
    Relu,
    Gelu,
    GeluTanh,
    Erf,
    Floor,
    Ceil,
    Round,
    Trunc,
}

macro_rules! real {
    ($t:ident, $exp:expr, $ln:expr, $tanh:expr, $sigmoid:expr, $erf:expr, $erfc:expr) => {
        impl Real for $t {
            #[inline(always)]
            fn f(self, op: RealFn) -> $t {
                let x = self;
                match op {
                    RealFn::Neg => -x,
                    RealFn::Abs => x.abs(),
                    RealFn::Sign => {
                        if x > 0.0 {
                            1.0
                        } else if x < 0.0 {
                            -1.0
                        } else {
                            // 0 stays 0 (with its sign, as NumPy), NaN stays NaN.
                            x
                        }
                    }
                    RealFn::Exp => $exp(x),
                    RealFn::Exp2 => x.exp2(),
                    RealFn::Ln => $ln(x),
                    RealFn::Log2 => x.log2(),
                    RealFn::Ln1p => x.ln_1p(),
                    RealFn::Expm1 => x.exp_m1(),
                    RealFn::Sqrt => x.sqrt(),
                    RealFn::Rsqrt => 1.0 / x.sqrt(),
                    RealFn::Square => x * x,
                    RealFn::Recip => 1.0 / x,
                    RealFn::Sin => x.sin(),
                    RealFn::Cos => x.cos(),
                    RealFn::Tan => x.tan(),
                    RealFn::Tanh => $tanh(x),
                    RealFn::Sigmoid => $sigmoid(x),
                    // NaN passes through, as PyTorch's relu.
                    RealFn::Relu => {
                        if x < 0.0 {
                            0.0
                        } else {
                            x
                        }
                    }
                    // erfc keeps the relative accuracy where 1 + erf(x) would cancel (x << 0).
                    RealFn::Gelu => 0.5 * x * $erfc(-x * std::$t::consts::FRAC_1_SQRT_2),
                    // 0.5 (1 + tanh u) = sigmoid(2u), without tanh's cancellation near -1.
                    RealFn::GeluTanh => {
                        let k = std::$t::consts::FRAC_2_SQRT_PI * std::$t::consts::SQRT_2; // 2 sqrt(2 / pi)
                        x * $sigmoid(k * (x + 0.044715 * x * x * x))
                    }
                    RealFn::Erf => $erf(x),
                    RealFn::Floor => x.floor(),
                    RealFn::Ceil => x.ceil(),
                    RealFn::Round => x.round_ties_even(),
                    RealFn::Trunc => x.trunc(),
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
            #[inline(always)]
            fn is_nan(self) -> bool {
                self.is_nan()
            }
            #[inline(always)]
            fn is_infinite(self) -> bool {
                self.is_infinite()
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
    type C: Real;
    fn up(self) -> Self::C;
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
