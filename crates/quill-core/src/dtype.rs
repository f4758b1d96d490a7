//! Element types: the `DType` tag, the `Element` trait that ties a Rust type to its tag, and the
//! NumPy cast rules between every pair of types.
//!
//! Casts follow NumPy (C casts on x86_64): float to integer truncates toward zero; NaN, infinities
//! and values outside the target's range, which NumPy leaves undefined (with a warning), give what
//! x86 NumPy gives: the target's minimum for i32/i64, and for u8 the low byte of the i32 result
//! (so -1.0 -> 255 and 300.0 -> 44). Integer to integer wraps. Anything to bool is `x != 0`
//! (NaN -> true). bool to number is 0 or 1. Narrowing floats round to nearest even; overflow gives inf.

use half::{bf16, f16};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    F64,
    F16,
    BF16,
    I32,
    I64,
    U8,
    Bool,
}

impl DType {
    pub const ALL: [DType; 8] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::Bool,
    ];

    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::U8 | DType::Bool => 1,
        }
    }
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }
    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64 | DType::U8)
    }
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }
    /// Parses the names `name()` gives, plus NumPy's (`float32`, `int64`, `uint8`, ...).
    pub fn parse(s: &str) -> Option<DType> {
        Some(match s {
            "f32" | "float32" => DType::F32,
            "f64" | "float64" => DType::F64,
            "f16" | "float16" => DType::F16,
            "bf16" | "bfloat16" => DType::BF16,
            "i32" | "int32" => DType::I32,
            "i64" | "int64" => DType::I64,
            "u8" | "uint8" => DType::U8,
            "bool" => DType::Bool,
            _ => return None,
        })
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A value of any dtype, wide enough to carry each exactly: the hub that casts go through.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    F(f64),
    I(i64),
    B(bool),
}

macro_rules! scalar_from {
    ($($t:ty => $arm:ident as $w:ty),*) => {$(
        impl From<$t> for Scalar {
            fn from(v: $t) -> Scalar {
                Scalar::$arm(v as $w)
            }
        }
    )*};
}
scalar_from!(f64 => F as f64, f32 => F as f64, i64 => I as i64, i32 => I as i64, u8 => I as i64, usize => I as i64, isize => I as i64);
impl From<bool> for Scalar {
    fn from(v: bool) -> Scalar {
        Scalar::B(v)
    }
}
impl From<f16> for Scalar {
    fn from(v: f16) -> Scalar {
        Scalar::F(v.into())
    }
}
impl From<bf16> for Scalar {
    fn from(v: bf16) -> Scalar {
        Scalar::F(v.into())
    }
}

/// x86's "integer indefinite" conversion: truncate toward zero, NaN or out of range gives `min`.
fn float_to_int(v: f64, min: i64, max_excl: f64) -> i64 {
    let t = v.trunc();
    if t.is_nan() || t < min as f64 || t >= max_excl {
        min
    } else {
        t as i64
    }
}

pub trait Element: Copy + Send + Sync + PartialEq + fmt::Debug + Default + 'static {
    const DTYPE: DType;
    fn to_scalar(self) -> Scalar;
    fn from_scalar(s: Scalar) -> Self;
    fn zero() -> Self;
    fn one() -> Self;
    /// Converts with the NumPy cast rules of this module.
    #[inline]
    fn cast<U: Element>(self) -> U {
        U::from_scalar(self.to_scalar())
    }
    #[inline]
    fn from_f64(v: f64) -> Self {
        Self::from_scalar(Scalar::F(v))
    }
    #[inline]
    fn to_f64(self) -> f64 {
        match self.to_scalar() {
            Scalar::F(v) => v,
            Scalar::I(v) => v as f64,
            Scalar::B(b) => b as u8 as f64,
        }
    }
}

macro_rules! float_element {
    ($t:ty, $dt:ident, $to64:expr, $from64:expr, $fromi:expr, $zero:expr, $one:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$dt;
            #[inline]
            fn to_scalar(self) -> Scalar {
                Scalar::F($to64(self))
            }
            #[inline]
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    Scalar::F(v) => $from64(v),
                    Scalar::I(v) => $fromi(v),
                    Scalar::B(b) => {
                        if b {
                            $one
                        } else {
                            $zero
                        }
                    }
                }
            }
            #[inline]
            fn zero() -> Self {
                $zero
            }
            #[inline]
            fn one() -> Self {
                $one
            }
        }
    };
}

float_element!(
    f32,
    F32,
    |x: f32| x as f64,
    |v: f64| v as f32,
    |v: i64| v as f32,
    0.0,
    1.0
);
float_element!(
    f64,
    F64,
    |x: f64| x,
    |v: f64| v,
    |v: i64| v as f64,
    0.0,
    1.0
);
// f64 and i64 -> f16/bf16 round once, to nearest even, from the exact value. `half`'s `from_f64`
// does not: it drops the low 32 bits of the f64 first (bf16, and f16 without F16C) or rounds to
// f32 to nearest first (f16 with F16C), so values just past a tie could round down. Rounding to
// f32 "to odd" (truncate, then set the last bit if anything was dropped) keeps the information
// that decides the second rounding, and f32's 24 bits exceed the halves' 11 and 8 by at least 2,
// which makes the two roundings equal one.
fn f64_to_f32_odd(v: f64) -> f32 {
    let f = v as f32;
    if v.is_nan() || f as f64 == v {
        return f;
    }
    let t = if (f as f64).abs() > v.abs() {
        f32::from_bits(f.to_bits() - 1)
    } else {
        f
    };
    f32::from_bits(t.to_bits() | 1)
}

fn i64_to_f32_odd(v: i64) -> f32 {
    let f = v as f32;
    let (fi, vi) = (f as i128, v as i128);
    if fi == vi {
        return f;
    }
    let t = if fi.abs() > vi.abs() {
        f32::from_bits(f.to_bits() - 1)
    } else {
        f
    };
    f32::from_bits(t.to_bits() | 1)
}

float_element!(
    f16,
    F16,
    f64::from,
    |v: f64| f16::from_f32(f64_to_f32_odd(v)),
    |v: i64| f16::from_f32(i64_to_f32_odd(v)),
    f16::ZERO,
    f16::ONE
);
float_element!(
    bf16,
    BF16,
    f64::from,
    |v: f64| bf16::from_f32(f64_to_f32_odd(v)),
    |v: i64| bf16::from_f32(i64_to_f32_odd(v)),
    bf16::ZERO,
    bf16::ONE
);

impl Element for i64 {
    const DTYPE: DType = DType::I64;
    #[inline]
    fn to_scalar(self) -> Scalar {
        Scalar::I(self)
    }
    #[inline]
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::F(v) => float_to_int(v, i64::MIN, 9.223_372_036_854_776e18),
            Scalar::I(v) => v,
            Scalar::B(b) => b as i64,
        }
    }
    fn zero() -> Self {
        0
    }
    fn one() -> Self {
        1
    }
}

impl Element for i32 {
    const DTYPE: DType = DType::I32;
    #[inline]
    fn to_scalar(self) -> Scalar {
        Scalar::I(self as i64)
    }
    #[inline]
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::F(v) => float_to_int(v, i32::MIN as i64, 2147483648.0) as i32,
            Scalar::I(v) => v as i32,
            Scalar::B(b) => b as i32,
        }
    }
    fn zero() -> Self {
        0
    }
    fn one() -> Self {
        1
    }
}

impl Element for u8 {
    const DTYPE: DType = DType::U8;
    #[inline]
    fn to_scalar(self) -> Scalar {
        Scalar::I(self as i64)
    }
    #[inline]
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::F(v) => i32::from_scalar(Scalar::F(v)) as u8,
            Scalar::I(v) => v as u8,
            Scalar::B(b) => b as u8,
        }
    }
    fn zero() -> Self {
        0
    }
    fn one() -> Self {
        1
    }
}

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    #[inline]
    fn to_scalar(self) -> Scalar {
        Scalar::B(self)
    }
    #[inline]
    fn from_scalar(s: Scalar) -> Self {
        match s {
            Scalar::F(v) => v != 0.0,
            Scalar::I(v) => v != 0,
            Scalar::B(b) => b,
        }
    }
    fn zero() -> Self {
        false
    }
    fn one() -> Self {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_float_to_int_rules() {
        assert_eq!(2.7f32.cast::<i32>(), 2);
        assert_eq!((-2.7f64).cast::<i64>(), -2);
        assert_eq!(f32::NAN.cast::<i32>(), i32::MIN);
        assert_eq!(1e10f64.cast::<i32>(), i32::MIN);
        assert_eq!(f64::INFINITY.cast::<i64>(), i64::MIN);
        assert_eq!((-1.0f32).cast::<u8>(), 255);
        assert_eq!(300.0f32.cast::<u8>(), 44);
        assert_eq!(f32::NAN.cast::<u8>(), 0);
    }

    #[test]
    fn wraps_and_bools() {
        assert_eq!((1i64 << 33 | 5).cast::<i32>(), 5);
        assert_eq!((-1i32).cast::<u8>(), 255);
        assert!(f32::NAN.cast::<bool>());
        assert!(!(-0.0f64).cast::<bool>());
        assert_eq!(true.cast::<f16>(), f16::ONE);
        assert!(256i32.cast::<bool>());
    }

    #[test]
    fn float_narrowing_rounds_to_nearest() {
        assert_eq!(1e39f64.cast::<f32>(), f32::INFINITY);
        assert_eq!(65520.0f32.cast::<f16>(), f16::INFINITY);
        assert_eq!(((1i64 << 53) + 1).cast::<f32>(), 9007199254740992.0f32);
        assert_eq!(16777217i64.cast::<f32>(), 16777216.0);
        assert_eq!(bf16::from_f32(1.0).cast::<f64>(), 1.0);
    }
}
