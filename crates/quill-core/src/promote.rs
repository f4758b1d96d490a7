//! Type promotion for binary ops: NumPy's `promote_types` between two array dtypes, and NEP 50
//! for Rust or Python scalars, which are "weak": `f32_array * 2.0` stays f32, `u8_array + 1`
//! stays u8, and only a kind the array lacks (a float scalar with an integer array) changes it.
//! NumPy has no bfloat16; bf16 promotes as ml_dtypes makes it (exact types first, else the
//! smallest float that holds both).

use crate::{DType, Scalar};

/// The smallest dtype both `a` and `b` convert to safely (NumPy's table): integers of one
/// signedness take the wider; a signed and an unsigned integer take the smallest signed type
/// that holds both (u64 with any signed type has none: f64); an integer and a float take the
/// smallest float, from the given one up, whose precision holds the integer (int16 and f16
/// give f32, int32 and f32 give f64); f16 and bf16 meet at f32.
pub fn promote_types(a: DType, b: DType) -> DType {
    use DType::*;
    if a == b {
        return a;
    }
    if a.is_complex() || b.is_complex() {
        // The complex type whose parts hold both parts (int32 with complex64: complex128).
        let part = promote_types(a.real_part(), b.real_part());
        return part.to_complex().unwrap_or(C128);
    }
    match (a, b) {
        (Bool, x) | (x, Bool) => x,
        (x, y) if x.is_int() && y.is_int() => promote_ints(x, y),
        (i, f) | (f, i) if i.is_int() && f.is_float() => {
            let mut f = f;
            while float_precision(f) < int_precision(i) && f != F64 {
                f = if f == F32 { F64 } else { F32 };
            }
            f
        }
        (F16, BF16) | (BF16, F16) => F32,
        // Two distinct floats of one family: the wider.
        (x, y) => {
            if x.size_in_bytes() >= y.size_in_bytes() {
                x
            } else {
                y
            }
        }
    }
}

/// Two distinct integer dtypes (see `promote_types`).
fn promote_ints(a: DType, b: DType) -> DType {
    let bits = |d: DType| 8 * d.size_in_bytes();
    if a.is_signed_int() == b.is_signed_int() {
        return if bits(a) >= bits(b) { a } else { b };
    }
    let (s, u) = if a.is_signed_int() { (a, b) } else { (b, a) };
    match bits(s).max(2 * bits(u)) {
        8 => DType::I8,
        16 => DType::I16,
        32 => DType::I32,
        64 => DType::I64,
        _ => DType::F64,
    }
}

/// Bits of magnitude an integer dtype's values need.
fn int_precision(d: DType) -> usize {
    8 * d.size_in_bytes() - usize::from(d.is_signed_int())
}

/// Bits of significand of a float dtype.
fn float_precision(d: DType) -> usize {
    match d {
        DType::F16 => 11,
        DType::BF16 => 8,
        DType::F32 => 24,
        _ => 53,
    }
}

/// The dtype of `array op scalar` under NEP 50: the array's dtype unless the scalar is of a
/// higher kind (a float scalar with an integer or bool array gives f64, an integer scalar with a
/// bool array gives i64).
pub fn promote_with_scalar(array: DType, scalar: Scalar) -> DType {
    match scalar {
        _ if array.is_complex() => array,
        // A complex scalar keeps a float array's precision, else complex128.
        Scalar::C(..) => array.to_complex().unwrap_or(DType::C128),
        Scalar::B(_) => array,
        Scalar::I(_) if array == DType::Bool => DType::I64,
        Scalar::I(_) => array,
        Scalar::F(_) if array.is_float() => array,
        Scalar::F(_) => DType::F64,
    }
}

/// The dtype a scalar alone takes when it becomes an array (NumPy's defaults).
pub fn scalar_dtype(s: Scalar) -> DType {
    match s {
        Scalar::F(_) => DType::F64,
        Scalar::I(_) => DType::I64,
        Scalar::B(_) => DType::Bool,
        Scalar::C(..) => DType::C128,
    }
}

/// The range of an integer dtype, as i128 so that every i64 and u64 value compares exactly.
pub fn int_range(dtype: DType) -> Option<(i128, i128)> {
    use DType::*;
    Some(match dtype {
        I8 => (i8::MIN as i128, i8::MAX as i128),
        I16 => (i16::MIN as i128, i16::MAX as i128),
        I32 => (i32::MIN as i128, i32::MAX as i128),
        I64 => (i64::MIN as i128, i64::MAX as i128),
        U8 => (0, u8::MAX as i128),
        U16 => (0, u16::MAX as i128),
        U32 => (0, u32::MAX as i128),
        U64 => (0, u64::MAX as i128),
        _ => return None,
    })
}

/// Whether a Python-style number may be written into an array of `dtype` (NumPy 2's
/// `a[...] = v` and `fill`): an integer must lie in an integer dtype's range, and a float
/// going to an integer dtype must be finite with its truncation in range. Out of range is an
/// `Error::ValueOutOfRange` (Python's `OverflowError`); NaN is "cannot convert float NaN to
/// integer" (`ValueError`). Floats and bools take any number.
pub fn check_scalar_fits(op: &'static str, dtype: DType, s: Scalar) -> crate::Result<()> {
    if let Scalar::C(re, im) = s {
        if !dtype.is_complex() {
            return Err(crate::Error::invalid(
                op,
                format!(
                    "cannot write the complex value ({re}{im:+}j) into a {dtype} array: take its \
                     .real first, or make the array complex (casting rule same_kind)"
                ),
            ));
        }
    }
    let Some((lo, hi)) = int_range(dtype) else {
        return Ok(());
    };
    let v: i128 = match s {
        Scalar::B(_) | Scalar::C(..) => return Ok(()),
        Scalar::I(v) => v,
        Scalar::F(f) if f.is_nan() => {
            return Err(crate::Error::invalid(
                op,
                format!("cannot convert float NaN to integer (writing into a {dtype} array)"),
            ))
        }
        Scalar::F(f) if f.is_infinite() => {
            return Err(crate::Error::ValueOutOfRange {
                op,
                value: format!("cannot convert float {f} to integer:"),
                dtype,
                hint: String::new(),
            })
        }
        // Saturating: any value past i128's range is out of every dtype's range anyway.
        Scalar::F(f) => f.trunc() as i128,
    };
    if v < lo || v > hi {
        return Err(crate::Error::ValueOutOfRange {
            op,
            value: format!("Python integer {v}"),
            dtype,
            hint: format!(" (NumPy 2 rule; {lo}..={hi})"),
        });
    }
    Ok(())
}

/// NumPy's `same_kind` casting rule: a value of `from` may be written into `to` when `to`'s kind
/// is no lower (bool -> integer -> float -> complex, never back).
pub fn same_kind(from: DType, to: DType) -> bool {
    let kind =
        |d: DType| u8::from(d.is_int()) + 2 * u8::from(d.is_float()) + 3 * u8::from(d.is_complex());
    kind(from) <= kind(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_and_idempotent() {
        for a in DType::ALL {
            assert_eq!(promote_types(a, a), a);
            for b in DType::ALL {
                assert_eq!(promote_types(a, b), promote_types(b, a), "{a} {b}");
                // The result holds both: promoting again with either input changes nothing.
                let c = promote_types(a, b);
                assert_eq!(promote_types(c, a), c);
                assert_eq!(promote_types(c, b), c);
            }
        }
    }

    #[test]
    fn complex_promotes_as_numpy() {
        use DType::*;
        let all: Vec<DType> = DType::ALL.into_iter().chain(DType::COMPLEX).collect();
        for &a in &all {
            for &b in &all {
                let c = promote_types(a, b);
                assert_eq!(c, promote_types(b, a), "{a} {b}");
                assert_eq!(promote_types(c, a), c, "{a} {b}");
            }
        }
        // Read off NumPy 2.4's promote_types.
        for (a, b, c) in [
            (C64, F32, C64),
            (C64, F64, C128),
            (C64, I16, C64),
            (C64, I32, C128),
            (C64, U8, C64),
            (C64, U64, C128),
            (C64, Bool, C64),
            (C64, F16, C64),
            (C64, C128, C128),
            (C128, F32, C128),
        ] {
            assert_eq!(promote_types(a, b), c, "{a} {b}");
        }
        assert_eq!(promote_with_scalar(F32, Scalar::C(1.0, 1.0)), C64);
        assert_eq!(promote_with_scalar(I8, Scalar::C(1.0, 1.0)), C128);
        assert_eq!(promote_with_scalar(C64, Scalar::F(1.0)), C64);
        assert!(same_kind(F64, C64) && !same_kind(C64, F64));
        assert!(check_scalar_fits("setitem", F32, Scalar::C(1.0, 2.0)).is_err());
        assert!(check_scalar_fits("setitem", C64, Scalar::C(1.0, 2.0)).is_ok());
    }

    #[test]
    fn same_kind_goes_up_bool_int_float_only() {
        use DType::*;
        for &(from, to, ok) in &[
            (Bool, U8, true),
            (U8, I64, true),
            (I64, I32, true),
            (I32, F16, true),
            (F64, F32, true),
            (F32, I64, false),
            (I32, Bool, false),
            (BF16, U8, false),
        ] {
            assert_eq!(same_kind(from, to), ok, "{from} -> {to}");
        }
    }
}
