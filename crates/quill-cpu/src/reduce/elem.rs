//! The numeric vocabulary of the reduction kernels: `RElem` maps each stored element type to its
//! accumulators (NumPy's rules: sums of signed ints and bool widen to i64, of unsigned to u64, f16/bf16 accumulate in f32,
//! means and variances of ints are f64), and `Num` / `Flt` are the few operations the kernels
//! need on those accumulators.

use super::fast;
use crate::CpuElement;
use half::{bf16, f16};

/// An accumulator: f32, f64 or i64. Integer arithmetic wraps, as NumPy's does.
pub trait Num: Copy + Send + Sync + PartialOrd + std::fmt::Debug + 'static {
    const ZERO: Self;
    const ONE: Self;
    /// The exact identity of `add`: -0.0 for floats (`-0.0 + x == x` for every x, signed zeros
    /// included, so a sum of -0.0s stays -0.0 as NumPy's).
    const ADD_ID: Self;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
}

/// A floating accumulator (for mean, var and logsumexp).
pub trait Flt: Num {
    fn from_usize(n: usize) -> Self;
    fn sub(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn is_finite(self) -> bool;
}

impl Num for i64 {
    const ZERO: i64 = 0;
    const ONE: i64 = 1;
    const ADD_ID: i64 = 0;
    #[inline(always)]
    fn add(self, o: i64) -> i64 {
        self.wrapping_add(o)
    }
    #[inline(always)]
    fn mul(self, o: i64) -> i64 {
        self.wrapping_mul(o)
    }
}

macro_rules! float_acc {
    ($t:ty) => {
        impl Num for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            const ADD_ID: $t = -0.0;
            #[inline(always)]
            fn add(self, o: $t) -> $t {
                self + o
            }
            #[inline(always)]
            fn mul(self, o: $t) -> $t {
                self * o
            }
        }
        impl Flt for $t {
            #[inline(always)]
            fn from_usize(n: usize) -> $t {
                n as $t
            }
            #[inline(always)]
            fn sub(self, o: $t) -> $t {
                self - o
            }
            #[inline(always)]
            fn div(self, o: $t) -> $t {
                self / o
            }
            #[inline(always)]
            fn exp(self) -> $t {
                <$t>::exp(self)
            }
            #[inline(always)]
            fn ln(self) -> $t {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn sqrt(self) -> $t {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
        }
    };
}
float_acc!(f32);
float_acc!(f64);

/// An element type the reductions accept (every dtype).
pub trait RElem: CpuElement + PartialOrd {
    /// Sum / product accumulator.
    type S: Num;
    /// Sum / product result (the dtype of `ReduceOp::Sum.result_dtype`).
    type SumOut: CpuElement;
    /// Float accumulator of mean / var / logsumexp.
    type F: Flt;
    /// Their result: floats keep their dtype, the rest give f64.
    type FOut: CpuElement;
    /// The identities of max and min (an infinity for floats).
    const LOWEST: Self;
    const HIGHEST: Self;
    fn to_s(self) -> Self::S;
    fn s_out(s: Self::S) -> Self::SumOut;
    fn to_f(self) -> Self::F;
    fn f_out(f: Self::F) -> Self::FOut;
    /// True for every value but zero (NaN included, as `bool(nan)` in Python).
    fn truthy(self) -> bool;
    /// A contiguous run's sum in `S` / in `F`, max and min through `fast`'s explicit SIMD, where
    /// this type has it (f32, f64) and the CPU too; `None` sends the caller to the generic fold.
    #[inline(always)]
    fn sum_run(_: &[Self]) -> Option<Self::S> {
        None
    }
    #[inline(always)]
    fn f_sum_run(_: &[Self]) -> Option<Self::F> {
        None
    }
    #[inline(always)]
    fn max_run(_: &[Self]) -> Option<Self> {
        None
    }
    #[inline(always)]
    fn min_run(_: &[Self]) -> Option<Self> {
        None
    }
    /// NaN test that compiles to nothing for integers.
    #[allow(clippy::eq_op)]
    #[inline(always)]
    fn isnan(self) -> bool {
        self != self
    }
}

macro_rules! relem {
    ($t:ty, $s:ty, $so:ty, $f:ty, $fo:ty, $lo:expr, $hi:expr,
     |$x:ident| $to_s:expr, |$a:ident| $s_out:expr, |$y:ident| $to_f:expr, |$b:ident| $f_out:expr,
     |$z:ident| $truthy:expr $(, fast($sum:path, $max:path, $min:path))?) => {
        impl RElem for $t {
            type S = $s;
            type SumOut = $so;
            type F = $f;
            type FOut = $fo;
            const LOWEST: $t = $lo;
            const HIGHEST: $t = $hi;
            #[inline(always)]
            fn to_s(self) -> $s {
                let $x = self;
                $to_s
            }
            #[inline(always)]
            fn s_out($a: $s) -> $so {
                $s_out
            }
            #[inline(always)]
            fn to_f(self) -> $f {
                let $y = self;
                $to_f
            }
            #[inline(always)]
            fn f_out($b: $f) -> $fo {
                $f_out
            }
            #[inline(always)]
            fn truthy(self) -> bool {
                let $z = self;
                $truthy
            }
            $(
                #[inline(always)]
                fn sum_run(x: &[$t]) -> Option<$s> {
                    $sum(x)
                }
                #[inline(always)]
                fn f_sum_run(x: &[$t]) -> Option<$f> {
                    $sum(x)
                }
                #[inline(always)]
                fn max_run(x: &[$t]) -> Option<$t> {
                    $max(x)
                }
                #[inline(always)]
                fn min_run(x: &[$t]) -> Option<$t> {
                    $min(x)
                }
            )?
        }
    };
}

relem!(
    f32,
    f32,
    f32,
    f32,
    f32,
    f32::NEG_INFINITY,
    f32::INFINITY,
    |x| x,
    |a| a,
    |y| y,
    |b| b,
    |z| z != 0.0,
    fast(fast::sum_f32, fast::max_f32, fast::min_f32)
);
relem!(
    f64,
    f64,
    f64,
    f64,
    f64,
    f64::NEG_INFINITY,
    f64::INFINITY,
    |x| x,
    |a| a,
    |y| y,
    |b| b,
    |z| z != 0.0,
    fast(fast::sum_f64, fast::max_f64, fast::min_f64)
);
relem!(
    f16,
    f32,
    f16,
    f32,
    f16,
    f16::NEG_INFINITY,
    f16::INFINITY,
    |x| x.to_f32(),
    |a| f16::from_f32(a),
    |y| y.to_f32(),
    |b| f16::from_f32(b),
    |z| z.to_f32() != 0.0
);
relem!(
    bf16,
    f32,
    bf16,
    f32,
    bf16,
    bf16::NEG_INFINITY,
    bf16::INFINITY,
    |x| x.to_f32(),
    |a| bf16::from_f32(a),
    |y| y.to_f32(),
    |b| bf16::from_f32(b),
    |z| z.to_f32() != 0.0
);
/// The integer types: sums and products accumulate in wrapping i64 (`as i64` keeps u64's
/// bits) and come out as `$out`, i64 for signed types and u64 (NumPy's uint64) for unsigned
/// ones, whose low 64 bits are the same either way; means and variances are f64.
macro_rules! int_relem {
    ($($t:ty => $out:ty),* $(,)?) => {$(
        relem!(
            $t,
            i64,
            $out,
            f64,
            f64,
            <$t>::MIN,
            <$t>::MAX,
            |x| x as i64,
            |a| a as $out,
            |y| y as f64,
            |b| b,
            |z| z != 0
        );
    )*};
}
int_relem!(
    i8 => i64, i16 => i64, i32 => i64, i64 => i64,
    u8 => u64, u16 => u64, u32 => u64, u64 => u64,
);
relem!(
    bool,
    i64,
    i64,
    f64,
    f64,
    false,
    true,
    |x| x as i64,
    |a| a,
    |y| y as u8 as f64,
    |b| b,
    |z| z
);
