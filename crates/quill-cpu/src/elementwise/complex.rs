//! Complex elementwise kernels (complex64 and complex128), computed in the element's own
//! precision as NumPy's complex loops are: arithmetic (division by Smith's method, which
//! neither overflows nor underflows where the quotient is representable; integer powers by
//! repeated multiplication, exact where NumPy's are), `==` / `!=`, and the unary functions
//! `UnaryOp::takes_complex` admits, with NumPy's branch cuts (those of C99's `c*` functions,
//! which num-complex follows). `abs` is `hypot(re, im)`, real.

use super::binary::{BinaryKernel, Sink};
use super::unary::{run, UnaryKernel};
use crate::CpuStorage;
use num_complex::Complex;
use quill_core::{BinaryOp, Element, Error, LoopPlan, Result, UnaryOp};

fn unsupported(op: &'static str, dtype: quill_core::DType) -> Error {
    Error::invalid(op, format!("not defined for complex dtype {dtype}"))
}

macro_rules! complex_kernels {
    ($f:ty, $div:ident, $pow:ident, $expm1:ident, $log1p:ident) => {
        /// `a / b` by Smith's algorithm (NumPy's): scales by the larger part of `b`.
        #[inline(always)]
        fn $div(a: Complex<$f>, b: Complex<$f>) -> Complex<$f> {
            let (br, bi) = (b.re, b.im);
            if br.abs() >= bi.abs() {
                if br == 0.0 && bi == 0.0 {
                    // x / 0: each part divided by zero (inf or NaN), as NumPy.
                    return Complex::new(a.re / br.abs(), a.im / br.abs());
                }
                let r = bi / br;
                let d = br + bi * r;
                Complex::new((a.re + a.im * r) / d, (a.im - a.re * r) / d)
            } else {
                let r = br / bi;
                let d = br * r + bi;
                Complex::new((a.re * r + a.im) / d, (a.im * r - a.re) / d)
            }
        }

        /// `a ** b`: 1 for b = 0, repeated multiplication for small integer b (exact where
        /// NumPy's is), 0 for a = 0 and real positive b, else `exp(b ln a)`.
        #[inline(always)]
        fn $pow(a: Complex<$f>, b: Complex<$f>) -> Complex<$f> {
            let one = Complex::new(1.0, 0.0);
            if b.re == 0.0 && b.im == 0.0 {
                return one;
            }
            if a.re == 0.0 && a.im == 0.0 {
                return if b.im == 0.0 && b.re > 0.0 {
                    Complex::new(0.0, 0.0)
                } else {
                    Complex::new(<$f>::NAN, <$f>::NAN)
                };
            }
            if b.im == 0.0 && b.re.fract() == 0.0 && b.re.abs() <= 100.0 {
                let (mut n, mut base, mut acc) = (b.re.abs() as u32, a, one);
                while n > 0 {
                    if n & 1 == 1 {
                        acc *= base;
                    }
                    base *= base;
                    n >>= 1;
                }
                return if b.re < 0.0 { $div(one, acc) } else { acc };
            }
            a.powc(b)
        }

        /// `e^z - 1` without the cancellation of `exp(z) - 1` near 0: the real part is
        /// `expm1(x) cos y - 2 sin^2(y / 2)`.
        #[inline(always)]
        fn $expm1(z: Complex<$f>) -> Complex<$f> {
            let h = (z.im * 0.5).sin();
            Complex::new(
                z.re.exp_m1() * z.im.cos() - 2.0 * h * h,
                z.re.exp() * z.im.sin(),
            )
        }

        /// `ln(1 + z)` accurate near 0: `log1p` of `|1 + z|^2 - 1 = 2x + x^2 + y^2`, halved.
        #[inline(always)]
        fn $log1p(z: Complex<$f>) -> Complex<$f> {
            let (x, y) = (z.re, z.im);
            if x.abs() < 0.5 && y.abs() < 0.5 {
                Complex::new(0.5 * (x * (2.0 + x) + y * y).ln_1p(), y.atan2(1.0 + x))
            } else {
                (Complex::new(1.0, 0.0) + z).ln()
            }
        }

        impl UnaryKernel for Complex<$f> {
            fn unary(
                op: UnaryOp,
                a: &[Self],
                plan: &LoopPlan,
                out: &mut CpuStorage,
                at: usize,
            ) -> Result<()> {
                use UnaryOp::*;
                type C = Complex<$f>;
                let one = C::new(1.0, 0.0);
                match op {
                    Neg => run(a, plan, out, at, |z: C| -z),
                    Abs => run(a, plan, out, at, |z: C| z.norm()),
                    // NumPy 2: z / |z|, and 0 at 0.
                    Sign => run(a, plan, out, at, |z: C| {
                        let r = z.norm();
                        if r == 0.0 {
                            C::new(0.0, 0.0)
                        } else {
                            C::new(z.re / r, z.im / r)
                        }
                    }),
                    Square => run(a, plan, out, at, |z: C| z * z),
                    Exp => run(a, plan, out, at, |z: C| z.exp()),
                    Exp2 => run(a, plan, out, at, |z: C| {
                        (z * std::f64::consts::LN_2 as $f).exp()
                    }),
                    Expm1 => run(a, plan, out, at, $expm1),
                    Log => run(a, plan, out, at, |z: C| z.ln()),
                    Log2 => run(a, plan, out, at, |z: C| {
                        z.ln() / std::f64::consts::LN_2 as $f
                    }),
                    Log10 => run(a, plan, out, at, |z: C| {
                        z.ln() / std::f64::consts::LN_10 as $f
                    }),
                    Log1p => run(a, plan, out, at, $log1p),
                    Sqrt => run(a, plan, out, at, |z: C| z.sqrt()),
                    Rsqrt => run(a, plan, out, at, move |z: C| $div(one, z.sqrt())),
                    Reciprocal => run(a, plan, out, at, move |z: C| $div(one, z)),
                    Sin => run(a, plan, out, at, |z: C| z.sin()),
                    Cos => run(a, plan, out, at, |z: C| z.cos()),
                    Tan => run(a, plan, out, at, |z: C| z.tan()),
                    Tanh => run(a, plan, out, at, |z: C| z.tanh()),
                    Sinh => run(a, plan, out, at, |z: C| z.sinh()),
                    Cosh => run(a, plan, out, at, |z: C| z.cosh()),
                    Asin => run(a, plan, out, at, |z: C| z.asin()),
                    Acos => run(a, plan, out, at, |z: C| z.acos()),
                    Atan => run(a, plan, out, at, |z: C| z.atan()),
                    Asinh => run(a, plan, out, at, |z: C| z.asinh()),
                    Acosh => run(a, plan, out, at, |z: C| z.acosh()),
                    Atanh => run(a, plan, out, at, |z: C| z.atanh()),
                    LogicalNot => run(a, plan, out, at, |z: C| z.re == 0.0 && z.im == 0.0),
                    IsNan => run(a, plan, out, at, |z: C| z.re.is_nan() || z.im.is_nan()),
                    IsInf => run(a, plan, out, at, |z: C| {
                        z.re.is_infinite() || z.im.is_infinite()
                    }),
                    IsFinite => run(a, plan, out, at, |z: C| {
                        z.re.is_finite() && z.im.is_finite()
                    }),
                    _ => return Err(unsupported(op.name(), <C as Element>::DTYPE)),
                }
                Ok(())
            }
        }

        impl BinaryKernel for Complex<$f> {
            fn binary(op: BinaryOp, sink: &mut impl Sink<Self>) -> Result<()> {
                use BinaryOp::*;
                type C = Complex<$f>;
                match op {
                    Add => sink.same(|x: C, y: C| x + y),
                    Sub => sink.same(|x: C, y: C| x - y),
                    Mul => sink.same(|x: C, y: C| x * y),
                    Div => sink.same($div),
                    Pow => sink.same($pow),
                    Eq => sink.test(|x: C, y: C| x == y),
                    Ne => sink.test(|x: C, y: C| x != y),
                    _ => return Err(unsupported(op.name(), <C as Element>::DTYPE)),
                }
                Ok(())
            }
        }
    };
}

complex_kernels!(f32, div32, pow32, expm1_32, log1p_32);
complex_kernels!(f64, div64, pow64, expm1_64, log1p_64);
