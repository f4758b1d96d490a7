//! Float cells: NumPy's `FloatingFormat` (positional or scientific, one width for the array) over
//! the digits that `dragon4` produces in the array's own dtype.

use super::dragon4::{dragon4, Binary, Cutoff};
use super::PRECISION;
use quill_core::{bf16, f16};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FloatKind {
    F64,
    F32,
    F16,
    BF16,
}

impl FloatKind {
    /// `x` rounded to this type (the value NumPy would compare or divide in it).
    pub(super) fn native(self, x: f64) -> f64 {
        match self {
            FloatKind::F64 => x,
            FloatKind::F32 => x as f32 as f64,
            FloatKind::F16 => f16::from_f64(x).to_f64(),
            FloatKind::BF16 => bf16::from_f64(x).to_f64(),
        }
    }

    /// `10^min(8, finfo.precision)`: magnitudes from here on print in scientific notation.
    fn exp_cutoff_max(self) -> f64 {
        match self {
            FloatKind::F64 => 1e8,
            FloatKind::F32 => 1e6,
            FloatKind::F16 => 1e3,
            FloatKind::BF16 => 1e2,
        }
    }

    /// The magnitude of `x`, a finite value of this type, as Dragon4 takes it.
    fn binary(self, x: f64) -> Binary {
        let (bits, frac_bits, exp_bits): (u64, u32, u32) = match self {
            FloatKind::F64 => (x.to_bits(), 52, 11),
            FloatKind::F32 => ((x as f32).to_bits() as u64, 23, 8),
            FloatKind::F16 => (f16::from_f64(x).to_bits() as u64, 10, 5),
            FloatKind::BF16 => (bf16::from_f64(x).to_bits() as u64, 7, 8),
        };
        let frac = bits & ((1 << frac_bits) - 1);
        let biased = ((bits >> frac_bits) & ((1 << exp_bits) - 1)) as i32;
        let bias = (1 << (exp_bits - 1)) - 1;
        if biased == 0 {
            Binary {
                mantissa: frac,
                exponent: 1 - bias - frac_bits as i32,
                unequal_margins: false,
            }
        } else {
            Binary {
                mantissa: frac | 1 << frac_bits,
                exponent: biased - bias - frac_bits as i32,
                // At a power of two the gap below is half the gap above (not at the smallest
                // normal, whose lower neighbours are subnormals with the same spacing).
                unequal_margins: biased != 1 && frac == 0,
            }
        }
    }
}

fn digit_string(digits: &[u8]) -> String {
    digits.iter().map(|&d| char::from(b'0' + d)).collect()
}

/// One finite value's text from NumPy's first pass (`dragon4_positional` or
/// `dragon4_scientific` with `unique=True, precision=8, trim='.'`), sign included in `int`.
struct Parts {
    int: String,
    frac: String,
    exp: i32,
}

fn first_pass(v: f64, kind: FloatKind, scientific: bool) -> Parts {
    let b = kind.binary(v.abs());
    let sign = if v.is_sign_negative() { "-" } else { "" };
    if scientific {
        let (d, exp) = dragon4(&b, Cutoff::TotalLength, PRECISION as i32 + 1, -1);
        Parts {
            int: format!("{sign}{}", d[0]),
            frac: digit_string(&d[1..]).trim_end_matches('0').to_string(),
            exp,
        }
    } else {
        let (d, exp) = dragon4(&b, Cutoff::FractionLength, PRECISION as i32, -1);
        let s = digit_string(&d);
        let (int, frac) = if exp >= 0 {
            let whole = exp as usize + 1;
            if s.len() > whole {
                (s[..whole].to_string(), s[whole..].to_string())
            } else {
                (format!("{s:0<whole$}"), String::new())
            }
        } else {
            let zeros = "0".repeat(exp.unsigned_abs() as usize - 1);
            ("0".to_string(), format!("{zeros}{s}"))
        };
        Parts {
            int: format!("{sign}{int}"),
            frac: frac.trim_end_matches('0').to_string(),
            exp: 0,
        }
    }
}

/// The exponent's digits as NumPy writes them: at least two.
fn exp_digits(exp: i32) -> String {
    format!("{:02}", exp.unsigned_abs())
}

/// NumPy's `FloatingFormat` with the default options: one format for all of `vals` (values of
/// `kind`, widened to f64).
pub(super) fn float_cells(vals: &[f64], kind: FloatKind) -> Vec<String> {
    let mut max_val = f64::NEG_INFINITY;
    let mut min_val = f64::INFINITY;
    for v in vals.iter().filter(|v| v.is_finite() && **v != 0.0) {
        max_val = max_val.max(v.abs());
        min_val = min_val.min(v.abs());
    }
    let exp_format = min_val.is_finite()
        && (max_val >= kind.native(kind.exp_cutoff_max())
            || min_val < kind.native(1e-4)
            || kind.native(max_val / min_val) > 1000.0);

    let parts: Vec<Option<Parts>> = vals
        .iter()
        .map(|&v| v.is_finite().then(|| first_pass(v, kind, exp_format)))
        .collect();
    let finite = || parts.iter().flatten();
    let mut pad_left = finite().map(|p| p.int.len()).max().unwrap_or(0);
    let frac_len = finite().map(|p| p.frac.len()).max().unwrap_or(0);
    let exp_size = finite().map(|p| exp_digits(p.exp).len()).max().unwrap_or(0);
    let pad_right = match (finite().next().is_some(), exp_format) {
        (false, _) => 0,
        (true, true) => exp_size + 2 + frac_len,
        (true, false) => frac_len,
    };
    if parts.iter().any(Option::is_none) {
        let neginf = vals.contains(&f64::NEG_INFINITY) as usize;
        pad_left = pad_left.max((3 + neginf).saturating_sub(pad_right + 1));
    }
    let width = pad_left + pad_right + 1;

    vals.iter()
        .zip(&parts)
        .map(|(&v, p)| match p {
            None => {
                let s = if v.is_nan() {
                    "nan"
                } else if v > 0.0 {
                    "inf"
                } else {
                    "-inf"
                };
                format!("{s:>width$}")
            }
            // The second pass asks for `frac_len` digits at least (`min_digits`): digits past
            // the shortest ones are the value's own, not zeros.
            Some(_) if exp_format => {
                let b = kind.binary(v.abs());
                let n = frac_len as i32 + 1;
                let (d, exp) = dragon4(&b, Cutoff::TotalLength, n, n);
                let sign = if v.is_sign_negative() { "-" } else { "" };
                let esign = if exp < 0 { '-' } else { '+' };
                format!(
                    "{:>pad_left$}.{:0<frac_len$}e{esign}{:0>exp_size$}",
                    format!("{sign}{}", d[0]),
                    digit_string(&d[1..]),
                    exp_digits(exp)
                )
            }
            // Positional: the second pass (`min_digits=0`) gives the first pass's digits, as
            // every value printed positionally has a gap below 1 between neighbours.
            Some(p) => format!("{:>pad_left$}.{:<pad_right$}", p.int, p.frac),
        })
        .collect()
}
