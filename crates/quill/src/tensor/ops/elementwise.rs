//! Elementwise ops: unary, binary with broadcasting (the gradient is summed back to each
//! input's shape), scalar forms, `where_` and `clip`. Comparisons and logical ops give constant
//! bool tensors.

use super::{mul_mask, sum_to};
use crate::tensor::{autocast, is_grad_enabled, Backward, Tensor};
use crate::NDArray;
use quill_core::{BinaryOp, Result, Scalar, UnaryOp};
use std::f64::consts::{LN_2, PI};

/// The unary ops that run in f32 under autocast (those of PyTorch's CUDA f32 list that quill
/// has): bf16's 8-bit mantissa makes `exp` of a logit or `log` of a probability lose most of
/// its digits.
const AUTOCAST_F32: [UnaryOp; 8] = [
    UnaryOp::Exp,
    UnaryOp::Exp2,
    UnaryOp::Expm1,
    UnaryOp::Log,
    UnaryOp::Log2,
    UnaryOp::Log10,
    UnaryOp::Log1p,
    UnaryOp::Rsqrt,
];

struct Unary {
    op: UnaryOp,
    /// The forward result, reused by backward unless the backward is itself recorded (then it
    /// is recomputed from the input, so that its own gradient flows).
    out: NDArray,
}

impl Unary {
    fn out(&self, x: &Tensor) -> Result<Tensor> {
        if is_grad_enabled() {
            x.unary(self.op)
        } else {
            Ok(Tensor::new(self.out.clone()))
        }
    }
}

impl Backward for Unary {
    fn name(&self) -> &'static str {
        "UnaryBackward"
    }
    /// abs is not: its backward, g times sign(z) = z / |z|, is already PyTorch's complex form.
    fn holomorphic(&self) -> bool {
        self.op != UnaryOp::Abs
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        use UnaryOp::*;
        let x = &inputs[0];
        let gx = match self.op {
            Neg => g.neg()?,
            // Complex: g sgn(z) = g z / |z| (0 at 0), in Tensor ops so that it differentiates
            // again (sgn is not locally constant off the real line).
            Abs if x.dtype().is_complex() => {
                let r = x.abs()?;
                let at_zero = Tensor::new(r.array().eq_scalar(0.0)?.astype(r.dtype())?);
                let sgn = x.div(&r.add(&at_zero)?.astype(x.dtype())?)?;
                g.astype(x.dtype())?.mul(&sgn)?
            }
            Abs => mul_mask(g, &x.array().sign()?)?,
            Sign | Floor | Ceil | Round | Trunc => g.zeros_like()?,
            Exp => g.mul(&self.out(x)?)?,
            Exp2 => g.mul(&self.out(x)?)?.mul_scalar(LN_2)?,
            Log => g.div(x)?,
            Log2 => g.div(&x.mul_scalar(LN_2)?)?,
            Log10 => g.div(&x.mul_scalar(std::f64::consts::LN_10)?)?,
            Log1p => g.div(&x.add_scalar(1.0)?)?,
            Expm1 => g.mul(&self.out(x)?.add_scalar(1.0)?)?,
            Sqrt => g.div(&self.out(x)?.mul_scalar(2.0)?)?,
            Rsqrt => g.mul(&self.out(x)?.pow_scalar(3.0)?)?.mul_scalar(-0.5)?,
            Square => g.mul(x)?.mul_scalar(2.0)?,
            Reciprocal => g.mul(&self.out(x)?.square()?)?.neg()?,
            Sin => g.mul(&x.cos()?)?,
            Cos => g.mul(&x.sin()?)?.neg()?,
            Tan => g.mul(&self.out(x)?.square()?.add_scalar(1.0)?)?,
            Tanh => g.mul(&self.out(x)?.square()?.rsub_scalar(1.0)?)?,
            // d asin = 1/sqrt(1 - x^2), d acos = -1/sqrt(1 - x^2), d atan = 1/(1 + x^2)
            Asin => g.mul(&x.square()?.rsub_scalar(1.0)?.rsqrt()?)?,
            Acos => g.mul(&x.square()?.rsub_scalar(1.0)?.rsqrt()?)?.neg()?,
            Atan => g.div(&x.square()?.add_scalar(1.0)?)?,
            Sinh => g.mul(&x.cosh()?)?,
            Cosh => g.mul(&x.sinh()?)?,
            // d asinh = 1/sqrt(x^2 + 1), d acosh = 1/sqrt(x^2 - 1), d atanh = 1/(1 - x^2)
            Asinh => g.mul(&x.square()?.add_scalar(1.0)?.rsqrt()?)?,
            Acosh => g.mul(&x.square()?.add_scalar(-1.0)?.rsqrt()?)?,
            Atanh => g.div(&x.square()?.rsub_scalar(1.0)?)?,
            Sigmoid => {
                let s = self.out(x)?;
                g.mul(&s.mul(&s.rsub_scalar(1.0)?)?)?
            }
            Relu => mul_mask(g, &x.array().gt_scalar(0.0)?)?,
            Gelu => {
                // d/dx x*Phi(x) = Phi(x) + x*phi(x)
                let cdf = x
                    .mul_scalar(std::f64::consts::FRAC_1_SQRT_2)?
                    .erf()?
                    .add_scalar(1.0)?
                    .mul_scalar(0.5)?;
                let pdf = x
                    .square()?
                    .mul_scalar(-0.5)?
                    .exp()?
                    .mul_scalar(1.0 / (2.0 * PI).sqrt())?;
                g.mul(&cdf.add(&x.mul(&pdf)?)?)?
            }
            GeluTanh => {
                // y = x/2 (1 + tanh u), u = c (x + k x^3):
                // y' = (1 + t)/2 + x/2 (1 - t^2) c (1 + 3k x^2)
                let (c, k) = ((2.0 / PI).sqrt(), 0.044715);
                let x2 = x.square()?;
                let u = x.mul(&x2.mul_scalar(k)?.add_scalar(1.0)?)?.mul_scalar(c)?;
                let t = u.tanh()?;
                let du = x2.mul_scalar(3.0 * k)?.add_scalar(1.0)?.mul_scalar(c)?;
                let a = t.add_scalar(1.0)?.mul_scalar(0.5)?;
                let b = x
                    .mul_scalar(0.5)?
                    .mul(&t.square()?.rsub_scalar(1.0)?)?
                    .mul(&du)?;
                g.mul(&a.add(&b)?)?
            }
            Erf => g.mul(&x.square()?.neg()?.exp()?.mul_scalar(2.0 / PI.sqrt())?)?,
            LogicalNot | IsNan | IsInf | IsFinite | SignBit => return Ok(vec![None]),
        };
        Ok(vec![Some(gx)])
    }
}

struct Binary {
    op: BinaryOp,
}

impl Backward for Binary {
    fn name(&self) -> &'static str {
        "BinaryBackward"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        use BinaryOp::*;
        let (a, b) = (&inputs[0], &inputs[1]);
        let need = (a.requires_grad(), b.requires_grad());
        let (ga, gb) = match self.op {
            Add => (Some(g.clone()), Some(g.clone())),
            Sub => (Some(g.clone()), need.1.then(|| g.neg()).transpose()?),
            Mul => (
                need.0.then(|| g.mul(b)).transpose()?,
                need.1.then(|| g.mul(a)).transpose()?,
            ),
            Div => (
                need.0.then(|| g.div(b)).transpose()?,
                need.1
                    .then(|| g.mul(a)?.div(&b.square()?)?.neg())
                    .transpose()?,
            ),
            Pow => {
                let ga = need
                    .0
                    .then(|| g.mul(b)?.mul(&a.pow(&b.sub_scalar(1.0)?)?))
                    .transpose()?;
                let gb = need
                    .1
                    .then(|| -> Result<Tensor> {
                        // 0^b has derivative 0 in b where b >= 0 (PyTorch's convention), not
                        // 0 * log 0 = nan.
                        let t = g.mul(&a.pow(b)?)?.mul(&a.log()?)?;
                        let zero = a
                            .array()
                            .eq_scalar(0.0)?
                            .logical_and(&b.array().ge_scalar(0.0)?)?;
                        t.where_zero(&zero)
                    })
                    .transpose()?;
                (ga, gb)
            }
            Maximum | Minimum => {
                // Ties share the gradient equally, as PyTorch's maximum.
                let (aa, ba) = (a.array(), b.array());
                let win = if self.op == Maximum {
                    aa.gt(ba)?
                } else {
                    aa.lt(ba)?
                };
                let lose = if self.op == Maximum {
                    aa.lt(ba)?
                } else {
                    aa.gt(ba)?
                };
                let tie = aa.eq(ba)?.astype(g.dtype())?.mul_scalar(0.5)?;
                let wa = win.astype(g.dtype())?.add(&tie)?;
                let wb = lose.astype(g.dtype())?.add(&tie)?;
                (
                    need.0.then(|| mul_mask(g, &wa)).transpose()?,
                    need.1.then(|| mul_mask(g, &wb)).transpose()?,
                )
            }
            Remainder => (
                Some(g.clone()),
                need.1
                    .then(|| g.mul(&a.div(b)?.floor()?)?.neg())
                    .transpose()?,
            ),
            Atan2 => {
                let den = a.square()?.add(&b.square()?)?;
                (
                    need.0.then(|| g.mul(b)?.div(&den)).transpose()?,
                    need.1.then(|| g.mul(a)?.div(&den)?.neg()).transpose()?,
                )
            }
            // Piecewise constant (floor_divide) or integer and bool results: nothing to
            // differentiate.
            FloorDiv | Eq | Ne | Lt | Le | Gt | Ge | LogicalAnd | LogicalOr | LogicalXor
            | BitAnd | BitOr | BitXor | Shl | Shr => (None, None),
        };
        Ok(vec![
            ga.map(|t| sum_to(&t, a.shape())).transpose()?,
            gb.map(|t| sum_to(&t, b.shape())).transpose()?,
        ])
    }
}

struct Where {
    cond: NDArray,
}

impl Backward for Where {
    fn name(&self) -> &'static str {
        "WhereBackward"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let zero = Tensor::new(NDArray::zeros(&[], g.dtype())?);
        let ga = inputs[0]
            .requires_grad()
            .then(|| sum_to(&Tensor::where_(&self.cond, g, &zero)?, inputs[0].shape()))
            .transpose()?;
        let gb = inputs[1]
            .requires_grad()
            .then(|| sum_to(&Tensor::where_(&self.cond, &zero, g)?, inputs[1].shape()))
            .transpose()?;
        Ok(vec![ga, gb])
    }
}

struct Clip {
    /// Where the input lay inside [min, max], so the gradient passes.
    inside: NDArray,
}

impl Backward for Clip {
    fn name(&self) -> &'static str {
        "ClipBackward"
    }
    fn backward(&self, g: &Tensor, _: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(mul_mask(g, &self.inside)?)])
    }
}

impl Tensor {
    /// Elementwise `op` (see `UnaryOp`). Under [`autocast`](crate::autocast()), the exponentials,
    /// logarithms and reciprocals widen a bf16 / f16 operand to f32 (their results leave bf16's
    /// range or need its missing mantissa) and return f32.
    pub fn unary(&self, op: UnaryOp) -> Result<Tensor> {
        if autocast::is_autocast_enabled() && AUTOCAST_F32.contains(&op) {
            let x = autocast::widen(self)?;
            if !x.same_node(self) {
                return x.unary(op);
            }
        }
        let out = self.array().unary(op)?;
        Ok(Tensor::make(out.clone(), &[self], Unary { op, out }))
    }

    /// Elementwise `op(self, other)` with NumPy broadcasting and promotion.
    pub fn binary(&self, op: BinaryOp, other: &Tensor) -> Result<Tensor> {
        let out = self.array().binary(op, other.array())?;
        Ok(Tensor::make(out, &[self, other], Binary { op }))
    }

    /// `op(self, value)` (or `op(value, self)` when `reversed`) with a weak scalar: the
    /// result keeps a float tensor's dtype.
    pub fn binary_scalar(
        &self,
        op: BinaryOp,
        value: impl Into<Scalar>,
        reversed: bool,
    ) -> Result<Tensor> {
        let value = value.into();
        if !(self.dtype().is_float() || self.dtype().is_complex())
            || !self.requires_grad()
            || !is_grad_enabled()
        {
            return Ok(Tensor::new(
                self.array().binary_scalar(op, value, reversed)?,
            ));
        }
        let s = Tensor::new(NDArray::full(&[], value, self.dtype())?);
        s.0.scalar_operand.set(true);
        if reversed {
            s.binary(op, self)
        } else {
            self.binary(op, &s)
        }
    }

    /// Elements of `a` where `cond` is true, else of `b` (broadcast together).
    pub fn where_(cond: &NDArray, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let out = NDArray::where_(cond, a.array(), b.array())?;
        let cond = cond
            .astype(quill_core::DType::Bool)?
            .broadcast_to(out.shape())?;
        Ok(Tensor::make(out, &[a, b], Where { cond }))
    }

    /// `g` with zeros where `mask` is true (a helper for masked gradients).
    fn where_zero(&self, mask: &NDArray) -> Result<Tensor> {
        let z = Tensor::new(NDArray::zeros(&[], self.dtype())?);
        Tensor::where_(mask, &z, self)
    }

    /// Limits every element to `[min, max]`; the gradient passes where the input lay inside.
    pub fn clip(&self, min: impl Into<Scalar>, max: impl Into<Scalar>) -> Result<Tensor> {
        let (min, max) = (min.into(), max.into());
        let out = self.array().clip(min, max)?;
        let inside = self
            .array()
            .ge_scalar(min)?
            .logical_and(&self.array().le_scalar(max)?)?;
        Ok(Tensor::make(out, &[self], Clip { inside }))
    }
}

// `x.exp()`, `x.add(&y)`, `x.add_scalar(1.0)`, `x.rsub_scalar(1.0)`, ...: one method per op of
// quill-core's tables (the same callbacks as NDArray's).
quill_core::unary_ops!(quill_array::unary_methods { Tensor });
quill_core::binary_ops!(quill_array::binary_methods { Tensor });
