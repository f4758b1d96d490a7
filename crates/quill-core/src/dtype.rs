//! Element types: the `DType` tag, the `Element` trait that ties a Rust type to its tag, and the
//! NumPy cast rules between every pair of types.
//!
//! Casts follow NumPy (C casts on x86_64): float to integer truncates toward zero; NaN, infinities
//! and values outside the target's range, which NumPy leaves undefined (with a warning), give what
//! x86 NumPy gives: the target's minimum for i32/i64; for i8, u8, i16 and u16 the low bits of the
//! i32 result (so -1.0 -> 255 and 300.0 -> 44 as u8); for u32 and u64 the result of the compiler's
//! unsigned conversion (values from 2^31, resp. 2^63, are shifted down by it, converted as signed
//! and the top bit flipped back), so -1.0 -> u32::MAX and NaN -> 2^31. Integer to integer wraps.
//! Anything to bool is `x != 0` (NaN -> true). bool to number is 0 or 1. Narrowing floats round to
//! nearest even; overflow gives inf.

use half::{bf16, f16};
use std::fmt;

/// The element type of an array: NumPy's numeric types plus bfloat16.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// IEEE binary32.
    F32,
    /// IEEE binary64.
    F64,
    /// IEEE binary16.
    F16,
    /// bfloat16 (binary32's exponent, 8 bits of precision).
    BF16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 8-bit integer.
    U8,
    /// A bool stored as one byte (0 or 1).
    Bool,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Unsigned 64-bit integer.
    U64,
    /// A complex number of two f32 (real, imaginary), NumPy's complex64.
    C64,
    /// A complex number of two f64 (real, imaginary), NumPy's complex128.
    C128,
}

impl DType {
    /// Every real dtype (everything but the complex ones), floats first: the dtypes every op
    /// takes. [`DType::COMPLEX`] lists the others.
    pub const ALL: [DType; 13] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::U16,
        DType::U32,
        DType::U64,
    ];

    /// The complex dtypes, narrowest first.
    pub const COMPLEX: [DType; 2] = [DType::C64, DType::C128];

    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        use DType::*;
        match self {
            C128 => 16,
            F64 | I64 | U64 | C64 => 8,
            F32 | I32 | U32 => 4,
            F16 | BF16 | I16 | U16 => 2,
            U8 | I8 | Bool => 1,
        }
    }
    /// True for the four float types.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }
    /// True for complex64 and complex128.
    pub fn is_complex(self) -> bool {
        matches!(self, DType::C64 | DType::C128)
    }
    /// The real dtype of a complex one's parts (f32 for c64, f64 for c128); a real dtype itself.
    pub fn real_part(self) -> DType {
        match self {
            DType::C64 => DType::F32,
            DType::C128 => DType::F64,
            d => d,
        }
    }
    /// The complex dtype whose parts are this float (c64 for f32, f16 and bf16; c128 for
    /// f64); `None` for the others.
    pub fn to_complex(self) -> Option<DType> {
        match self {
            DType::F32 | DType::F16 | DType::BF16 | DType::C64 => Some(DType::C64),
            DType::F64 | DType::C128 => Some(DType::C128),
            _ => None,
        }
    }
    /// True for the signed and unsigned integer types (not bool).
    pub fn is_int(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }
    /// True for i8, i16, i32 and i64.
    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }
    /// True for u8, u16, u32 and u64.
    pub fn is_unsigned_int(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }
    /// The short name (`f32`, `i64`, `u8`, `bool`, ...).
    pub fn name(self) -> &'static str {
        use DType::*;
        match self {
            F32 => "f32",
            F64 => "f64",
            F16 => "f16",
            BF16 => "bf16",
            I8 => "i8",
            I16 => "i16",
            I32 => "i32",
            I64 => "i64",
            U8 => "u8",
            U16 => "u16",
            U32 => "u32",
            U64 => "u64",
            Bool => "bool",
            C64 => "c64",
            C128 => "c128",
        }
    }
    /// NumPy's name (`float32`, `int64`, `uint8`, `bool`; `bfloat16` as ml_dtypes spells it).
    pub fn numpy_name(self) -> &'static str {
        use DType::*;
        match self {
            F32 => "float32",
            F64 => "float64",
            F16 => "float16",
            BF16 => "bfloat16",
            I8 => "int8",
            I16 => "int16",
            I32 => "int32",
            I64 => "int64",
            U8 => "uint8",
            U16 => "uint16",
            U32 => "uint32",
            U64 => "uint64",
            Bool => "bool",
            C64 => "complex64",
            C128 => "complex128",
        }
    }
    /// Parses the names `name()` and `numpy_name()` give.
    pub fn parse(s: &str) -> Option<DType> {
        DType::ALL
            .into_iter()
            .chain(DType::COMPLEX)
            .find(|d| d.name() == s || d.numpy_name() == s)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A value of any dtype, wide enough to carry each exactly: the hub that casts go through.
/// Integers are i128 so that every i64 and u64 value fits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// A float (f16, bf16 and f32 widen exactly).
    F(f64),
    /// An integer of any integer dtype.
    I(i128),
    /// A bool.
    B(bool),
    /// A complex number (real, imaginary): c64's parts widen exactly.
    C(f64, f64),
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
scalar_from!(f64 => F as f64, f32 => F as f64, i64 => I as i128, i32 => I as i128, i16 => I as i128, i8 => I as i128, u64 => I as i128, u32 => I as i128, u16 => I as i128, u8 => I as i128, usize => I as i128, isize => I as i128);
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

/// x86 NumPy's float -> i32 (`cvttsd2si`): the base of the i8/u8/i16/u16 casts, which keep its
/// low bits.
fn float_to_i32(v: f64) -> i32 {
    float_to_int(v, i32::MIN as i64, 2147483648.0) as i32
}

/// x86 NumPy's float -> u32: the compiler's unsigned conversion through signed 32-bit
/// conversions (from 2^31 up, shift down by 2^31, convert, flip the top bit back).
fn float_to_u32(v: f64) -> u32 {
    const TOP: f64 = 2147483648.0;
    if v >= TOP {
        (float_to_i32(v - TOP) as u32) ^ 0x8000_0000
    } else {
        float_to_i32(v) as u32
    }
}

/// x86 NumPy's float -> u64, as `float_to_u32` with 64-bit conversions.
fn float_to_u64(v: f64) -> u64 {
    const TOP: f64 = 9.223_372_036_854_776e18;
    let i64_of = |x: f64| float_to_int(x, i64::MIN, TOP) as u64;
    if v >= TOP {
        i64_of(v - TOP) ^ (1 << 63)
    } else {
        i64_of(v)
    }
}

/// A Rust type that stores the elements of one [`DType`] (`f32`, `i64`, `bool`, `f16`,
/// ...), with conversions to and from [`Scalar`] that follow NumPy's cast rules.
pub trait Element: Copy + Send + Sync + PartialEq + fmt::Debug + Default + 'static {
    /// The dtype whose elements this type stores.
    const DTYPE: DType;
    /// Widens the value exactly into a [`Scalar`].
    fn to_scalar(self) -> Scalar;
    /// Converts a [`Scalar`] to this type with NumPy's cast rules (integers wrap, floats to
    /// integers truncate as x86 NumPy does, anything non-zero is `true`).
    fn from_scalar(s: Scalar) -> Self;
    /// The additive identity (`0`, `0.0` or `false`).
    fn zero() -> Self;
    /// The multiplicative identity (`1`, `1.0` or `true`).
    fn one() -> Self;
    /// Converts with the NumPy cast rules of this module.
    #[inline]
    fn cast<U: Element>(self) -> U {
        U::from_scalar(self.to_scalar())
    }
    /// Converts an f64 to this type with the same rules as [`Element::from_scalar`].
    #[inline]
    fn from_f64(v: f64) -> Self {
        Self::from_scalar(Scalar::F(v))
    }
    /// The value as an f64: exact for floats and bools (0 or 1), rounded to nearest for
    /// integers too wide for f64.
    #[inline]
    fn to_f64(self) -> f64 {
        match self.to_scalar() {
            Scalar::F(v) => v,
            Scalar::I(v) => i128_to_f64(v),
            Scalar::B(b) => b as u8 as f64,
            Scalar::C(re, _) => re,
        }
    }
}

/// `v as f64` (round to nearest), through the one-instruction i64 conversion whenever `v` fits
/// one: i128 conversions are library calls, and every integer cast passes through here.
#[inline]
fn i128_to_f64(v: i128) -> f64 {
    match i64::try_from(v) {
        Ok(x) => x as f64,
        Err(_) => v as f64,
    }
}

macro_rules! float_element {
    ($t:ty, $dt:ident, $to64:expr, $from64:expr, $fromi:expr, $zero:expr, $one:expr) => {
        float_element!($t, $dt, $to64, $from64, $fromi, $zero, $one, {});
    };
    ($t:ty, $dt:ident, $to64:expr, $from64:expr, $fromi:expr, $zero:expr, $one:expr, {$($cast:item)*}) => {
        impl Element for $t {
            const DTYPE: DType = DType::$dt;
            $($cast)*
            #[inline]
            fn to_scalar(self) -> Scalar {
                Scalar::F($to64(self))
            }
            #[inline]
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    // NumPy drops the imaginary part (with a ComplexWarning).
                    Scalar::F(v) | Scalar::C(v, _) => $from64(v),
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
    |v: i128| match i64::try_from(v) {
        Ok(x) => x as f32,
        Err(_) => v as f32,
    },
    0.0,
    1.0
);
float_element!(f64, F64, |x: f64| x, |v: f64| v, i128_to_f64, 0.0, 1.0);
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

fn i128_to_f32_odd(v: i128) -> f32 {
    if v.unsigned_abs() <= 1 << 24 {
        // Exact in f32 (and the fast conversion): nothing to round.
        return v as i32 as f32;
    }
    let f = v as f32;
    let (fi, vi) = (f as i128, v);
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
    |v: i128| f16::from_f32(i128_to_f32_odd(v)),
    f16::ZERO,
    f16::ONE,
    {
        // NumPy's half -> uint32 loop converts through int64 (not the unsigned 32-bit
        // sequence of float and double), so NaN and infinities give 0 there.
        #[inline]
        fn cast<U: Element>(self) -> U {
            if U::DTYPE == DType::U32 {
                let i = float_to_int(f64::from(self), i64::MIN, 9.223_372_036_854_776e18);
                return U::from_scalar(Scalar::I(i as u32 as i128));
            }
            U::from_scalar(self.to_scalar())
        }
    }
);
float_element!(
    bf16,
    BF16,
    f64::from,
    |v: f64| bf16::from_f32(f64_to_f32_odd(v)),
    |v: i128| bf16::from_f32(i128_to_f32_odd(v)),
    bf16::ZERO,
    bf16::ONE
);

/// An integer element: `from_float` is x86 NumPy's float -> integer cast for the type.
macro_rules! int_element {
    ($t:ty, $dt:ident, $from_float:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$dt;
            #[inline]
            fn to_scalar(self) -> Scalar {
                Scalar::I(self as i128)
            }
            #[inline]
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    Scalar::F(v) | Scalar::C(v, _) => $from_float(v),
                    // Wraps: keeps the low bits, as C's integer conversions.
                    Scalar::I(v) => v as $t,
                    Scalar::B(b) => b as $t,
                }
            }
            fn zero() -> Self {
                0
            }
            fn one() -> Self {
                1
            }
        }
    };
}

int_element!(i64, I64, |v| float_to_int(
    v,
    i64::MIN,
    9.223_372_036_854_776e18
));
int_element!(i32, I32, float_to_i32);
int_element!(i16, I16, |v| float_to_i32(v) as i16);
int_element!(i8, I8, |v| float_to_i32(v) as i8);
int_element!(u8, U8, |v| float_to_i32(v) as u8);
int_element!(u16, U16, |v| float_to_i32(v) as u16);
int_element!(u32, U32, float_to_u32);
int_element!(u64, U64, float_to_u64);

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
            Scalar::C(re, im) => re != 0.0 || im != 0.0,
        }
    }
    fn zero() -> Self {
        false
    }
    fn one() -> Self {
        true
    }
}

/// complex64's element: two f32, real then imaginary (C's and NumPy's layout).
pub type C64 = num_complex::Complex<f32>;
/// complex128's element: two f64, real then imaginary.
pub type C128 = num_complex::Complex<f64>;

macro_rules! complex_element {
    ($t:ty, $dt:ident, $part:ty) => {
        impl Element for $t {
            const DTYPE: DType = DType::$dt;
            #[inline]
            fn to_scalar(self) -> Scalar {
                Scalar::C(self.re as f64, self.im as f64)
            }
            #[inline]
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    Scalar::C(re, im) => <$t>::new(re as $part, im as $part),
                    other => <$t>::new(<$part>::from_scalar(other), 0.0),
                }
            }
            fn zero() -> Self {
                <$t>::new(0.0, 0.0)
            }
            fn one() -> Self {
                <$t>::new(1.0, 0.0)
            }
        }
    };
}
complex_element!(C64, C64, f32);
complex_element!(C128, C128, f64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complex_casts_follow_numpy() {
        // Real -> complex: imaginary 0; complex -> real: the real part; -> bool: either part.
        assert_eq!(2.5f32.cast::<C128>(), C128::new(2.5, 0.0));
        assert_eq!((-3i64).cast::<C64>(), C64::new(-3.0, 0.0));
        assert_eq!(C128::new(1.9, 7.0).cast::<i32>(), 1);
        assert_eq!(C64::new(-1.0, 2.0).cast::<u8>(), 255);
        assert_eq!(C128::new(0.1, 2.0).cast::<f32>(), 0.1f32);
        assert!(C64::new(0.0, -0.5).cast::<bool>());
        assert!(!C128::new(0.0, -0.0).cast::<bool>());
        assert_eq!(
            C128::new(1e40, -1e40).cast::<C64>(),
            C64::new(f32::INFINITY, f32::NEG_INFINITY)
        );
        assert_eq!(true.cast::<C128>(), C128::new(1.0, 0.0));
        assert_eq!(DType::parse("complex64"), Some(DType::C64));
        assert_eq!(DType::parse("c128"), Some(DType::C128));
        assert_eq!(DType::C128.size_in_bytes(), 16);
        assert_eq!(DType::C64.real_part(), DType::F32);
    }

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
        // Values read off NumPy 2.4 on x86_64.
        assert_eq!((-129.0f64).cast::<i8>(), 127);
        assert_eq!(70000.0f64.cast::<i16>(), 4464);
        assert_eq!((-1.0f64).cast::<u16>(), 65535);
        assert_eq!(f64::NAN.cast::<u32>(), 2147483648);
        assert_eq!(f64::INFINITY.cast::<u32>(), 0);
        assert_eq!(1e10f64.cast::<u32>(), 0);
        assert_eq!(3e9f64.cast::<u32>(), 3_000_000_000);
        assert_eq!((-3e9f64).cast::<u32>(), 2147483648);
        assert_eq!((-1.0f64).cast::<u64>(), u64::MAX);
        assert_eq!((-3e9f64).cast::<u64>(), 18446744070709551616);
        assert_eq!(1.8e19f64.cast::<u64>(), 18_000_000_000_000_000_000);
        assert_eq!(1e20f64.cast::<u64>(), 0);
        assert_eq!(f64::NAN.cast::<u64>(), 1 << 63);
        // From half, u32 goes through i64 in NumPy.
        assert_eq!(f16::NEG_INFINITY.cast::<u32>(), 0);
        assert_eq!(f16::NAN.cast::<u32>(), 0);
        assert_eq!(f16::from_f32(-65504.0).cast::<u32>(), 4294901792);
    }

    #[test]
    fn wraps_and_bools() {
        assert_eq!((1i64 << 33 | 5).cast::<i32>(), 5);
        assert_eq!((-1i32).cast::<u8>(), 255);
        assert!(f32::NAN.cast::<bool>());
        assert!(!(-0.0f64).cast::<bool>());
        assert_eq!(true.cast::<f16>(), f16::ONE);
        assert!(256i32.cast::<bool>());
        assert_eq!(u64::MAX.cast::<i64>(), -1);
        assert_eq!((-1i64).cast::<u64>(), u64::MAX);
        assert_eq!(u64::MAX.cast::<f64>(), 18446744073709551615.0);
        assert_eq!(300i16.cast::<i8>(), 44);
        assert_eq!(u64::MAX.cast::<f16>(), f16::INFINITY);
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
