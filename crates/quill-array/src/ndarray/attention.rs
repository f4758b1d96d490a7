//! Fused scaled-dot-product attention on arrays: the shape and dtype rules, compaction of the
//! operands (the backends' kernels read contiguous buffers), and the calls into the backend's
//! `attention` / `attention_backward`. f16 and bf16 compute in f32 and round once.

use super::{check_alloc, NDArray, Reads};
use crate::backend::{colocate, Storage};
use quill_core::{AttnDims, DType, Error, Result};

const OP: &str = "scaled_dot_product_attention";

/// The checked problem: sizes, the leading (batch, head, ...) dims and the compute dtype.
struct Problem {
    dims: AttnDims,
    lead: Vec<usize>,
    compute: DType,
}

fn problem(
    q: &NDArray,
    k: &NDArray,
    v: &NDArray,
    causal: bool,
    scale: Option<f64>,
) -> Result<Problem> {
    let (sq, sk, sv) = (q.shape(), k.shape(), v.shape());
    let shapes = format!("q {sq:?}, k {sk:?}, v {sv:?}");
    if sq.len() < 2 || sk.len() < 2 || sv.len() < 2 {
        return Err(Error::invalid(
            OP,
            format!("q, k and v need rank >= 2 (..., seq, dim), got {shapes}"),
        ));
    }
    if sk.len() != sq.len() || sv.len() != sq.len() {
        return Err(Error::invalid(
            OP,
            format!("q, k and v need one rank, got {shapes}"),
        ));
    }
    let r = sq.len();
    let mismatch = |what: &str| Error::ShapeMismatch {
        op: OP,
        lhs: sq.into(),
        rhs: sk.into(),
        hint: format!(" ({what}; q, k, v: {shapes})"),
    };
    if sq[..r - 2] != sk[..r - 2] || sq[..r - 2] != sv[..r - 2] {
        return Err(mismatch("the leading (batch, head) dims must be equal"));
    }
    if sq[r - 1] != sk[r - 1] {
        return Err(mismatch("q and k need the same last dim"));
    }
    if sk[r - 2] != sv[r - 2] {
        return Err(mismatch("k and v need the same sequence length"));
    }
    for x in [k, v] {
        if x.dtype() != q.dtype() {
            return Err(Error::DTypeMismatch {
                op: OP,
                expected: q.dtype(),
                got: x.dtype(),
            });
        }
    }
    let compute = match q.dtype() {
        DType::F64 => DType::F64,
        DType::F32 | DType::F16 | DType::BF16 => DType::F32,
        d => {
            return Err(Error::invalid(
                OP,
                format!("needs floating-point q, k, v, got {d}"),
            ))
        }
    };
    let d = sq[r - 1];
    let scale = scale.unwrap_or(if d == 0 { 1.0 } else { 1.0 / (d as f64).sqrt() });
    if !scale.is_finite() {
        return Err(Error::invalid(
            OP,
            format!("scale must be finite, got {scale}"),
        ));
    }
    let lead = sq[..r - 2].to_vec();
    Ok(Problem {
        dims: AttnDims {
            batch: lead.iter().product(),
            lq: sq[r - 2],
            lk: sk[r - 2],
            d,
            dv: sv[r - 1],
            causal,
            scale,
        },
        lead,
        compute,
    })
}

/// `x` contiguous in `dtype`.
fn prepared(x: &NDArray, dtype: DType) -> Result<NDArray> {
    if x.dtype() == dtype {
        x.compact()
    } else {
        x.astype(dtype)
    }
}

fn shape(lead: &[usize], last: &[usize]) -> Vec<usize> {
    [lead, last].concat()
}

impl NDArray {
    /// Fused scaled-dot-product attention `softmax(scale * q k^T + mask) v` for `q`
    /// (..., Lq, D), `k` (..., Lk, D), `v` (..., Lk, Dv) with equal leading dims: returns the
    /// output (..., Lq, Dv) and the logsumexp of each row of scaled scores (..., Lq), which
    /// is all the backward needs. `scale` defaults to `1 / sqrt(D)`. `causal` hides key `j`
    /// from query `i` when `j > i` (PyTorch's `is_causal`, aligned top-left also when
    /// `Lq != Lk`). No (Lq, Lk) matrix is formed: keys are visited in tiles with an online
    /// softmax. f16 / bf16 compute in f32; the logsumexp is f32 for them.
    pub fn scaled_dot_product_attention(
        &self,
        k: &NDArray,
        v: &NDArray,
        causal: bool,
        scale: Option<f64>,
    ) -> Result<(NDArray, NDArray)> {
        let p = problem(self, k, v, causal, scale)?;
        let d = &p.dims;
        check_alloc(OP, d.batch * d.lq * d.dv, p.compute)?;
        let [q, k, v] = colocate(OP, [self, k, v])?;
        let [q, k, v] = [&q, &k, &v].map(|x| prepared(x, p.compute));
        let (q, k, v) = (q?, k?, v?);
        let (o, l) = {
            let g = Reads::new([&q, &k, &v]);
            Storage::attention(
                (g.get(0), q.offset()),
                (g.get(1), k.offset()),
                (g.get(2), v.offset()),
                d,
            )?
        };
        let out = NDArray::fresh(o, &shape(&p.lead, &[d.lq, d.dv]))?;
        let lse = NDArray::fresh(l, &shape(&p.lead, &[d.lq]))?;
        let out = if out.dtype() != self.dtype() {
            out.astype(self.dtype())?
        } else {
            out
        };
        Ok((out, lse))
    }

    /// The gradients `(dq, dk, dv)` of `scaled_dot_product_attention` at `q` (self), `k`,
    /// `v`, given its output `out`, its logsumexp `lse` and the output's gradient `grad`;
    /// `causal` and `scale` as in the forward. Scores are recomputed tile by tile: at most
    /// one tile of them exists at a time.
    #[allow(clippy::too_many_arguments)]
    pub fn scaled_dot_product_attention_backward(
        &self,
        k: &NDArray,
        v: &NDArray,
        out: &NDArray,
        lse: &NDArray,
        grad: &NDArray,
        causal: bool,
        scale: Option<f64>,
    ) -> Result<(NDArray, NDArray, NDArray)> {
        const BOP: &str = "attention_backward";
        let p = problem(self, k, v, causal, scale)?;
        let d = &p.dims;
        let want_o = shape(&p.lead, &[d.lq, d.dv]);
        let want_l = shape(&p.lead, &[d.lq]);
        for (x, want, what) in [
            (out, &want_o, "out"),
            (grad, &want_o, "grad"),
            (lse, &want_l, "lse"),
        ] {
            if x.shape() != want.as_slice() {
                return Err(Error::ShapeMismatch {
                    op: BOP,
                    lhs: x.shape().into(),
                    rhs: want.as_slice().into(),
                    hint: format!(" ({what} must have the shape the forward gave)"),
                });
            }
        }
        let arrays = colocate(BOP, [self, k, v, out, grad, lse])?;
        let prepared: Vec<NDArray> = arrays
            .iter()
            .map(|x| prepared(x, p.compute))
            .collect::<Result<_>>()?;
        let [q, k, v, o, g, l] = [0, 1, 2, 3, 4, 5].map(|i| &prepared[i]);
        let (a, b, c) = {
            let r = Reads::new([q, k, v, o, g, l]);
            let at = |i: usize, x: &NDArray| (r.get(i), x.offset());
            Storage::attention_backward(
                [at(0, q), at(1, k), at(2, v), at(3, o), at(4, g), at(5, l)],
                d,
            )?
        };
        let back = |s: Storage, sh: &[usize], dt: DType| -> Result<NDArray> {
            let x = NDArray::fresh(s, sh)?;
            Ok(if x.dtype() != dt { x.astype(dt)? } else { x })
        };
        Ok((
            back(a, self.shape(), self.dtype())?,
            back(b, k.shape(), self.dtype())?,
            back(c, v.shape(), self.dtype())?,
        ))
    }
}
