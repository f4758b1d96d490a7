//! Differentiable linear algebra: `inv`, `det`, `slogdet`'s log |det|, `solve`, `cholesky`,
//! `eigh`, the thin `svd` and the reduced `qr` with PyTorch's gradient formulas, each backward written in Tensor ops (these ones included),
//! so gradients of gradients work too. The forwards are `quill::linalg`'s.

use super::{mul_mask, sum_to, to_isize};
use crate::linalg;
use crate::tensor::{Backward, Tensor};
use crate::NDArray;
use quill_core::Result;

/// (..., n, n) -> (..., 1, 1): a per-matrix scalar broadcast over its matrix.
fn per_matrix(t: &Tensor) -> Result<Tensor> {
    t.unsqueeze(-1)?.unsqueeze(-1)
}

struct Inv;

impl Backward for Inv {
    fn name(&self) -> &'static str {
        "InvBackward"
    }
    // d(A⁻¹) = -A⁻¹ dA A⁻¹, so gA = -A⁻ᵀ g A⁻ᵀ.
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let it = inputs[0].inv()?.mt()?;
        Ok(vec![Some(it.matmul(g)?.matmul(&it)?.neg()?)])
    }
}

struct Det;

impl Backward for Det {
    fn name(&self) -> &'static str {
        "DetBackward"
    }
    // d det(A) = det(A) tr(A⁻¹ dA), so gA = g det(A) A⁻ᵀ (A invertible, as PyTorch's formula).
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let a = &inputs[0];
        let scale = per_matrix(&g.mul(&a.det()?)?)?;
        Ok(vec![Some(a.inv()?.mt()?.mul(&scale)?)])
    }
}

struct LogAbsDet;

impl Backward for LogAbsDet {
    fn name(&self) -> &'static str {
        "SlogdetBackward"
    }
    // d log|det A| = tr(A⁻¹ dA): gA = g A⁻ᵀ.
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(inputs[0].inv()?.mt()?.mul(&per_matrix(g)?)?)])
    }
}

struct Solve {
    /// `b` was a vector (n,) promoted to (n, 1).
    vector: bool,
}

impl Backward for Solve {
    fn name(&self) -> &'static str {
        "SolveBackward"
    }
    // X = A⁻¹ B: gB = A⁻ᵀ g, gA = -gB Xᵀ; both summed over the batch dims they broadcast along.
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (a, b) = (&inputs[0], &inputs[1]);
        let g2 = if self.vector {
            g.unsqueeze(-1)?
        } else {
            g.clone()
        };
        let b2 = if self.vector {
            b.unsqueeze(-1)?
        } else {
            b.clone()
        };
        let gb = a.mt()?.solve(&g2)?;
        let ga = a
            .requires_grad()
            .then(|| -> Result<Tensor> {
                let x = a.solve(&b2)?;
                sum_to(&gb.matmul(&x.mt()?)?.neg()?, a.shape())
            })
            .transpose()?;
        let gb = b
            .requires_grad()
            .then(|| -> Result<Tensor> {
                let full = if self.vector {
                    gb.squeeze_last()?
                } else {
                    gb.clone()
                };
                sum_to(&full, b.shape())
            })
            .transpose()?;
        Ok(vec![ga, gb])
    }
}

struct Cholesky {
    upper: bool,
}

impl Backward for Cholesky {
    fn name(&self) -> &'static str {
        "CholeskyBackward"
    }
    // PyTorch's formula (real case): with Φ(X) = the lower triangle of X with its diagonal
    // halved, S = L⁻ᵀ Φ(Lᵀ gL) L⁻¹ and gA = (S + Sᵀ) / 2 (A is read as symmetric).
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let a = &inputs[0];
        let l = a.cholesky(false)?;
        let gl = if self.upper { g.mt()? } else { g.clone() };
        let n = a.shape()[a.ndim() - 1];
        let mask: Vec<f64> = (0..n * n)
            .map(|k| match (k / n, k % n) {
                (r, c) if r > c => 1.0,
                (r, c) if r == c => 0.5,
                _ => 0.0,
            })
            .collect();
        let mask = NDArray::from_vec(mask, &[n, n])?.to_device(a.device())?;
        let phi = mul_mask(&l.mt()?.matmul(&gl)?, &mask)?;
        let li = l.inv()?;
        let s = li.mt()?.matmul(&phi)?.matmul(&li)?;
        Ok(vec![Some(s.add(&s.mt()?)?.mul_scalar(0.5)?)])
    }
}

/// F (..., k, k) with F_ij = 1 / (w_j - w_i) off the diagonal and 0 on it, for values w
/// (..., k): the weights of the eigenvector and singular-vector backwards, in Tensor ops.
fn inverse_gaps(w: &Tensor) -> Result<Tensor> {
    let k = w.shape()[w.ndim() - 1];
    let eye = NDArray::eye(k, k, 0, w.dtype())?.to_device(w.device())?;
    let off: Vec<f64> = (0..k * k).map(|i| f64::from(i / k != i % k)).collect();
    let off = NDArray::from_vec(off, &[k, k])?.to_device(w.device())?;
    // w_j - w_i, with 1 on the diagonal so that the reciprocal is finite there.
    let gap = w
        .unsqueeze(-2)?
        .sub(&w.unsqueeze(-1)?)?
        .add(&Tensor::new(eye))?;
    mul_mask(&gap.reciprocal()?, &off)
}

struct EighValues;

impl Backward for EighValues {
    fn name(&self) -> &'static str {
        "EighValuesBackward"
    }
    // dw_i = v_iᵀ dA v_i, so gA = V diag(gw) Vᵀ.
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (_, v) = inputs[0].eigh()?;
        Ok(vec![Some(v.mul(&g.unsqueeze(-2)?)?.matmul(&v.mt()?)?)])
    }
}

struct EighVectors;

impl Backward for EighVectors {
    fn name(&self) -> &'static str {
        "EighVectorsBackward"
    }
    // dV = V (F ∘ (Vᵀ dA V)) with F_ij = 1 / (w_j - w_i) off the diagonal and 0 on it, so
    // gA = V (F ∘ (Vᵀ gV)) Vᵀ (for distinct eigenvalues, as PyTorch's formula).
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (w, v) = inputs[0].eigh()?;
        let f = inverse_gaps(&w)?;
        let inner = v.mt()?.matmul(g)?.mul(&f)?;
        Ok(vec![Some(v.matmul(&inner)?.matmul(&v.mt()?)?)])
    }
}

/// The pieces every SVD backward uses, recomputed from the input (so, with the graph, the
/// backward is differentiable again): U (m, k), S (k), V (n, k), and F with
/// F_ij = 1 / (s_j² - s_i²) off the diagonal, 0 on it.
fn svd_parts(a: &Tensor) -> Result<(Tensor, Tensor, Tensor, Tensor)> {
    let (u, s, vh) = a.svd()?;
    let f = inverse_gaps(&s.mul(&s)?)?;
    Ok((u, s, vh.mt()?, f))
}

/// I - X Xᵀ for X (..., r, k) with orthonormal columns: the projector off X's span.
fn off_span(x: &Tensor) -> Result<Tensor> {
    let r = x.shape()[x.ndim() - 2];
    let eye = Tensor::new(NDArray::eye(r, r, 0, x.dtype())?.to_device(x.device())?);
    eye.sub(&x.matmul(&x.mt()?)?)
}

struct SvdValues;

impl Backward for SvdValues {
    fn name(&self) -> &'static str {
        "SvdValuesBackward"
    }
    // ds_i = u_iᵀ dA v_i: gA = U diag(gS) Vᵀ.
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (u, _, v, _) = svd_parts(&inputs[0])?;
        Ok(vec![Some(u.mul(&g.unsqueeze(-2)?)?.matmul(&v.mt()?)?)])
    }
}

struct SvdU;

impl Backward for SvdU {
    fn name(&self) -> &'static str {
        "SvdUBackward"
    }
    // gA = U (F ∘ (UᵀgU - gUᵀU)) S Vᵀ + (I - UUᵀ) gU S⁻¹ Vᵀ (Townsend's, PyTorch's formula).
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (u, s, v, f) = svd_parts(&inputs[0])?;
        let utg = u.mt()?.matmul(g)?;
        let inner = utg.sub(&utg.mt()?)?.mul(&f)?.mul(&s.unsqueeze(-2)?)?;
        let left = u.matmul(&inner)?;
        let rest = off_span(&u)?.matmul(g)?.div(&s.unsqueeze(-2)?)?;
        Ok(vec![Some(left.add(&rest)?.matmul(&v.mt()?)?)])
    }
}

struct SvdVh;

impl Backward for SvdVh {
    fn name(&self) -> &'static str {
        "SvdVhBackward"
    }
    // With gV = gVhᵀ: gA = U S (F ∘ (VᵀgV - gVᵀV)) Vᵀ + U S⁻¹ gVᵀ (I - VVᵀ).
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let (u, s, v, f) = svd_parts(&inputs[0])?;
        let gv = g.mt()?;
        let vtg = v.mt()?.matmul(&gv)?;
        let inner = vtg.sub(&vtg.mt()?)?.mul(&f)?.mul(&s.unsqueeze(-1)?)?;
        let main = u.matmul(&inner)?.matmul(&v.mt()?)?;
        let rest = u
            .matmul(&g.div(&s.unsqueeze(-1)?)?)?
            .matmul(&off_span(&v)?)?;
        Ok(vec![Some(main.add(&rest)?)])
    }
}

/// `copyltu(M)`: the symmetric matrix with M's lower triangle (diagonal included) mirrored
/// above it.
fn copy_lower_up(m: &Tensor) -> Result<Tensor> {
    let n = m.shape()[m.ndim() - 1];
    let mask = |keep: fn(usize, usize) -> bool| -> Result<NDArray> {
        let v: Vec<f64> = (0..n * n).map(|k| f64::from(keep(k / n, k % n))).collect();
        NDArray::from_vec(v, &[n, n])?.to_device(m.device())
    };
    let lower = mul_mask(m, &mask(|r, c| r >= c)?)?;
    let strict = mul_mask(m, &mask(|r, c| r > c)?)?;
    lower.add(&strict.mt()?)
}

/// The QR backward for m >= n (reduced), from the pieces' contributions to
/// M = R gRᵀ - gQᵀ Q: gA = (gQ + Q copyltu(M)) R⁻ᵀ (Liao et al.; PyTorch's for this case).
fn qr_backward(a: &Tensor, g_q: Option<&Tensor>, g_r: Option<&Tensor>) -> Result<Tensor> {
    let (m, n) = (a.shape()[a.ndim() - 2], a.shape()[a.ndim() - 1]);
    if m < n {
        return Err(quill_core::Error::invalid(
            "QrBackward",
            format!("the QR gradient needs m >= n (a tall or square matrix), got {m} x {n}"),
        ));
    }
    let (q, r) = a.qr()?;
    let mut big_m: Option<Tensor> = None;
    let mut acc: Option<Tensor> = None;
    if let Some(gr) = g_r {
        big_m = Some(r.matmul(&gr.mt()?)?);
    }
    if let Some(gq) = g_q {
        let term = gq.mt()?.matmul(&q)?.neg()?;
        big_m = Some(match big_m {
            Some(x) => x.add(&term)?,
            None => term,
        });
        acc = Some(gq.clone());
    }
    let qm = match big_m {
        Some(x) => q.matmul(&copy_lower_up(&x)?)?,
        None => return a.zeros_like(),
    };
    let left = match acc {
        Some(x) => x.add(&qm)?,
        None => qm,
    };
    left.matmul(&r.inv()?.mt()?)
}

struct QrQ;

impl Backward for QrQ {
    fn name(&self) -> &'static str {
        "QrQBackward"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(qr_backward(&inputs[0], Some(g), None)?)])
    }
}

struct QrR;

impl Backward for QrR {
    fn name(&self) -> &'static str {
        "QrRBackward"
    }
    fn backward(&self, g: &Tensor, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(qr_backward(&inputs[0], None, Some(g))?)])
    }
}

impl Tensor {
    /// The inverse of each square matrix (..., n, n), differentiable (`linalg::inv`).
    pub fn inv(&self) -> Result<Tensor> {
        Ok(Tensor::make(linalg::inv(self.array())?, &[self], Inv))
    }

    /// The determinant of each square matrix, shape (...), differentiable where the matrix is
    /// invertible (`linalg::det`).
    pub fn det(&self) -> Result<Tensor> {
        Ok(Tensor::make(linalg::det(self.array())?, &[self], Det))
    }

    /// (sign, log |det|) of each square matrix; log |det| is differentiable, the sign is a
    /// constant (`linalg::slogdet`).
    pub fn slogdet(&self) -> Result<(Tensor, Tensor)> {
        let (sign, log) = linalg::slogdet(self.array())?;
        Ok((Tensor::new(sign), Tensor::make(log, &[self], LogAbsDet)))
    }

    /// X with A X = B for each square matrix A of `self`; `b` a vector (n,) or a stack
    /// (..., n, k), batch dims broadcast; differentiable in both (`linalg::solve`).
    pub fn solve(&self, b: &Tensor) -> Result<Tensor> {
        let out = linalg::solve(self.array(), b.array())?;
        Ok(Tensor::make(
            out,
            &[self, b],
            Solve {
                vector: b.ndim() == 1,
            },
        ))
    }

    /// The Cholesky factor of each symmetric positive-definite matrix (lower, or upper with
    /// `upper`), differentiable (`linalg::cholesky`).
    pub fn cholesky(&self, upper: bool) -> Result<Tensor> {
        let out = linalg::cholesky(self.array(), upper)?;
        Ok(Tensor::make(out, &[self], Cholesky { upper }))
    }

    /// (eigenvalues ascending, eigenvectors as columns) of each symmetric matrix, read from its
    /// lower triangle (`linalg::eigh`); both differentiable where the eigenvalues are distinct.
    /// The eigenvectors' signs are faer's choice: a loss should not depend on them.
    pub fn eigh(&self) -> Result<(Tensor, Tensor)> {
        let (w, v) = linalg::eigh(self.array())?;
        Ok((
            Tensor::make(w, &[self], EighValues),
            Tensor::make(v, &[self], EighVectors),
        ))
    }

    /// The thin SVD (U (..., m, k), S (..., k) descending, Vh (..., k, n), k = min(m, n)) of each
    /// matrix, all three differentiable where the singular values are distinct and non-zero
    /// (`linalg::svd` with `full_matrices = false`). Signs are faer's: a loss should not
    /// depend on them.
    pub fn svd(&self) -> Result<(Tensor, Tensor, Tensor)> {
        let (u, s, vh) = linalg::svd(self.array(), false)?;
        Ok((
            Tensor::make(u, &[self], SvdU),
            Tensor::make(s, &[self], SvdValues),
            Tensor::make(vh, &[self], SvdVh),
        ))
    }

    /// The reduced QR (Q (..., m, k), R (..., k, n), k = min(m, n)) of each matrix
    /// (`linalg::qr`); both differentiable for m >= n with R invertible (the gradient of a wide
    /// matrix's QR is an error).
    pub fn qr(&self) -> Result<(Tensor, Tensor)> {
        let (q, r) = linalg::qr(self.array(), linalg::QrMode::Reduced)?;
        Ok((Tensor::make(q, &[self], QrQ), Tensor::make(r, &[self], QrR)))
    }

    /// Drops a last dim of size 1.
    fn squeeze_last(&self) -> Result<Tensor> {
        let shape = &self.shape()[..self.ndim() - 1];
        self.reshape(&to_isize(shape))
    }
}
