//! `nextafter(a, b)`: the next representable value after each `a` toward `b`, in the dtype's own
//! precision (f16 and bf16 step by their own ulps, which a widened computation would miss), as
//! C's `nextafter` and NumPy's. It works on the bits of each value, on the host: an operand on a
//! GPU goes through the host, counted in `host_round_trips`.

use super::NDArray;
use crate::Device;
use quill_core::{promote_types, DType, Element, Error, Result};

/// A float whose neighbours are found through its bits.
trait Step: Element + Copy + PartialOrd {
    /// The smallest positive subnormal, with the sign of `toward`.
    fn tiny(toward: Self) -> Self;
    /// One ulp up in magnitude (`away_from_zero`) or down, on the bits.
    fn nudge(self, away_from_zero: bool) -> Self;
    fn is_nan(self) -> bool;
    fn is_zero(self) -> bool;
    fn positive(self) -> bool;
}

macro_rules! step {
    ($t:ty, $bits:ty, $to:expr, $from:expr, $nan:expr) => {
        impl Step for $t {
            fn tiny(toward: Self) -> Self {
                let sign = $to(toward) & (1 << (<$bits>::BITS - 1));
                $from(sign | 1)
            }
            fn nudge(self, away_from_zero: bool) -> Self {
                let b = $to(self);
                $from(if away_from_zero { b + 1 } else { b - 1 })
            }
            fn is_nan(self) -> bool {
                $nan(self)
            }
            fn is_zero(self) -> bool {
                $to(self) << 1 == 0
            }
            fn positive(self) -> bool {
                $to(self) >> (<$bits>::BITS - 1) == 0
            }
        }
    };
}
step!(f32, u32, f32::to_bits, f32::from_bits, f32::is_nan);
step!(f64, u64, f64::to_bits, f64::from_bits, f64::is_nan);
step!(
    half::f16,
    u16,
    half::f16::to_bits,
    half::f16::from_bits,
    half::f16::is_nan
);
step!(
    half::bf16,
    u16,
    half::bf16::to_bits,
    half::bf16::from_bits,
    half::bf16::is_nan
);

fn next<T: Step>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        // Either NaN: a NaN (the one given, as C's).
        return if a.is_nan() { a } else { b };
    }
    if a == b {
        return b;
    }
    if a.is_zero() {
        return T::tiny(b);
    }
    // Away from zero when b lies further out on a's side.
    a.nudge((a < b) == a.positive())
}

fn run<T: Step>(a: &NDArray, b: &NDArray, shape: &[usize]) -> Result<NDArray> {
    let (x, y) = (a.to_vec::<T>()?, b.to_vec::<T>()?);
    let out: Vec<T> = x.iter().zip(&y).map(|(&p, &q)| next(p, q)).collect();
    NDArray::from_vec(out, shape)
}

impl NDArray {
    /// The next representable value after each element toward `other` (broadcast), NumPy's
    /// `nextafter`, in the promoted float dtype (integers promote to f64): `a` itself where
    /// `a == b` (giving `b`, so `nextafter(0.0, -0.0)` is `-0.0`), NaN where either is NaN, the
    /// smallest subnormal from zero. Complex operands are an error.
    pub fn nextafter(&self, other: &NDArray) -> Result<NDArray> {
        const OP: &str = "nextafter";
        if self.dtype().is_complex() || other.dtype().is_complex() {
            return Err(Error::invalid(
                OP,
                format!(
                    "needs real operands, got {} and {} (complex numbers have no order)",
                    self.dtype(),
                    other.dtype()
                ),
            ));
        }
        if self.device() != other.device() {
            return Err(Error::DeviceMismatch {
                op: OP,
                lhs: self.device().to_string(),
                rhs: other.device().to_string(),
            });
        }
        let mut dtype = promote_types(self.dtype(), other.dtype());
        if !dtype.is_float() {
            dtype = DType::F64;
        }
        let shape = quill_core::shape::broadcast_shapes(OP, self.shape(), other.shape())?;
        crate::fallback::note_off_host(OP, self.device());
        let prep = |x: &NDArray| -> Result<NDArray> {
            x.to_device(Device::Cpu)?
                .astype(dtype)?
                .broadcast_to(&shape)?
                .compact()
        };
        let (a, b) = (prep(self)?, prep(other)?);
        let out = match dtype {
            DType::F32 => run::<f32>(&a, &b, &shape),
            DType::F16 => run::<half::f16>(&a, &b, &shape),
            DType::BF16 => run::<half::bf16>(&a, &b, &shape),
            _ => run::<f64>(&a, &b, &shape),
        }?;
        out.to_device(self.device())
    }
}
