//! Scaled-dot-product attention `softmax(scale * q k^T + mask) v`, forward and backward, as
//! fused ops. The CPU kernel (`quill_cpu::attention`) visits the keys in tiles with an online
//! softmax, so no (Lq, Lk) matrix is formed, and the backward recomputes the scores tile by
//! tile; f16 and bf16 compute in f32 and round once. The composite forms the scores with two
//! batched matmuls and a logsumexp, on any device (a GPU runs it on its own matmul and
//! elementwise kernels instead of copying to the host).

use super::{floats, run, FusedKind, FusedOp};
use crate::backend::Storage;
use crate::ndarray::{check_alloc, prepared, Reads};
use crate::NDArray;
use quill_core::{AttnDims, DType, Error, Result};
use quill_cpu::attention;

const OP: &str = "scaled_dot_product_attention";
const BOP: &str = "scaled_dot_product_attention_backward";

/// The forward's registry entry.
pub(crate) const FORWARD: FusedKind = FusedKind {
    name: OP,
    cpu: floats,
    cuda: super::none,
    composite: &[
        "matmul",
        "mul",
        "where",
        "logsumexp",
        "sub",
        "exp",
        "astype",
    ],
};

/// The backward's registry entry.
pub(crate) const BACKWARD: FusedKind = FusedKind {
    name: BOP,
    cpu: floats,
    cuda: super::none,
    composite: &["matmul", "mul", "where", "sub", "exp", "sum", "astype"],
};

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
    // Formatted only for an error: this runs on every attention call, twice (check and run).
    let shapes = || format!("q {sq:?}, k {sk:?}, v {sv:?}");
    if sq.len() < 2 || sk.len() < 2 || sv.len() < 2 {
        return Err(Error::invalid(
            OP,
            format!(
                "q, k and v need rank >= 2 (..., seq, dim), got {}",
                shapes()
            ),
        ));
    }
    if sk.len() != sq.len() || sv.len() != sq.len() {
        return Err(Error::invalid(
            OP,
            format!("q, k and v need one rank, got {}", shapes()),
        ));
    }
    let r = sq.len();
    let mismatch = |what: &str| Error::ShapeMismatch {
        op: OP,
        lhs: sq.into(),
        rhs: sk.into(),
        hint: format!(" ({what}; q, k, v: {})", shapes()),
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

fn shape(lead: &[usize], last: &[usize]) -> Vec<usize> {
    [lead, last].concat()
}

/// The scaled scores `scale * q k^T` in the compute dtype with the causal mask applied
/// (`-inf` where key j > query i), shape (..., Lq, Lk).
fn scores(q: &NDArray, k: &NDArray, p: &Problem) -> Result<NDArray> {
    let (q, k) = (q.astype_if(p.compute)?, k.astype_if(p.compute)?);
    let r = q.ndim() as isize;
    let s = q
        .matmul(&k.transpose(r - 2, r - 1)?)?
        .mul_scalar(p.dims.scale)?;
    if !p.dims.causal {
        return Ok(s);
    }
    let (lq, lk) = (p.dims.lq, p.dims.lk);
    let rows = NDArray::arange(0.0, lq as f64, 1.0, DType::I64)?.reshape(&[lq as isize, 1])?;
    let cols = NDArray::arange(0.0, lk as f64, 1.0, DType::I64)?.reshape(&[1, lk as isize])?;
    let hidden = cols.gt(&rows)?.to_device(s.device())?;
    let neg = NDArray::full(&[], f64::NEG_INFINITY, p.compute)?.to_device(s.device())?;
    NDArray::where_(&hidden, &neg, &s)
}

struct Forward {
    causal: bool,
    scale: Option<f64>,
}

impl FusedOp for Forward {
    type Output = (NDArray, NDArray);
    fn kind(&self) -> &'static FusedKind {
        &FORWARD
    }
    fn check(&self, i: &[&NDArray]) -> Result<()> {
        problem(i[0], i[1], i[2], self.causal, self.scale).map(|_| ())
    }
    fn composite(&self, i: &[&NDArray]) -> Result<Self::Output> {
        let p = problem(i[0], i[1], i[2], self.causal, self.scale)?;
        let s = scores(i[0], i[1], &p)?;
        let lse = s.logsumexp(Some(&[-1]), true)?;
        // exp(-inf - lse) is 0 for hidden keys; a row with no key (Lk = 0) sums nothing.
        let probs = s.sub(&lse)?.exp()?;
        let out = probs.matmul(&i[2].astype_if(p.compute)?)?;
        Ok((out.astype_if(i[0].dtype())?, lse.squeeze(&[-1])?))
    }
    fn cpu(&self, i: &[&NDArray]) -> Result<Self::Output> {
        let p = problem(i[0], i[1], i[2], self.causal, self.scale)?;
        let d = &p.dims;
        check_alloc(OP, d.batch * d.lq * d.dv, p.compute)?;
        let [q, k, v] = [i[0], i[1], i[2]].map(|x| prepared(x, p.compute));
        let (q, k, v) = (q?, k?, v?);
        let (o, l) = {
            let g = Reads::new([&q, &k, &v]);
            let at =
                |n: usize, x: &NDArray| -> Result<_> { Ok((g.get(n).try_cpu(OP)?, x.offset())) };
            attention::forward(at(0, &q)?, at(1, &k)?, at(2, &v)?, d)?
        };
        let out = NDArray::fresh(Storage::Cpu(o), &shape(&p.lead, &[d.lq, d.dv]))?;
        let lse = NDArray::fresh(Storage::Cpu(l), &shape(&p.lead, &[d.lq]))?;
        Ok((out.astype_if(i[0].dtype())?, lse))
    }
}

struct Backward {
    causal: bool,
    scale: Option<f64>,
}

impl Backward {
    /// The checked problem and the shape checks of out, grad and lse.
    fn problem(&self, i: &[&NDArray]) -> Result<Problem> {
        let p = problem(i[0], i[1], i[2], self.causal, self.scale)?;
        let d = &p.dims;
        let want_o = shape(&p.lead, &[d.lq, d.dv]);
        let want_l = shape(&p.lead, &[d.lq]);
        for (x, want, what) in [
            (i[3], &want_o, "out"),
            (i[4], &want_o, "grad"),
            (i[5], &want_l, "lse"),
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
        Ok(p)
    }
}

impl FusedOp for Backward {
    type Output = (NDArray, NDArray, NDArray);
    fn kind(&self) -> &'static FusedKind {
        &BACKWARD
    }
    /// q, k, v, out, grad, lse.
    fn check(&self, i: &[&NDArray]) -> Result<()> {
        self.problem(i).map(|_| ())
    }
    fn composite(&self, i: &[&NDArray]) -> Result<Self::Output> {
        let p = self.problem(i)?;
        let c = p.compute;
        let r = i[0].ndim() as isize;
        let t = |x: &NDArray| x.transpose(r - 2, r - 1);
        let (q, k, v) = (i[0].astype_if(c)?, i[1].astype_if(c)?, i[2].astype_if(c)?);
        let (out, g) = (i[3].astype_if(c)?, i[4].astype_if(c)?);
        let lse = i[5].astype_if(c)?.unsqueeze(-1)?;
        let probs = scores(&q, &k, &p)?.sub(&lse)?.exp()?;
        let dv = t(&probs)?.matmul(&g)?;
        // ds = P * (dP - rowsum(dO * O)), dP = dO v^T.
        let dp = g.matmul(&t(&v)?)?;
        let row = g.mul(&out)?.sum(Some(&[-1]), true)?;
        let ds = probs.mul(&dp.sub(&row)?)?.mul_scalar(p.dims.scale)?;
        let dq = ds.matmul(&k)?;
        let dk = t(&ds)?.matmul(&q)?;
        let dt = i[0].dtype();
        Ok((dq.astype_if(dt)?, dk.astype_if(dt)?, dv.astype_if(dt)?))
    }
    fn cpu(&self, i: &[&NDArray]) -> Result<Self::Output> {
        let p = self.problem(i)?;
        let d = &p.dims;
        let pre: Vec<NDArray> = i
            .iter()
            .map(|x| prepared(x, p.compute))
            .collect::<Result<_>>()?;
        let [q, k, v, o, g, l] = [0, 1, 2, 3, 4, 5].map(|n| &pre[n]);
        let (a, b, c) = {
            let r = Reads::new([q, k, v, o, g, l]);
            let at =
                |n: usize, x: &NDArray| -> Result<_> { Ok((r.get(n).try_cpu(BOP)?, x.offset())) };
            attention::backward(
                at(0, q)?,
                at(1, k)?,
                at(2, v)?,
                at(3, o)?,
                at(4, g)?,
                at(5, l)?,
                d,
            )?
        };
        let dt = i[0].dtype();
        let back = |s, sh: &[usize]| -> Result<NDArray> {
            NDArray::fresh(Storage::Cpu(s), sh)?.astype_if(dt)
        };
        Ok((
            back(a, i[0].shape())?,
            back(b, i[1].shape())?,
            back(c, i[2].shape())?,
        ))
    }
}

impl NDArray {
    /// Fused scaled-dot-product attention `softmax(scale * q k^T + mask) v` for `q`
    /// (..., Lq, D), `k` (..., Lk, D), `v` (..., Lk, Dv) with equal leading dims: returns the
    /// output (..., Lq, Dv) and the logsumexp of each row of scaled scores (..., Lq), which
    /// is all the backward needs. `scale` defaults to `1 / sqrt(D)`. `causal` hides key `j`
    /// from query `i` when `j > i` (PyTorch's `is_causal`, aligned top-left also when
    /// `Lq != Lk`). The CPU kernel forms no (Lq, Lk) matrix (keys in tiles, online softmax).
    /// f16 / bf16 compute in f32; the logsumexp is f32 for them. One fused op (see
    /// `quill_array::fused`).
    pub fn scaled_dot_product_attention(
        &self,
        k: &NDArray,
        v: &NDArray,
        causal: bool,
        scale: Option<f64>,
    ) -> Result<(NDArray, NDArray)> {
        run(&Forward { causal, scale }, &[self, k, v])
    }

    /// The gradients `(dq, dk, dv)` of `scaled_dot_product_attention` at `q` (self), `k`,
    /// `v`, given its output `out`, its logsumexp `lse` and the output's gradient `grad`;
    /// `causal` and `scale` as in the forward. The CPU kernel recomputes the scores tile by
    /// tile: at most one tile of them exists at a time.
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
        run(&Backward { causal, scale }, &[self, k, v, out, grad, lse])
    }
}
