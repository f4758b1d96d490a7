//! `Element::cast` over all 13 x 13 dtype pairs against an independent reference of NumPy's rules
//! (x86_64): float -> int truncates toward zero, NaN / infinite / out-of-range float -> i32 or i64
//! gives the minimum, float -> i8/u8/i16/u16 is the low bits of the i32 result, float -> u32/u64
//! is the compiler's unsigned conversion (from 2^(n-1) up: subtract it, convert signed, flip the
//! top bit), int -> int wraps, x -> bool is
//! `x != 0` (NaN -> true), bool -> number is 0 or 1, and every conversion to a float format rounds
//! the exact source value once, to nearest even, with overflow to infinity.
//!
//! The float reference rounds the exact value (an integer times a power of two) with integer
//! arithmetic; it is itself checked against Rust's `as f32` (correctly rounded) and `half`'s
//! `from_f32`. Samples: hand-picked edge values, every f16, bf16 and u8 bit pattern, and random
//! values built to sit on or next to the rounding ties of f32, f16 and bf16.

use quill_core::{bf16, f16, DType, Element, Scalar};
use quill_test_support::Prng;

/// A source value, exactly.
#[derive(Clone, Copy, Debug)]
enum Exact {
    F(f64),
    I(i128),
    B(bool),
}

/// (significand bits including the hidden one, minimum normal exponent, maximum exponent)
fn format(d: DType) -> (u32, i32, i32) {
    match d {
        DType::F64 => (53, -1022, 1023),
        DType::F32 => (24, -126, 127),
        DType::F16 => (11, -14, 15),
        DType::BF16 => (8, -126, 127),
        _ => unreachable!(),
    }
}

fn pow2(e: i32) -> f64 {
    assert!((-1022..=1023).contains(&e));
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// Rounds `(-1)^neg * mag * 2^exp2` to the float format of `d`, to nearest even, and returns the
/// result as an f64 (every such format is a subset of f64).
fn round_to(neg: bool, mag: u128, exp2: i32, d: DType) -> f64 {
    let (p, emin, emax) = format(d);
    let sign = if neg { -1.0 } else { 1.0 };
    if mag == 0 {
        return sign * 0.0;
    }
    let lead = (127 - mag.leading_zeros()) as i32 + exp2; // exponent of the leading bit
    let q = lead.max(emin) - (p as i32 - 1); // exponent of the last kept bit
    let (r, q) = if exp2 >= q {
        (mag << (exp2 - q), q)
    } else {
        let shift = (q - exp2) as u32;
        if shift >= 127 {
            (0, q)
        } else {
            let r = mag >> shift;
            let rem = mag & ((1u128 << shift) - 1);
            let half = 1u128 << (shift - 1);
            let up = rem > half || (rem == half && r & 1 == 1);
            (r + up as u128, q)
        }
    };
    if r == 0 {
        return sign * 0.0;
    }
    let top = (127 - r.leading_zeros()) as i32 + q;
    if top > emax {
        return sign * f64::INFINITY;
    }
    assert!(r < 1 << 54);
    sign * (r as f64) * pow2(q)
}

/// The exact value of a finite f64 as (negative, magnitude, exponent).
fn decompose(v: f64) -> (bool, u128, i32) {
    let bits = v.to_bits();
    let neg = bits >> 63 == 1;
    let e = ((bits >> 52) & 0x7ff) as i32;
    let m = bits & ((1 << 52) - 1);
    if e == 0 {
        (neg, m as u128, -1074)
    } else {
        (neg, (m | 1 << 52) as u128, e - 1075)
    }
}

/// What NumPy gives: an integer (for the integer dtypes), a bool, or a float value.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Want {
    I(i128),
    B(bool),
    F(f64),
}

fn wrap(v: i128, bits: u32) -> i128 {
    let m = 1i128 << bits;
    let u = v.rem_euclid(m);
    if u >= m / 2 {
        u - m
    } else {
        u
    }
}

/// x86's cvttsd2si: truncation toward zero, the "integer indefinite" minimum when out of range.
fn float_to_int(v: f64, bits: u32) -> i128 {
    let min = -(1i128 << (bits - 1));
    let max = (1i128 << (bits - 1)) - 1;
    if v.is_nan() || v.abs() >= 1e38 {
        return min;
    }
    let t = v as i128; // truncates toward zero, exact below 2^127
    if t < min || t > max {
        min
    } else {
        t
    }
}

fn reference(x: Exact, src: DType, d: DType) -> Want {
    match d {
        DType::Bool => Want::B(match x {
            Exact::F(v) => v != 0.0,
            Exact::I(v) => v != 0,
            Exact::B(b) => b,
        }),
        d if d.is_int() => {
            let bits = 8 * d.size_in_bytes() as u32;
            let v = match x {
                // i8, u8, i16, u16 keep the low bits of the i32 conversion.
                Exact::F(v) if bits <= 16 => float_to_int(v, 32),
                Exact::F(v) if d.is_signed_int() => float_to_int(v, bits),
                // NumPy's half -> uint32 loop goes through int64.
                Exact::F(v) if src == DType::F16 && bits == 32 => float_to_int(v, 64),
                Exact::F(v) => {
                    let top = 2f64.powi(bits as i32 - 1);
                    if v >= top {
                        float_to_int(v - top, bits) ^ -(1i128 << (bits - 1))
                    } else {
                        float_to_int(v, bits)
                    }
                }
                Exact::I(v) => v,
                Exact::B(b) => b as i128,
            };
            Want::I(if d.is_signed_int() {
                wrap(v, bits)
            } else {
                v.rem_euclid(1i128 << bits)
            })
        }
        _ => Want::F(match x {
            Exact::F(v) if v.is_nan() || v.is_infinite() || d == DType::F64 => v,
            Exact::F(v) => {
                let (neg, mag, e) = decompose(v);
                round_to(neg, mag, e, d)
            }
            Exact::I(v) => round_to(v < 0, v.unsigned_abs(), 0, d),
            Exact::B(b) => b as u8 as f64,
        }),
    }
}

fn got_of(s: Scalar, d: DType) -> Want {
    match (s, d) {
        (Scalar::I(v), d) if d.is_int() => Want::I(v),
        (Scalar::B(b), DType::Bool) => Want::B(b),
        (Scalar::F(v), DType::F64 | DType::F32 | DType::F16 | DType::BF16) => Want::F(v),
        other => panic!("{other:?}: the scalar kind does not match the dtype"),
    }
}

fn same(a: Want, b: Want) -> bool {
    match (a, b) {
        (Want::F(x), Want::F(y)) => (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// Casts `x` to every dtype and compares with the reference; returns the mismatches.
fn check_all<S: Element>(samples: &[S], exact: impl Fn(S) -> Exact) -> Vec<String> {
    fn one<S: Element, D: Element>(x: S, e: Exact, bad: &mut Vec<String>) {
        let got = got_of(x.cast::<D>().to_scalar(), D::DTYPE);
        let want = reference(e, S::DTYPE, D::DTYPE);
        if !same(got, want) {
            bad.push(format!(
                "{:?} {x:?} -> {:?}: got {got:?}, want {want:?}",
                S::DTYPE,
                D::DTYPE
            ));
        }
    }
    let mut bad = Vec::new();
    for &x in samples {
        let e = exact(x);
        one::<S, f32>(x, e, &mut bad);
        one::<S, f64>(x, e, &mut bad);
        one::<S, f16>(x, e, &mut bad);
        one::<S, bf16>(x, e, &mut bad);
        one::<S, i32>(x, e, &mut bad);
        one::<S, i64>(x, e, &mut bad);
        one::<S, u8>(x, e, &mut bad);
        one::<S, bool>(x, e, &mut bad);
        one::<S, i8>(x, e, &mut bad);
        one::<S, i16>(x, e, &mut bad);
        one::<S, u16>(x, e, &mut bad);
        one::<S, u32>(x, e, &mut bad);
        one::<S, u64>(x, e, &mut bad);
    }
    bad
}

const EDGE_F64: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -0.5,
    0.49999999999999994,
    1.5,
    2.5,
    -2.5,
    2.7,
    -2.7,
    127.0,
    128.0,
    255.0,
    255.9,
    256.0,
    300.0,
    -300.0,
    -1.0,
    -255.0,
    -256.5,
    1e-8,
    -1e-8,
    5e-324,
    1.2e-38,
    1e-45,
    6e-8,
    5.960464477539063e-8,
    2.9802322387695312e-8,
    65504.0,
    65519.99,
    65520.0,
    65536.0,
    3.3895313892515355e38,
    3.4028234663852886e38,
    3.4028235677973366e38,
    1e39,
    f64::MAX,
    f64::MIN,
    f64::MIN_POSITIVE,
    2147483647.0,
    2147483647.9,
    2147483648.0,
    -2147483648.0,
    -2147483648.9,
    -2147483649.0,
    4294967296.0,
    4294967551.0,
    9.223372036854775e18,
    9.223372036854776e18,
    -9.223372036854776e18,
    -9.223372036854777e18,
    1.8446744073709552e19,
    16777217.0,
    16777216.0,
    9007199254740993.0,
    1e300,
    f64::NAN,
    -f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1.0009765625,
    1.00048828125,
    1.0004882812500002,
    1.00390625,
    1.001953125,
    1.0019531250000002,
];

const EDGE_I64: &[i64] = &[
    0,
    1,
    -1,
    2,
    127,
    128,
    255,
    256,
    -256,
    -129,
    65504,
    65519,
    65520,
    65535,
    65536,
    16777217,
    16777219,
    i32::MAX as i64,
    i32::MIN as i64,
    i32::MAX as i64 + 1,
    i32::MIN as i64 - 1,
    1 << 33 | 5,
    -(1 << 33) - 3,
    (1 << 53) + 1,
    (1 << 53) + 3,
    i64::MAX,
    i64::MIN,
    i64::MIN + 1,
    // i64 -> bf16: 2^60 + 2^52 + 1 lies just above a bf16 tie, but rounds onto it in f64
    (1 << 60) + (1 << 52) + 1,
    -((1 << 60) + (1 << 52) + 1),
    (1 << 60) + (1 << 52),
    // i32 -> bf16: the same, with bits f64 keeps but a 20-bit truncation would not
    (1 << 30) + (1 << 22) + 1,
    (1 << 24) + (1 << 16) + 1,
];

/// Random f64 values with an exponent in `lo..=hi` whose mantissa puts them on, just above or
/// just below a rounding tie of a `p`-bit format.
fn near_ties(rng: &mut Prng, count: usize, lo: i64, hi: i64) -> Vec<f64> {
    (0..count)
        .map(|_| {
            let p = [8u32, 11, 24][rng.below(3)];
            let e = rng.int(lo, hi);
            let half_bit = 52 - p; // the first dropped bit of a p-bit significand
            let keep = rng.next_u64() & !((1u64 << (half_bit + 1)) - 1) & ((1 << 52) - 1);
            let low = match rng.below(4) {
                0 => 0,
                1 => 1,
                2 => 1 << rng.below(half_bit as usize),
                _ => rng.next_u64() & ((1 << half_bit) - 1),
            };
            let m = match rng.below(3) {
                0 => keep | 1 << half_bit | low,         // on or above the tie
                1 => keep | ((1 << half_bit) - 1 - low), // below the tie
                _ => keep | low,
            };
            let sign = (rng.below(2) as u64) << 63;
            f64::from_bits(sign | ((1023 + e) as u64) << 52 | m)
        })
        .collect()
}

fn report(what: &str, bad: Vec<String>) {
    assert!(
        bad.is_empty(),
        "{what}: {} mismatches, first ones:\n{}",
        bad.len(),
        bad[..bad.len().min(12)].join("\n")
    );
}

#[test]
fn the_reference_rounds_like_rust_and_half() {
    let mut rng = Prng::from_state(1);
    let mut vals: Vec<f64> = EDGE_F64.to_vec();
    vals.extend(near_ties(&mut rng, 20000, -160, 140));
    for v in vals.into_iter().filter(|v| v.is_finite()) {
        let want = reference(Exact::F(v), DType::F64, DType::F32);
        assert_eq!(
            want.to_bits_or_nan(),
            (v as f32 as f64).to_bits(),
            "f64 {v:e} -> f32"
        );
        // half's from_f32 is correctly rounded; compare where the source is an f32 already
        let f = v as f32;
        let want16 = reference(Exact::F(f as f64), DType::F32, DType::F16);
        assert_eq!(
            want16.to_bits_or_nan(),
            f64::from(f16::from_f32(f)).to_bits(),
            "f32 {f:e} -> f16"
        );
        let wantb = reference(Exact::F(f as f64), DType::F32, DType::BF16);
        assert_eq!(
            wantb.to_bits_or_nan(),
            f64::from(bf16::from_f32(f)).to_bits(),
            "f32 {f:e} -> bf16"
        );
    }
    for &i in EDGE_I64 {
        assert_eq!(
            reference(Exact::I(i as i128), DType::I64, DType::F32).to_bits_or_nan(),
            (i as f32 as f64).to_bits()
        );
        assert_eq!(
            reference(Exact::I(i as i128), DType::I64, DType::F64).to_bits_or_nan(),
            (i as f64).to_bits()
        );
    }
}

trait Bits {
    fn to_bits_or_nan(self) -> u64;
}
impl Bits for Want {
    fn to_bits_or_nan(self) -> u64 {
        match self {
            Want::F(v) => v.to_bits(),
            other => panic!("not a float: {other:?}"),
        }
    }
}

#[test]
fn casts_from_f64() {
    let mut rng = Prng::from_state(2);
    let mut vals: Vec<f64> = EDGE_F64.to_vec();
    vals.extend(near_ties(&mut rng, 20000, -160, 140));
    vals.extend((0..5000).map(|_| f64::from_bits(rng.next_u64())));
    vals.extend((0..5000).map(|_| rng.int(-(1i64 << 40), 1i64 << 40) as f64 / 1024.0));
    report("f64", check_all(&vals, Exact::F));
}

#[test]
fn casts_from_f32() {
    let mut rng = Prng::from_state(3);
    let mut vals: Vec<f32> = EDGE_F64.iter().map(|&v| v as f32).collect();
    vals.extend(
        near_ties(&mut rng, 20000, -150, 130)
            .into_iter()
            .map(|v| v as f32),
    );
    vals.extend((0..5000).map(|_| f32::from_bits(rng.next_u64() as u32)));
    report("f32", check_all(&vals, |x| Exact::F(x as f64)));
}

#[test]
fn casts_from_every_f16_and_bf16() {
    let all16: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
    report("f16", check_all(&all16, |x| Exact::F(f64::from(x))));
    let allb: Vec<bf16> = (0..=u16::MAX).map(bf16::from_bits).collect();
    report("bf16", check_all(&allb, |x| Exact::F(f64::from(x))));
}

#[test]
fn casts_from_integers_and_bool() {
    let mut rng = Prng::from_state(4);
    let mut vals: Vec<i64> = EDGE_I64.to_vec();
    for _ in 0..20000 {
        // values with a random top and a bit pattern at or around the bf16/f16/f32 ties
        let width = rng.below(63) as u32 + 1;
        let v = (rng.next_u64() >> (64 - width)) as i64;
        let t = match rng.below(3) {
            0 => v,
            1 => v | (1 << (width.saturating_sub(9))),
            _ => (v >> 1 << 1) | 1,
        };
        vals.push(if rng.odds(1, 2) { t } else { t.wrapping_neg() });
    }
    report("i64", check_all(&vals, |x| Exact::I(x as i128)));
    let v32: Vec<i32> = vals
        .iter()
        .map(|&v| v as i32)
        .chain([i32::MIN, i32::MAX])
        .collect();
    report("i32", check_all(&v32, |x| Exact::I(x as i128)));
    let u32s: Vec<u32> = vals.iter().map(|&v| v as u32).chain([u32::MAX]).collect();
    report("u32", check_all(&u32s, |x| Exact::I(x as i128)));
    // u64 beyond i64's range: the top bit set, which i64 sources never reach.
    let u64s: Vec<u64> = vals
        .iter()
        .map(|&v| v as u64)
        .chain([u64::MAX, 1 << 63])
        .collect();
    report("u64", check_all(&u64s, |x| Exact::I(x as i128)));
    let v8: Vec<u8> = (0..=255).collect();
    report("u8", check_all(&v8, |x| Exact::I(x as i128)));
    let i8s: Vec<i8> = (-128..=127).collect();
    report("i8", check_all(&i8s, |x| Exact::I(x as i128)));
    let i16s: Vec<i16> = (i16::MIN..=i16::MAX).collect();
    report("i16", check_all(&i16s, |x| Exact::I(x as i128)));
    let u16s: Vec<u16> = (0..=u16::MAX).collect();
    report("u16", check_all(&u16s, |x| Exact::I(x as i128)));
    report("bool", check_all(&[false, true], Exact::B));
}

#[test]
fn documented_examples() {
    // The module's own examples, as NumPy prints them on x86_64.
    assert_eq!((-1.0f32).cast::<u8>(), 255);
    assert_eq!(300.0f32.cast::<u8>(), 44);
    assert_eq!(f32::NAN.cast::<i32>(), i32::MIN);
    assert_eq!(f64::INFINITY.cast::<i64>(), i64::MIN);
    assert_eq!(2.9f64.cast::<i32>(), 2);
    assert_eq!((-2.9f64).cast::<i32>(), -2);
    assert!(f64::NAN.cast::<bool>());
    assert!(!(-0.0f32).cast::<bool>());
    assert_eq!(true.cast::<f32>(), 1.0);
    assert_eq!(false.cast::<bf16>(), bf16::ZERO);
    assert_eq!(257i64.cast::<u8>(), 1);
    assert_eq!((-129i32).cast::<u8>(), 127);
    assert_eq!(65520.0f64.cast::<f16>(), f16::INFINITY);
    assert_eq!((-65520.0f32).cast::<f16>(), f16::NEG_INFINITY);
    // The widths NumPy 2 adds, as it prints them on x86_64.
    assert_eq!(70000.0f64.cast::<u16>(), 4464);
    assert_eq!((-1.0f64).cast::<u32>(), u32::MAX);
    assert_eq!(f64::NAN.cast::<u32>(), 1 << 31);
    assert_eq!((-3e9f64).cast::<u64>(), 18446744070709551616);
}
