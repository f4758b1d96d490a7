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
use quill_core::{BinaryOp, DType, Element, Error, Layout, LoopPlan, Result, UnaryOp};

/// A part of a complex number, or its conjugate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The real part (a real result).
    Real,
    /// The imaginary part (a real result).
    Imag,
    /// `re - i im` (a complex result).
    Conj,
    /// `atan2(im, re)` (a real result).
    Angle,
}

/// `re + i im` elementwise into a fresh contiguous complex buffer: `re` and `im` (through
/// `lr`, `li`, one broadcast shape, any strides) are both f32 (giving complex64) or both f64.
pub fn combine(
    (re, lr): (&CpuStorage, &Layout),
    (im, li): (&CpuStorage, &Layout),
) -> Result<CpuStorage> {
    use super::walk::{for_each_run, map2};
    let plan = LoopPlan::new(&[&Layout::contiguous(lr.shape())?, lr, li]);
    let n = lr.numel();
    macro_rules! go {
        ($r:expr, $i:expr, $f:ty, $c:ident) => {{
            let mut out = CpuStorage::for_overwrite("complex", DType::$c, n)?;
            let o = <Complex<$f> as crate::CpuElement>::slice_mut(&mut out)
                .ok_or_else(|| Error::invalid("complex", "internal: output dtype"))?;
            let ab: (&[$f], &[$f]) = ($r, $i);
            for_each_run(o, &plan, |o, offs, sts| {
                map2(o, ab, offs, sts, |x, y| Complex::new(x, y))
            });
            Ok(out)
        }};
    }
    match (re, im) {
        (CpuStorage::F32(r), CpuStorage::F32(i)) => go!(r, i, f32, C64),
        (CpuStorage::F64(r), CpuStorage::F64(i)) => go!(r, i, f64, C128),
        (r, i) => Err(Error::invalid(
            "complex",
            format!(
                "internal: parts of {} and {}, not both f32 or f64",
                r.dtype(),
                i.dtype()
            ),
        )),
    }
}

/// `part` of every element of the complex `src` seen through `l` (any strides) into a fresh
/// contiguous buffer: real parts are f32 for complex64 and f64 for complex128.
pub fn part(part: Part, src: &CpuStorage, l: &Layout) -> Result<CpuStorage> {
    let plan = LoopPlan::new(&[&Layout::contiguous(l.shape())?, l]);
    let n = l.numel();
    macro_rules! go {
        ($a:expr, $f:ty, $c:ident) => {{
            let real = if part == Part::Conj {
                DType::$c
            } else {
                <$f as Element>::DTYPE
            };
            let mut out = CpuStorage::for_overwrite("complex part", real, n)?;
            match part {
                Part::Real => run($a, &plan, &mut out, 0, |z: Complex<$f>| z.re),
                Part::Imag => run($a, &plan, &mut out, 0, |z: Complex<$f>| z.im),
                Part::Conj => run($a, &plan, &mut out, 0, |z: Complex<$f>| z.conj()),
                Part::Angle => run($a, &plan, &mut out, 0, |z: Complex<$f>| z.im.atan2(z.re)),
            }
            Ok(out)
        }};
    }
    match src {
        CpuStorage::C64(a) => go!(a, f32, C64),
        CpuStorage::C128(a) => go!(a, f64, C128),
        other => Err(Error::invalid(
            "complex part",
            format!("takes a complex array, got {}", other.dtype()),
        )),
    }
}

fn unsupported(op: &'static str, dtype: quill_core::DType) -> Error {
    Error::invalid(op, format!("not defined for complex dtype {dtype}"))
}

macro_rules! complex_kernels {
    ($f:ty, $div:ident, $pow:ident, $expm1:ident, $log1p:ident, $m:ident) => {
        /// The inverse functions by Kahan's formulas ("Branch cuts for complex elementary
        /// functions", 1987), which keep the sign of a zero imaginary part and so put each
        /// point of a cut on the side C99 and NumPy put it (num-complex's logarithm forms do
        /// not). `1 - z` is `(1 - x, -y)`, never a complex subtraction, for the same reason.
        mod $m {
            use num_complex::Complex;
            type C = Complex<$f>;

            /// The principal square root, C99's `csqrt` (num-complex's polar form loses the
            /// digits of a small part): `t = sqrt((|x| + |z|) / 2)`, then `(t, y / 2t)` for
            /// `x >= 0` and `(|y| / 2t, copysign(t, y))` otherwise; zeros keep their signs.
            pub fn sqrt(z: C) -> C {
                let (x, y) = (z.re, z.im);
                if y.is_infinite() {
                    return C::new(<$f>::INFINITY, y);
                }
                if x.is_nan() || y.is_nan() {
                    return if x == <$f>::INFINITY {
                        C::new(x, y)
                    } else {
                        C::new(<$f>::NAN, <$f>::NAN)
                    };
                }
                if x.is_infinite() {
                    return if x > 0.0 {
                        C::new(x, (0.0 as $f).copysign(y))
                    } else {
                        C::new(0.0, <$f>::INFINITY.copysign(y))
                    };
                }
                if x == 0.0 && y == 0.0 {
                    return C::new(0.0, y);
                }
                // Halves first: |x| + |z| would overflow near the largest values.
                let t = (0.5 * x.abs() + 0.5 * x.hypot(y)).sqrt();
                if x >= 0.0 {
                    C::new(t, y / (2.0 * t))
                } else {
                    C::new(y.abs() / (2.0 * t), t.copysign(y))
                }
            }

            fn one_minus(z: C) -> C {
                C::new(1.0 - z.re, -z.im)
            }
            fn one_plus(z: C) -> C {
                C::new(1.0 + z.re, z.im)
            }
            /// `-i z` and `i z` as component swaps (a multiplication would add signed zeros).
            fn times_minus_i(z: C) -> C {
                C::new(z.im, -z.re)
            }
            fn times_i(z: C) -> C {
                C::new(-z.im, z.re)
            }

            pub fn asin(z: C) -> C {
                let (a, b) = (sqrt(one_minus(z)), sqrt(one_plus(z)));
                C::new(
                    (z.re / (a.re * b.re - a.im * b.im)).atan(),
                    (a.re * b.im - a.im * b.re).asinh(),
                )
            }

            pub fn acos(z: C) -> C {
                let (a, b) = (sqrt(one_minus(z)), sqrt(one_plus(z)));
                C::new(
                    2.0 * (a.re / b.re).atan(),
                    (b.re * a.im - b.im * a.re).asinh(),
                )
            }

            pub fn acosh(z: C) -> C {
                let a = sqrt(C::new(z.re - 1.0, z.im));
                let b = sqrt(C::new(z.re + 1.0, z.im));
                C::new(
                    (a.re * b.re + a.im * b.im).asinh(),
                    2.0 * (a.im / b.re).atan(),
                )
            }

            /// `asinh(z) = -i asin(i z)`.
            pub fn asinh(z: C) -> C {
                times_minus_i(asin(times_i(z)))
            }

            /// `atanh(z)`: real part `log1p(4x / ((1 - x)^2 + y^2)) / 4`, imaginary part
            /// `atan2(2y, (1 - x)(1 + x) - y^2) / 2`.
            pub fn atanh(z: C) -> C {
                let (x, y) = (z.re, z.im);
                let d = (1.0 - x) * (1.0 - x) + y * y;
                C::new(
                    0.25 * (4.0 * x / d).ln_1p(),
                    0.5 * (2.0 * y).atan2((1.0 - x) * (1.0 + x) - y * y),
                )
            }

            /// `atan(z) = -i atanh(i z)`.
            pub fn atan(z: C) -> C {
                times_minus_i(atanh(times_i(z)))
            }
        }

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
                // 1 + z without adding to the imaginary part, whose signed zero picks the side
                // of the cut (-0.0 + 0.0 would be +0.0).
                Complex::new(1.0 + z.re, z.im).ln()
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
                    Sqrt => run(a, plan, out, at, $m::sqrt),
                    Rsqrt => run(a, plan, out, at, move |z: C| $div(one, $m::sqrt(z))),
                    Reciprocal => run(a, plan, out, at, move |z: C| $div(one, z)),
                    Sin => run(a, plan, out, at, |z: C| z.sin()),
                    Cos => run(a, plan, out, at, |z: C| z.cos()),
                    Tan => run(a, plan, out, at, |z: C| z.tan()),
                    Tanh => run(a, plan, out, at, |z: C| z.tanh()),
                    Sinh => run(a, plan, out, at, |z: C| z.sinh()),
                    Cosh => run(a, plan, out, at, |z: C| z.cosh()),
                    Asin => run(a, plan, out, at, $m::asin),
                    Acos => run(a, plan, out, at, $m::acos),
                    Atan => run(a, plan, out, at, $m::atan),
                    Asinh => run(a, plan, out, at, $m::asinh),
                    Acosh => run(a, plan, out, at, $m::acosh),
                    Atanh => run(a, plan, out, at, $m::atanh),
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

complex_kernels!(f32, div32, pow32, expm1_32, log1p_32, inverse32);
complex_kernels!(f64, div64, pow64, expm1_64, log1p_64, inverse64);
