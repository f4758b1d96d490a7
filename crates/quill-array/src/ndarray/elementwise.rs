//! Elementwise arithmetic on arrays: unary ops, binary ops with NumPy broadcasting and type
//! promotion (scalars are weak, NEP 50), in-place forms, `where_` and `clip`. Operands of any
//! strides go straight to the kernels; only an operand of the wrong dtype is converted first.

use super::{NDArray, Reads};
use crate::backend::{colocate, Storage};
use quill_core::ops::BinaryKind;
use quill_core::promote::promote_with_scalar;
use quill_core::shape::broadcast_shapes;
use quill_core::{BinaryOp, DType, Error, Result, Scalar, UnaryOp};

impl NDArray {
    /// `op` applied to every element (NumPy's dtype rules: float ops on integers give f64).
    pub fn unary(&self, op: UnaryOp) -> Result<NDArray> {
        if op == UnaryOp::Abs && self.dtype == DType::Bool {
            return self.deep_copy(); // NumPy's abs of bool: the same values
        }
        let compute = op.compute_dtype(self.dtype)?;
        super::check_alloc(op.name(), self.numel(), compute)?;
        let src = self.cast_for(compute)?;
        let out = src.read().unary(op, &src.layout)?;
        NDArray::fresh(out, self.shape())
    }

    /// This array, converted when its dtype differs from `dtype` (no copy otherwise).
    fn cast_for(&self, dtype: DType) -> Result<NDArray> {
        if self.dtype == dtype {
            Ok(self.clone())
        } else {
            self.astype(dtype)
        }
    }

    /// `op(self, other)` with NumPy broadcasting and type promotion.
    pub fn binary(&self, op: BinaryOp, other: &NDArray) -> Result<NDArray> {
        // Same shape and dtype (most calls): no broadcast layouts or casts.
        if self.shape() == other.shape()
            && self.dtype == other.dtype
            && op.compute_dtype(self.dtype, other.dtype)? == self.dtype
        {
            check_int_power(op, self.dtype, other, self.numel())?;
            super::check_alloc(op.name(), self.numel(), self.dtype)?;
            // Operands on one device (the common case) need no colocating: the dispatch
            // itself refuses a mix, and only then are they colocated below.
            let g = Reads::new([self, other]);
            match Storage::binary(op, (g.get(0), &self.layout), (g.get(1), &other.layout)) {
                Err(Error::DeviceMismatch { .. }) => {}
                r => return NDArray::fresh(r?, self.shape()),
            }
        }
        let shape = broadcast_shapes(op.name(), self.shape(), other.shape())?;
        let compute = op.compute_dtype(self.dtype, other.dtype)?;
        check_int_power(op, self.dtype, other, shape.iter().product())?;
        super::check_alloc(op.name(), shape.iter().product(), compute)?;
        let [a, b] = colocate(op.name(), [self, other])?;
        let (a, b) = (a.cast_for(compute)?, b.cast_for(compute)?);
        let la = a.layout.broadcast_to(&shape)?;
        let lb = b.layout.broadcast_to(&shape)?;
        let g = Reads::new([&a, &b]);
        let out = Storage::binary(op, (g.get(0), &la), (g.get(1), &lb))?;
        NDArray::fresh(out, &shape)
    }

    /// `op(self, value)` (or `op(value, self)` when `reversed`), the scalar weak as in NumPy 2:
    /// `f32_array * 2.0` stays f32 and `u8_array + 1` stays u8.
    pub fn binary_scalar(
        &self,
        op: BinaryOp,
        value: impl Into<Scalar>,
        reversed: bool,
    ) -> Result<NDArray> {
        let value = value.into();
        if let Some(side) = out_of_range_comparison(op, self.dtype, value) {
            // The answer is the same for every element: the integer lies past every value of
            // the dtype (NumPy 2 compares exactly; a cast of the integer would wrap).
            let side = if reversed { -side } else { side };
            let truth = match op {
                BinaryOp::Eq => false,
                BinaryOp::Ne => true,
                BinaryOp::Lt | BinaryOp::Le => side < 0,
                _ => side > 0,
            };
            return NDArray::full(self.shape(), truth, DType::Bool);
        }
        let s = scalar_array(op, self.dtype, value)?;
        if reversed {
            s.binary(op, self)
        } else {
            self.binary(op, &s)
        }
    }

    /// `self = op(self, other)`, written into this array or view. `other` must broadcast to this
    /// shape, and the result must convert to this dtype within its kind (NumPy's `same_kind`:
    /// an integer array cannot take a float result).
    pub fn binary_assign(&self, op: BinaryOp, other: &NDArray) -> Result<()> {
        let shape = broadcast_shapes(op.name(), self.shape(), other.shape())?;
        if shape != self.shape() {
            return Err(Error::ShapeMismatch {
                op: op.name(),
                lhs: self.shape().into(),
                rhs: other.shape().into(),
                hint: " (an in-place op cannot change the destination's shape)".into(),
            });
        }
        self.check_writable(op.name())?;
        check_int_power(op, self.dtype, other, self.numel())?;
        let result = op.result_dtype(self.dtype, other.dtype)?;
        if !quill_core::promote::same_kind(result, self.dtype) {
            return Err(Error::invalid(
                op.name(),
                format!(
                    "cannot write a {result} result into a {} array in place (casting rule \
                     same_kind); use the out-of-place form and astype",
                    self.dtype
                ),
            ));
        }
        let compute = op.compute_dtype(self.dtype, other.dtype)?;
        let direct = self.is_contiguous()
            && !self.shares_storage_with(other)
            && compute == self.dtype
            && result == self.dtype;
        if !direct {
            return self.assign(&self.binary(op, other)?);
        }
        let run = |b: &NDArray| -> Result<()> {
            let lb = b.layout.broadcast_to(self.shape())?;
            let gb = b.read();
            let mut gs = self.write();
            Storage::binary_inplace(op, &mut gs, &self.layout, (&gb, &lb))
        };
        let b = other.cast_for(compute)?;
        // Colocated only when the dispatch refuses a mix (a CPU scalar into a GPU array).
        match run(&b) {
            Err(Error::DeviceMismatch { .. }) => run(&colocate(op.name(), [self, &b])?[1]),
            r => r,
        }
    }

    /// `self = op(self, value)` in place, the scalar weak as in `binary_scalar`.
    pub fn binary_scalar_assign(&self, op: BinaryOp, value: impl Into<Scalar>) -> Result<()> {
        self.check_writable(op.name())?;
        let s = scalar_array(op, self.dtype, value.into())?;
        self.binary_assign(op, &s)
    }

    /// Elements of `a` where `cond` is true, else of `b`; the three broadcast together and `a`,
    /// `b` promote to a common dtype. `cond` is converted to bool (nonzero is true).
    pub fn where_(cond: &NDArray, a: &NDArray, b: &NDArray) -> Result<NDArray> {
        const OP: &str = "where";
        let shape = broadcast_shapes(OP, cond.shape(), a.shape())?;
        let shape = broadcast_shapes(OP, &shape, b.shape())?;
        let dtype = quill_core::promote_types(a.dtype, b.dtype);
        super::check_alloc(OP, shape.iter().product(), dtype)?;
        let (c, a, b) = (
            cond.cast_for(DType::Bool)?,
            a.cast_for(dtype)?,
            b.cast_for(dtype)?,
        );
        let [c, a, b] = colocate(OP, [&c, &a, &b])?;
        let (lc, la, lb) = (
            c.layout.broadcast_to(&shape)?,
            a.layout.broadcast_to(&shape)?,
            b.layout.broadcast_to(&shape)?,
        );
        let g = Reads::new([&c, &a, &b]);
        let out = Storage::where_((g.get(0), &lc), (g.get(1), &la), (g.get(2), &lb))?;
        NDArray::fresh(out, &shape)
    }

    /// Elements limited to `[min, max]` (NumPy's `clip`: `minimum(maximum(x, min), max)`; NaN
    /// stays NaN).
    pub fn clip(&self, min: impl Into<Scalar>, max: impl Into<Scalar>) -> Result<NDArray> {
        self.binary_scalar(BinaryOp::Maximum, min, false)?
            .binary_scalar(BinaryOp::Minimum, max, false)
    }
}

/// NumPy refuses an integer power with a negative integer exponent anywhere in the exponent
/// (the exact result is not an integer), whichever operand is an array or a scalar. NumPy
/// checks each computed element, so a result of `out_numel == 0` elements is never refused.
fn check_int_power(op: BinaryOp, base: DType, exponent: &NDArray, out_numel: usize) -> Result<()> {
    if op != BinaryOp::Pow || !op.compute_dtype(base, exponent.dtype)?.is_int() {
        return Ok(());
    }
    if !exponent.dtype.is_signed_int() || out_numel == 0 {
        return Ok(());
    }
    let lowest = exponent.min(None, false)?.item::<i64>()?;
    if lowest < 0 {
        return Err(Error::invalid(
            op.name(),
            format!(
                "Integers to negative integer powers are not allowed (NumPy's rule): a {base} \
                 base with exponent {lowest}; astype to a float dtype first"
            ),
        ));
    }
    Ok(())
}

/// For a comparison of an integer (or bool) array with an integer outside the range of the
/// dtype it computes in: the sign of `element - value`, the same for every element (`1` when
/// the value lies below the range, `-1` above); else `None`.
fn out_of_range_comparison(op: BinaryOp, array: DType, s: Scalar) -> Option<i8> {
    let (Scalar::I(v), true) = (s, op.is_comparison()) else {
        return None;
    };
    let computes_in = promote_with_scalar(array, s);
    let (lo, hi) = quill_core::promote::int_range(computes_in)?;
    if v < lo {
        Some(1)
    } else if v > hi {
        Some(-1)
    } else {
        None
    }
}

/// The rank-0 array a weak scalar becomes next to an array of dtype `array`.
fn scalar_array(op: BinaryOp, array: DType, s: Scalar) -> Result<NDArray> {
    let mut dtype = promote_with_scalar(array, s);
    if op == BinaryOp::Pow && array == DType::Bool && s == Scalar::I(2) {
        // NumPy turns `x ** 2` into `square(x)`, whose bool loop is its int8 one.
        dtype = DType::I8;
    }
    if op.kind() == BinaryKind::Float && dtype.is_int() {
        // A float op (true divide, atan2) converts integer operands to its float dtype first,
        // so NumPy takes any Python int there: u8_array / -1 is -0.0, not an OverflowError.
        dtype = op.compute_dtype(dtype, dtype)?;
    }
    // (Comparisons with an out-of-range integer never get here: `binary_scalar` answers them.)
    if let (Scalar::I(v), Some((lo, hi))) = (s, quill_core::promote::int_range(dtype)) {
        if v < lo || v > hi {
            return Err(Error::ValueOutOfRange {
                op: op.name(),
                value: format!("the integer {v} is"),
                dtype,
                hint: " (NumPy 2 rule); astype the array to a wider dtype first".into(),
            });
        }
    }
    NDArray::full(&[], s, dtype)
}
