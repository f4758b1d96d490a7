//! The factorizations and what derives from them, on faer: each matrix of the stack is read into
//! a faer matrix (f64 for real input, complex128 for complex), factored, and written back
//! row-major. Singular and non-positive-definite input is an error naming the op and the batch
//! index, as NumPy's `LinAlgError` does.

use super::lu::Lu;
use super::{
    broadcast_batch, build, check_matrices, real_dtype, result_dtype, shape_of, stack, Field, Stack,
};
use crate::NDArray;
use faer::{Mat, MatRef, Side};
use quill_core::{DType, Error, Result, C128};

/// Which factors `qr` returns, as NumPy's `mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QrMode {
    /// Q (m, k) and R (k, n) with k = min(m, n).
    Reduced,
    /// Q (m, m) and R (m, n).
    Complete,
}

/// Runs `$f::<T>` with T = complex128 when any of the arrays is complex, else f64.
macro_rules! by_field {
    ($f:ident($($a:expr),*) $(, $extra:expr)*) => {
        if [$($a),*].iter().any(|a: &&NDArray| a.dtype().is_complex()) {
            $f::<C128>($($a,)* $($extra),*)
        } else {
            $f::<f64>($($a,)* $($extra),*)
        }
    };
}

fn view<T: Field>(s: &Stack<T>, i: usize) -> MatRef<'_, T> {
    MatRef::from_row_major_slice(s.matrix(i), s.m, s.n)
}

fn push<T: Field>(out: &mut Vec<T>, m: MatRef<'_, T>) {
    for i in 0..m.nrows() {
        for j in 0..m.ncols() {
            out.push(m[(i, j)]);
        }
    }
}

/// Pushes the conjugate transpose of `m` (its transpose for reals).
fn push_adjoint<T: Field>(out: &mut Vec<T>, m: MatRef<'_, T>) {
    for j in 0..m.ncols() {
        for i in 0..m.nrows() {
            out.push(m[(i, j)].conj());
        }
    }
}

fn identity<T: Field>(r: usize, c: usize) -> Mat<T> {
    Mat::from_fn(r, c, |a, b| T::of(f64::from(a == b)))
}

/// Where in the batch matrix `i` sits, for error messages: `[]` for a single matrix.
fn at(batch: &[usize], mut i: usize) -> Vec<usize> {
    let mut idx = vec![0; batch.len()];
    for (k, &d) in batch.iter().enumerate().rev() {
        idx[k] = i % d.max(1);
        i /= d.max(1);
    }
    idx
}

fn which(batch: &[usize], i: usize) -> String {
    if batch.is_empty() {
        "the matrix".to_string()
    } else {
        format!("the matrix at batch index {:?}", at(batch, i))
    }
}

fn singular(op: &'static str, batch: &[usize], i: usize) -> Error {
    Error::invalid(
        op,
        format!(
            "{} is singular (a zero pivot in its LU factorization)",
            which(batch, i)
        ),
    )
}

/// Whether the LU factor `u` (its diagonal read) has an exactly zero pivot (what LAPACK's getrf reports).
fn zero_pivot<T: Field>(u: MatRef<'_, T>) -> bool {
    (0..u.nrows().min(u.ncols())).any(|k| u[(k, k)].modulus() == 0.0)
}

/// The solution X of A X = B for each matrix of `a` (..., n, n). `b` is a vector (n,) when it
/// has one dim, else a stack (..., n, k); the batch dims broadcast. Errors on a singular
/// matrix, non-square `a` or sizes that differ.
pub fn solve(a: &NDArray, b: &NDArray) -> Result<NDArray> {
    by_field!(solve_in(a, b))
}

fn solve_in<T: Field>(a: &NDArray, b: &NDArray) -> Result<NDArray> {
    const OP: &str = "linalg.solve";
    let nd = a.ndim();
    let n = check_matrices(OP, a, true)?.0;
    if a.device() != b.device() {
        return Err(Error::DeviceMismatch {
            op: OP,
            lhs: a.device().to_string(),
            rhs: b.device().to_string(),
        });
    }
    let vector = b.ndim() == 1;
    let b2 = if vector {
        b.reshape(&[-1, 1])?
    } else {
        b.clone()
    };
    if b2.ndim() < 2 || b2.shape()[b2.ndim() - 2] != n {
        return Err(Error::invalid(
            OP,
            format!(
                "a has shape {:?} but b has shape {:?}: b needs {n} rows ((..., {n}, k) or ({n},))",
                a.shape(),
                b.shape()
            ),
        ));
    }
    let k = b2.shape()[b2.ndim() - 1];
    let batch = broadcast_batch(
        OP,
        &a.shape()[..nd - 2],
        &b2.shape()[..b2.ndim() - 2],
        (a.shape(), b.shape()),
    )?;
    let a = a.broadcast_to(&shape_of(&batch, &[n, n]))?;
    let b2 = b2.broadcast_to(&shape_of(&batch, &[n, k]))?;
    let (sa, sb) = (stack::<T>(OP, &a, true)?, stack::<T>(OP, &b2, false)?);
    let mut out = Vec::with_capacity(sb.data.len());
    for i in 0..sa.count() {
        let lu = Lu::new(view(&sa, i));
        if zero_pivot(lu.factors()) {
            return Err(singular(OP, &batch, i));
        }
        push(&mut out, lu.solve(view(&sb, i)).as_ref());
    }
    let dtype = promote(a.dtype(), b.dtype());
    let tail: &[usize] = if vector { &[n] } else { &[n, k] };
    build(out, &shape_of(&batch, tail), dtype, a.device())
}

/// The dtype two linalg operands' result takes: the wider float (f64 for integers), complex
/// when either is.
fn promote(a: DType, b: DType) -> DType {
    let f = |d: DType| {
        if d.is_float() || d.is_complex() {
            d
        } else {
            DType::F64
        }
    };
    let (a, b) = (f(a), f(b));
    let wide = a.real_part() == DType::F64 || b.real_part() == DType::F64;
    match (a.is_complex() || b.is_complex(), wide) {
        (true, true) => DType::C128,
        (true, false) => DType::C64,
        (false, true) => DType::F64,
        (false, false) if a == b => a,
        _ => DType::F32,
    }
}

/// The inverse of each matrix of `a` (..., n, n); errors on a singular one.
pub fn inv(a: &NDArray) -> Result<NDArray> {
    by_field!(inv_in(a))
}

fn inv_in<T: Field>(a: &NDArray) -> Result<NDArray> {
    const OP: &str = "linalg.inv";
    let s = stack::<T>(OP, a, true)?;
    let mut out = Vec::with_capacity(s.data.len());
    for i in 0..s.count() {
        let lu = Lu::new(view(&s, i));
        if zero_pivot(lu.factors()) {
            return Err(singular(OP, &s.batch, i));
        }
        push(&mut out, lu.inverse().as_ref());
    }
    build(out, a.shape(), result_dtype(a), a.device())
}

/// The sign (+1 or -1) of the row permutation `p` (forward indices).
fn parity(p: &[usize]) -> f64 {
    let mut seen = vec![false; p.len()];
    let mut sign = 1.0;
    for start in 0..p.len() {
        let mut len = 0;
        let mut j = start;
        while !seen[j] {
            seen[j] = true;
            j = p[j];
            len += 1;
        }
        if len > 0 && len % 2 == 0 {
            sign = -sign;
        }
    }
    sign
}

/// (sign, log |det|) of each matrix, from its LU factors: the sign is ±1 for real matrices and
/// a unit complex number for complex ones; sign 0 and log |det| = -inf for a singular matrix.
fn sign_logdet<T: Field>(s: &Stack<T>, i: usize) -> (T, f64) {
    if s.n == 0 {
        return (T::of(1.0), 0.0);
    }
    let lu = Lu::new(view(s, i));
    let u = lu.factors();
    let mut sign = T::of(parity(lu.forward()));
    let mut log = 0.0;
    for k in 0..s.n {
        let d = u[(k, k)];
        let r = d.modulus();
        if r == 0.0 {
            return (T::of(0.0), f64::NEG_INFINITY);
        }
        if r.is_nan() {
            return (T::of(f64::NAN), f64::NAN);
        }
        sign *= d / T::of(r);
        log += r.ln();
    }
    (sign, log)
}

/// The determinant of each matrix of `a` (..., n, n), shape (...).
pub fn det(a: &NDArray) -> Result<NDArray> {
    by_field!(det_in(a))
}

fn det_in<T: Field>(a: &NDArray) -> Result<NDArray> {
    let s = stack::<T>("linalg.det", a, true)?;
    // The product of the pivots (as LAPACK-based NumPy forms it), exact where the factors are.
    let out = (0..s.count())
        .map(|i| {
            if s.n == 0 {
                return T::of(1.0);
            }
            let lu = Lu::new(view(&s, i));
            let u = lu.factors();
            (0..s.n).fold(T::of(parity(lu.forward())), |acc, k| acc * u[(k, k)])
        })
        .collect();
    build(out, &s.batch, result_dtype(a), a.device())
}

/// (sign, log |det|) of each matrix of `a` (..., n, n), both of shape (...): the determinant
/// without its overflow. A singular matrix gives sign 0 and log |det| = -inf, as NumPy. For
/// complex input the sign is complex (of modulus 1) and log |det| real.
pub fn slogdet(a: &NDArray) -> Result<(NDArray, NDArray)> {
    by_field!(slogdet_in(a))
}

fn slogdet_in<T: Field>(a: &NDArray) -> Result<(NDArray, NDArray)> {
    let s = stack::<T>("linalg.slogdet", a, true)?;
    let (sign, log): (Vec<T>, Vec<f64>) = (0..s.count()).map(|i| sign_logdet(&s, i)).unzip();
    let dev = a.device();
    Ok((
        build(sign, &s.batch, result_dtype(a), dev)?,
        build(log, &s.batch, real_dtype(a), dev)?,
    ))
}

/// The Cholesky factor of each Hermitian (symmetric, for reals) positive-definite matrix of `a`
/// (..., n, n), read from its lower triangle: L with A = L Lᴴ, or U = Lᴴ with A = Uᴴ U when
/// `upper`. Errors when a matrix is not positive definite.
pub fn cholesky(a: &NDArray, upper: bool) -> Result<NDArray> {
    by_field!(cholesky_in(a), upper)
}

fn cholesky_in<T: Field>(a: &NDArray, upper: bool) -> Result<NDArray> {
    const OP: &str = "linalg.cholesky";
    let s = stack::<T>(OP, a, true)?;
    let mut out = Vec::with_capacity(s.data.len());
    for i in 0..s.count() {
        let llt = view(&s, i).llt(Side::Lower).map_err(|_| {
            Error::invalid(
                OP,
                format!("{} is not positive definite", which(&s.batch, i)),
            )
        })?;
        let l = llt.L();
        if upper {
            push_adjoint(&mut out, l);
        } else {
            push(&mut out, l);
        }
    }
    build(out, a.shape(), result_dtype(a), a.device())
}

/// Q and R with A = Q R for each matrix of `a` (..., m, n): Q with orthonormal columns, R upper
/// triangular (`mode` picks their sizes). The signs of R's diagonal are faer's Householder
/// choice, as LAPACK's may differ: each column of Q and row of R can flip together (by a unit
/// complex factor for complex input).
pub fn qr(a: &NDArray, mode: QrMode) -> Result<(NDArray, NDArray)> {
    by_field!(qr_in(a), mode)
}

fn qr_in<T: Field>(a: &NDArray, mode: QrMode) -> Result<(NDArray, NDArray)> {
    let s = stack::<T>("linalg.qr", a, false)?;
    let (m, n) = (s.m, s.n);
    let k = m.min(n);
    let (qc, rr) = match mode {
        QrMode::Reduced => (k, k),
        QrMode::Complete => (m, m),
    };
    let zero = T::of(0.0);
    let (mut q, mut r) = (Vec::new(), Vec::new());
    for i in 0..s.count() {
        if m == 0 || n == 0 {
            // faer wants a non-empty matrix; Q is the identity's first columns, R zeros.
            push(&mut q, identity::<T>(m, qc).as_ref());
            r.extend(std::iter::repeat_n(zero, rr * n));
            continue;
        }
        let f = view(&s, i).qr();
        match mode {
            QrMode::Reduced => {
                push(&mut q, f.compute_thin_Q().as_ref());
                push(&mut r, f.thin_R());
            }
            QrMode::Complete => {
                push(&mut q, f.compute_Q().as_ref());
                // faer keeps R's min(m, n) rows; the complete R has m, zeros below.
                let fr = f.R();
                push(&mut r, fr);
                r.extend(std::iter::repeat_n(zero, (m - fr.nrows()) * n));
            }
        }
    }
    let (dt, dev) = (result_dtype(a), a.device());
    Ok((
        build(q, &shape_of(&s.batch, &[m, qc]), dt, dev)?,
        build(r, &shape_of(&s.batch, &[rr, n]), dt, dev)?,
    ))
}

fn svd_error(op: &'static str) -> impl Fn(faer::linalg::svd::SvdError) -> Error {
    move |e| Error::invalid(op, format!("the SVD did not converge ({e:?})"))
}

/// U, S, Vh with A = U diag(S) Vh for each matrix of `a` (..., m, n); S (..., k) real and
/// descending, k = min(m, n); Vh is V's conjugate transpose. With `full_matrices`, U is (m, m)
/// and Vh (n, n), else (m, k) and (k, n).
pub fn svd(a: &NDArray, full_matrices: bool) -> Result<(NDArray, NDArray, NDArray)> {
    by_field!(svd_in(a), full_matrices)
}

fn svd_in<T: Field>(a: &NDArray, full_matrices: bool) -> Result<(NDArray, NDArray, NDArray)> {
    const OP: &str = "linalg.svd";
    let s = stack::<T>(OP, a, false)?;
    let (m, n) = (s.m, s.n);
    let k = m.min(n);
    let (uc, vr) = if full_matrices { (m, n) } else { (k, k) };
    let (mut u, mut sv, mut vh) = (Vec::new(), Vec::<f64>::new(), Vec::new());
    for i in 0..s.count() {
        if k == 0 {
            push(&mut u, identity::<T>(m, uc).as_ref());
            push(&mut vh, identity::<T>(vr, n).as_ref());
            continue;
        }
        let mat = view(&s, i);
        let f = if full_matrices {
            mat.svd()
        } else {
            mat.thin_svd()
        }
        .map_err(svd_error(OP))?;
        push(&mut u, f.U());
        let d = f.S().column_vector();
        sv.extend((0..k).map(|j| d[j].re()));
        push_adjoint(&mut vh, f.V());
    }
    let (dt, dev) = (result_dtype(a), a.device());
    Ok((
        build(u, &shape_of(&s.batch, &[m, uc]), dt, dev)?,
        build(sv, &shape_of(&s.batch, &[k]), real_dtype(a), dev)?,
        build(vh, &shape_of(&s.batch, &[vr, n]), dt, dev)?,
    ))
}

/// The singular values of each matrix of `a` (..., m, n), (..., min(m, n)), real and
/// descending.
pub fn svdvals(a: &NDArray) -> Result<NDArray> {
    by_field!(svdvals_in(a))
}

fn svdvals_in<T: Field>(a: &NDArray) -> Result<NDArray> {
    const OP: &str = "linalg.svdvals";
    let s = stack::<T>(OP, a, false)?;
    let k = s.m.min(s.n);
    let mut out = Vec::with_capacity(s.count() * k);
    for i in 0..s.count() {
        if k == 0 {
            continue;
        }
        let mut v = view(&s, i).singular_values().map_err(svd_error(OP))?;
        v.sort_by(|x, y| y.total_cmp(x));
        out.extend(v);
    }
    build(out, &shape_of(&s.batch, &[k]), real_dtype(a), a.device())
}

/// Eigenvalues (..., n), real and ascending, and eigenvectors (..., n, n) as columns, of each
/// Hermitian (symmetric, for reals) matrix of `a`, read from its lower triangle (NumPy's
/// default `UPLO='L'`).
pub fn eigh(a: &NDArray) -> Result<(NDArray, NDArray)> {
    by_field!(eigh_in(a))
}

fn eigh_in<T: Field>(a: &NDArray) -> Result<(NDArray, NDArray)> {
    const OP: &str = "linalg.eigh";
    let s = stack::<T>(OP, a, true)?;
    let n = s.n;
    let (mut w, mut v) = (Vec::<f64>::new(), Vec::new());
    for i in 0..s.count() {
        if n == 0 {
            continue;
        }
        let e = view(&s, i)
            .self_adjoint_eigen(Side::Lower)
            .map_err(|e| Error::invalid(OP, format!("the eigensolver did not converge ({e:?})")))?;
        let d = e.S().column_vector();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&x, &y| d[x].re().total_cmp(&d[y].re()));
        w.extend(order.iter().map(|&j| d[j].re()));
        let u = e.U();
        for r in 0..n {
            v.extend(order.iter().map(|&j| u[(r, j)]));
        }
    }
    let dev = a.device();
    Ok((
        build(w, &shape_of(&s.batch, &[n]), real_dtype(a), dev)?,
        build(v, a.shape(), result_dtype(a), dev)?,
    ))
}

/// The eigenvalues of each Hermitian matrix of `a` (..., n, n), real and ascending (lower
/// triangle).
pub fn eigvalsh(a: &NDArray) -> Result<NDArray> {
    Ok(eigh(a)?.0)
}

/// The complex dtype general eigen-decompositions return: complex64 for f32 / f16 / bf16 /
/// complex64 input, complex128 otherwise (the 2025.12 standard's rule: always complex).
fn eig_dtype(a: &NDArray) -> DType {
    result_dtype(a).to_complex().unwrap_or(DType::C128)
}

/// Eigenvalues (..., n) and right eigenvectors (..., n, n), as columns of unit 2-norm, of each
/// general square matrix of `a`, both complex: A v = w v. Their order is the solver's (the
/// standard leaves it unspecified, as LAPACK's geev does).
pub fn eig(a: &NDArray) -> Result<(NDArray, NDArray)> {
    let (w, v) = by_field!(eig_in(a), true)?;
    // `eig_in` returns the vectors whenever it is asked for them.
    let v = v.ok_or_else(|| Error::invalid("linalg.eig", "the solver returned no vectors"))?;
    Ok((w, v))
}

/// The eigenvalues (..., n) of each general square matrix of `a`, complex, in the order `eig`
/// gives them.
pub fn eigvals(a: &NDArray) -> Result<NDArray> {
    Ok(by_field!(eig_in(a), false)?.0)
}

fn eig_in<T: Field>(a: &NDArray, vectors: bool) -> Result<(NDArray, Option<NDArray>)> {
    let op = if vectors {
        "linalg.eig"
    } else {
        "linalg.eigvals"
    };
    let s = stack::<T>(op, a, true)?;
    let n = s.n;
    let (mut w, mut v) = (Vec::<C128>::new(), Vec::<C128>::new());
    let failed = |e| Error::invalid(op, format!("the eigensolver did not converge ({e:?})"));
    for i in 0..s.count() {
        if n == 0 {
            continue;
        }
        if !vectors {
            w.extend(view(&s, i).eigenvalues().map_err(failed)?);
            continue;
        }
        let e = view(&s, i).eigen().map_err(failed)?;
        let d = e.S().column_vector();
        w.extend((0..n).map(|j| d[j]));
        let u = e.U();
        // Unit 2-norm columns, as LAPACK's geev returns them.
        let norms: Vec<f64> = (0..n)
            .map(|j| (0..n).map(|r| u[(r, j)].norm_sqr()).sum::<f64>().sqrt())
            .collect();
        for r in 0..n {
            v.extend((0..n).map(|j| {
                if norms[j] > 0.0 {
                    u[(r, j)] / norms[j]
                } else {
                    u[(r, j)]
                }
            }));
        }
    }
    let (dt, dev) = (eig_dtype(a), a.device());
    let vecs = if vectors {
        Some(build(v, a.shape(), dt, dev)?)
    } else {
        None
    };
    Ok((build(w, &shape_of(&s.batch, &[n]), dt, dev)?, vecs))
}

/// The cut-off below which singular values count as zero: `rtol` times the largest, with
/// `rtol` defaulting to max(m, n) times the dtype's machine epsilon (the standard's rule).
fn cutoff(rtol: Option<f64>, m: usize, n: usize, dtype: DType, largest: f64) -> f64 {
    let eps = match dtype {
        DType::F32 | DType::C64 => f32::EPSILON as f64,
        DType::F16 => 0.000977,
        DType::BF16 => 0.0078125,
        _ => f64::EPSILON,
    };
    rtol.unwrap_or(m.max(n) as f64 * eps) * largest
}

/// The Moore-Penrose pseudo-inverse (..., n, m) of each matrix of `a` (..., m, n), from its SVD,
/// singular values at or below `rtol` times the largest treated as zero (default: max(m, n)
/// times the dtype's epsilon).
pub fn pinv(a: &NDArray, rtol: Option<f64>) -> Result<NDArray> {
    let per = rtol.map(|r| vec![r; batch_count(a)]);
    by_field!(pinv_in(a), per)
}

/// [`pinv`] with `rtol` an array broadcast against the batch dims (the standard's array form:
/// one tolerance per matrix).
pub fn pinv_rtol(a: &NDArray, rtol: &NDArray) -> Result<NDArray> {
    let per = rtols("linalg.pinv", a, rtol)?;
    by_field!(pinv_in(a), Some(per))
}

/// How many matrices `a` stacks (1 for fewer than 3 dims).
fn batch_count(a: &NDArray) -> usize {
    a.shape()[..a.ndim().saturating_sub(2)].iter().product()
}

/// `rtol` broadcast to `a`'s batch shape, one value per matrix in C order.
fn rtols(op: &'static str, a: &NDArray, rtol: &NDArray) -> Result<Vec<f64>> {
    check_matrices(op, a, false)?;
    if rtol.dtype().is_complex() {
        return Err(Error::invalid(
            op,
            format!("rtol must be real, got {}", rtol.dtype()),
        ));
    }
    let batch = &a.shape()[..a.ndim() - 2];
    let r = rtol.broadcast_to(batch).map_err(|_| {
        Error::invalid(
            op,
            format!(
                "rtol of shape {:?} does not broadcast to the batch shape {batch:?} of a {:?}",
                rtol.shape(),
                a.shape()
            ),
        )
    })?;
    r.to_device(crate::Device::Cpu)?
        .astype(DType::F64)?
        .compact()?
        .to_vec::<f64>()
}

fn pinv_in<T: Field>(a: &NDArray, rtol: Option<Vec<f64>>) -> Result<NDArray> {
    const OP: &str = "linalg.pinv";
    let s = stack::<T>(OP, a, false)?;
    let (m, n) = (s.m, s.n);
    let dt = result_dtype(a);
    let mut out = Vec::with_capacity(s.count() * m * n);
    for i in 0..s.count() {
        if m.min(n) == 0 {
            out.extend(std::iter::repeat_n(T::of(0.0), m * n));
            continue;
        }
        let f = view(&s, i).thin_svd().map_err(svd_error(OP))?;
        let d = f.S().column_vector();
        let k = m.min(n);
        let big = (0..k).map(|j| d[j].re()).fold(0.0, f64::max);
        let cut = cutoff(rtol.as_ref().map(|r| r[i]), m, n, dt, big);
        // pinv = V diag(1/s) Uᴴ over the kept singular values, as one faer product.
        let (v, u) = (f.V(), f.U());
        let scaled = Mat::<T>::from_fn(n, k, |r, j| {
            let sj = d[j].re();
            if sj > cut {
                v[(r, j)] / T::of(sj)
            } else {
                T::of(0.0)
            }
        });
        let uh = Mat::<T>::from_fn(k, m, |r, c| u[(c, r)].conj());
        push(&mut out, (&scaled * &uh).as_ref());
    }
    build(out, &shape_of(&s.batch, &[n, m]), dt, a.device())
}

/// The rank (..., int64) of each matrix of `a`: how many singular values exceed `rtol` times
/// the largest (default: max(m, n) times the dtype's epsilon).
pub fn matrix_rank(a: &NDArray, rtol: Option<f64>) -> Result<NDArray> {
    check_matrices("linalg.matrix_rank", a, false)?;
    rank_in(a, rtol.map(|r| vec![r; batch_count(a)]))
}

/// [`matrix_rank`] with `rtol` an array broadcast against the batch dims (one tolerance per
/// matrix, the standard's array form).
pub fn matrix_rank_rtol(a: &NDArray, rtol: &NDArray) -> Result<NDArray> {
    let per = rtols("linalg.matrix_rank", a, rtol)?;
    rank_in(a, Some(per))
}

fn rank_in(a: &NDArray, rtol: Option<Vec<f64>>) -> Result<NDArray> {
    let (m, n) = check_matrices("linalg.matrix_rank", a, false)?;
    let sv = svdvals(a)?.astype(DType::F64)?.to_vec::<f64>()?;
    let k = m.min(n);
    let batch = &a.shape()[..a.ndim() - 2];
    let dt = result_dtype(a);
    let out: Vec<i64> = (0..batch.iter().product())
        .map(|i| {
            let v = &sv[i * k..(i + 1) * k];
            let big = v.iter().copied().fold(0.0, f64::max);
            let cut = cutoff(rtol.as_ref().map(|r| r[i]), m, n, dt, big);
            v.iter().filter(|&&x| x > cut).count() as i64
        })
        .collect();
    NDArray::from_vec(out, batch)?.to_device(a.device())
}
