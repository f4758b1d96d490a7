//! NumPy's Dragon4 shortest-digit generation over a small unsigned big integer: the digits
//! that identify a float among its neighbours in its own type (f16 and bf16 included).

use std::cmp::Ordering;

/// A non-negative finite float as `mantissa * 2^exponent`.
pub(super) struct Binary {
    pub(super) mantissa: u64,
    pub(super) exponent: i32,
    pub(super) unequal_margins: bool,
}

/// Where Dragon4's digit limits count from: the first digit, or the decimal point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cutoff {
    TotalLength,
    FractionLength,
}

/// Unsigned big integer (little-endian 32-bit limbs, no zero limb on top): the few operations
/// Dragon4 needs, on numbers of at most ~1100 bits.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }
    fn pow2(n: u32) -> Big {
        let mut b = Big::from_u64(1);
        b.shl(n);
        b
    }
    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }
    fn shl(&mut self, n: u32) {
        let bits = n % 32;
        if bits > 0 {
            let mut carry = 0;
            for limb in &mut self.0 {
                let v = *limb;
                *limb = (v << bits) | carry;
                carry = v >> (32 - bits);
            }
            if carry != 0 {
                self.0.push(carry);
            }
        }
        if !self.0.is_empty() && n >= 32 {
            let mut limbs = vec![0; (n / 32) as usize];
            limbs.extend_from_slice(&self.0);
            self.0 = limbs;
        }
    }
    fn mul_small(&mut self, k: u32) {
        let mut carry = 0u64;
        for limb in &mut self.0 {
            let v = *limb as u64 * k as u64 + carry;
            *limb = v as u32;
            carry = v >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }
    fn mul_pow10(&mut self, mut n: u32) {
        while n >= 9 {
            self.mul_small(1_000_000_000);
            n -= 9;
        }
        self.mul_small(10u32.pow(n));
    }
    fn add(&self, other: &Big) -> Big {
        let (long, short) = if self.0.len() >= other.0.len() {
            (self, other)
        } else {
            (other, self)
        };
        let mut out = Vec::with_capacity(long.0.len() + 1);
        let mut carry = 0u64;
        for (i, &a) in long.0.iter().enumerate() {
            let v = a as u64 + short.0.get(i).copied().unwrap_or(0) as u64 + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        if carry != 0 {
            out.push(carry as u32);
        }
        Big(out)
    }
    /// `self -= other`, for `other <= self`.
    fn sub_assign(&mut self, other: &Big) {
        let mut borrow = 0i64;
        for (i, limb) in self.0.iter_mut().enumerate() {
            let v = *limb as i64 - other.0.get(i).copied().unwrap_or(0) as i64 - borrow;
            borrow = (v < 0) as i64;
            *limb = v.rem_euclid(1 << 32) as u32;
        }
        self.trim();
    }
    fn cmp(&self, other: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }
}

/// NumPy's Dragon4 (after Steele & White, Burger & Dybvig) in its `unique` digit mode: the
/// decimal digits of `b` and the power of ten of the first. Digits stop once they identify `b`
/// among its neighbours and at least the `cutoff_min`-th digit is out, or at the `cutoff_max`-th
/// (a negative limit is none); the last digit is then rounded as NumPy does (towards the side
/// that still identifies `b`, else to nearest, ties to even).
pub(super) fn dragon4(
    b: &Binary,
    mode: Cutoff,
    cutoff_max: i32,
    cutoff_min: i32,
) -> (Vec<u8>, i32) {
    if b.mantissa == 0 {
        return (vec![0], 0);
    }
    let is_even = b.mantissa & 1 == 0;
    let e = b.exponent;
    // value = scaled / scale; the margins are half the gaps to the neighbours, times scale.
    let shift = if b.unequal_margins { 2 } else { 1 };
    let mut scaled = Big::from_u64(b.mantissa);
    let (mut scale, mut margin_low) = if e > 0 {
        scaled.shl(e as u32 + shift);
        (Big::from_u64(1 << shift), Big::pow2(e as u32))
    } else {
        scaled.shl(shift);
        (Big::pow2(e.unsigned_abs() + shift), Big::from_u64(1))
    };
    let margin_high = |low: &Big| {
        let mut h = low.clone();
        if b.unequal_margins {
            h.shl(1);
        }
        h
    };

    // An estimate of floor(log10(value)) + 1 that is right or one too small.
    let top_bit = 63 - b.mantissa.leading_zeros() as i32;
    let mut digit_exp = ((top_bit + e) as f64 * std::f64::consts::LOG10_2 - 0.69).ceil() as i32;
    if cutoff_max >= 0 && mode == Cutoff::FractionLength && digit_exp <= -cutoff_max {
        digit_exp = -cutoff_max + 1;
    }
    if digit_exp > 0 {
        scale.mul_pow10(digit_exp as u32);
    } else if digit_exp < 0 {
        scaled.mul_pow10(digit_exp.unsigned_abs());
        margin_low.mul_pow10(digit_exp.unsigned_abs());
    }
    if scaled.cmp(&scale) != Ordering::Less {
        digit_exp += 1;
    } else {
        scaled.mul_small(10);
        margin_low.mul_small(10);
    }

    let limit = |n: i32| match mode {
        Cutoff::TotalLength => digit_exp - n,
        Cutoff::FractionLength => -n,
    };
    let last_exp = if cutoff_max >= 0 {
        limit(cutoff_max).max(digit_exp - 16384)
    } else {
        digit_exp - 16384
    };
    let min_exp = if cutoff_min >= 0 {
        limit(cutoff_min).min(digit_exp)
    } else {
        digit_exp
    };
    let mut out_exp = digit_exp - 1;

    let mut digits = Vec::new();
    let (digit, low, high) = loop {
        digit_exp -= 1;
        let mut digit = 0u8;
        while scaled.cmp(&scale) != Ordering::Less {
            scaled.sub_assign(&scale);
            digit += 1;
        }
        // Ties count as inside the rounding interval when the mantissa is even.
        let c = scaled.cmp(&margin_low);
        let low = if is_even {
            c != Ordering::Greater
        } else {
            c == Ordering::Less
        };
        let c = scaled.add(&margin_high(&margin_low)).cmp(&scale);
        let high = if is_even {
            c != Ordering::Less
        } else {
            c == Ordering::Greater
        };
        if ((low || high) && digit_exp <= min_exp) || digit_exp <= last_exp {
            break (digit, low, high);
        }
        digits.push(digit);
        scaled.mul_small(10);
        margin_low.mul_small(10);
    };

    let mut round_down = low;
    if low == high {
        scaled.shl(1);
        let c = scaled.cmp(&scale);
        round_down = c == Ordering::Less || (c == Ordering::Equal && digit % 2 == 0);
    }
    if round_down {
        digits.push(digit);
    } else if digit < 9 {
        digits.push(digit + 1);
    } else {
        loop {
            match digits.pop() {
                Some(9) => {}
                Some(d) => {
                    digits.push(d + 1);
                    break;
                }
                None => {
                    digits.push(1);
                    out_exp += 1;
                    break;
                }
            }
        }
    }
    (digits, out_exp)
}
