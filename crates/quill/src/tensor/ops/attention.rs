//! Scaled-dot-product attention as one differentiable op over the backend's fused kernel
//! (the forward saves only the output and each row's logsumexp), next to its composite
//! reference built from matmul and softmax. The fused backward is not itself differentiable,
//! so when the backward is being recorded (`create_graph`) it is written in Tensor ops
//! instead, from the composite formula; gradients of gradients then work as for any op.
//!
//! Causal masking follows PyTorch's `is_causal`: query `i` sees keys `j <= i` (aligned
//! top-left, also when `Lq != Lk`; needle's mask aligns bottom-right, which differs only
//! when the lengths differ).

use crate::tensor::{autocast, is_grad_enabled, Backward, Tensor};
use crate::NDArray;
use quill_core::{DType, Error, Result};

struct Attention {
    causal: bool,
    scale: Option<f64>,
    out: NDArray,
    lse: NDArray,
}

impl Backward for Attention {
    fn name(&self) -> &'static str {
        "ScaledDotProductAttentionBackward"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (q, k, v) = (&inputs[0], &inputs[1], &inputs[2]);
        let (dq, dk, dv) = if is_grad_enabled() {
            composite_backward(q, k, v, g, self.causal, self.scale)?
        } else {
            let (dq, dk, dv) = q.array().scaled_dot_product_attention_backward(
                k.array(),
                v.array(),
                &self.out,
                &self.lse,
                g.array(),
                self.causal,
                self.scale,
            )?;
            (Tensor::new(dq), Tensor::new(dk), Tensor::new(dv))
        };
        let keep = |t: &Tensor, d: Tensor| t.requires_grad().then_some(d);
        Ok(vec![keep(q, dq), keep(k, dk), keep(v, dv)])
    }
}

/// The backward in Tensor ops (differentiable again), from the recomputed probabilities:
/// `dV = P^T g`, `dS = P * (g V^T - rowsum(P * g V^T))`, `dQ = s dS K`, `dK = s dS^T Q`.
fn composite_backward(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    g: &Tensor,
    causal: bool,
    scale: Option<f64>,
) -> Result<(Tensor, Tensor, Tensor)> {
    let s = resolve_scale(q, scale);
    let p = q.attention_probs(k, causal, Some(s))?;
    let dv = p.mt()?.matmul(g)?;
    let dp = g.matmul(&v.mt()?)?;
    let ds = p.mul(&dp.sub(&dp.mul(&p)?.sum(Some(&[-1]), true)?)?)?;
    let dq = ds.matmul(k)?.mul_scalar(s)?;
    let dk = ds.mt()?.matmul(q)?.mul_scalar(s)?;
    Ok((dq, dk, dv))
}

fn resolve_scale(q: &Tensor, scale: Option<f64>) -> f64 {
    let d = q.shape().last().copied().unwrap_or(0);
    scale.unwrap_or(if d == 0 { 1.0 } else { 1.0 / (d as f64).sqrt() })
}

/// The causal keep-mask (Lq, Lk): true where key `j <= i`.
fn causal_keep(lq: usize, lk: usize) -> Result<NDArray> {
    let j = NDArray::arange(0.0, lk as f64, 1.0, DType::I64)?.reshape(&[1, lk as isize])?;
    let i = NDArray::arange(0.0, lq as f64, 1.0, DType::I64)?.reshape(&[lq as isize, 1])?;
    j.le(&i)
}

impl Tensor {
    /// Fused scaled-dot-product attention `softmax(scale * q k^T + mask) v` with this
    /// tensor as `q` (..., Lq, D), `k` (..., Lk, D), `v` (..., Lk, Dv), equal leading dims,
    /// one float dtype; the output is (..., Lq, Dv). `scale` defaults to `1 / sqrt(D)`;
    /// `causal` hides key `j` from query `i` when `j > i` (PyTorch's top-left alignment).
    /// Memory kept for the backward: the output and one logsumexp per query row, never the
    /// (Lq, Lk) probabilities. Under [`autocast`](crate::autocast()) q, k and v are cast to the
    /// autocast dtype and so is the output (the CPU kernel computes in f32 and rounds once).
    pub fn scaled_dot_product_attention(
        &self,
        k: &Tensor,
        v: &Tensor,
        causal: bool,
        scale: Option<f64>,
    ) -> Result<Tensor> {
        if let Some([q, k, v]) = autocast::lower([self, k, v])? {
            return q.scaled_dot_product_attention(&k, &v, causal, scale);
        }
        let (out, lse) =
            self.array()
                .scaled_dot_product_attention(k.array(), v.array(), causal, scale)?;
        let op = Attention {
            causal,
            scale,
            out: out.clone(),
            lse,
        };
        Ok(Tensor::make(out, &[self, k, v], op))
    }

    /// The attention probabilities `softmax(scale * q k^T + mask)` (..., Lq, Lk) with this
    /// tensor as `q`, composed of differentiable primitives (matmul, where, softmax).
    pub fn attention_probs(&self, k: &Tensor, causal: bool, scale: Option<f64>) -> Result<Tensor> {
        const OP: &str = "attention_probs";
        let (sq, sk) = (self.shape(), k.shape());
        if sq.len() < 2 || sk.len() != sq.len() || sq.last() != sk.last() {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: sq.into(),
                rhs: sk.into(),
                hint: " (q (..., Lq, D) and k (..., Lk, D) need one rank >= 2 and one D)".into(),
            });
        }
        let s = self
            .matmul(&k.mt()?)?
            .mul_scalar(resolve_scale(self, scale))?;
        let s = if causal {
            let r = s.ndim();
            let keep = causal_keep(s.shape()[r - 2], s.shape()[r - 1])?;
            let ninf = Tensor::new(NDArray::full(&[], f64::NEG_INFINITY, s.dtype())?);
            Tensor::where_(&keep, &s, &ninf)?
        } else {
            s
        };
        s.softmax(-1)
    }

    /// The composite (reference) attention: `attention_probs(q, k) @ v`, every step a
    /// primitive op; it keeps the (Lq, Lk) probabilities for the backward. Same arguments
    /// and result as `scaled_dot_product_attention`.
    pub fn attention_composite(
        &self,
        k: &Tensor,
        v: &Tensor,
        causal: bool,
        scale: Option<f64>,
    ) -> Result<Tensor> {
        let p = self.attention_probs(k, causal, scale)?;
        let sv = v.shape();
        if sv.len() != k.ndim() || sv[sv.len() - 2] != k.shape()[k.ndim() - 2] {
            return Err(Error::ShapeMismatch {
                op: "attention_composite",
                lhs: k.shape().into(),
                rhs: sv.into(),
                hint: " (v (..., Lk, Dv) needs k's rank and sequence length)".into(),
            });
        }
        p.matmul(v)
    }
}
