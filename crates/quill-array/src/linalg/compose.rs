//! The linalg functions built from NDArray ops, on any device and strides: norms, trace and
//! diagonal (a view), outer and cross products, tensordot and integer matrix powers.

use super::factor;
use crate::NDArray;
use quill_core::{DType, Error, Result};

/// Which norm `vector_norm` and `matrix_norm` take.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NormOrd {
    /// Frobenius (matrices; the default) — for vectors use `P(2.0)`.
    Fro,
    /// Nuclear: the sum of the singular values (matrices).
    Nuc,
    /// `p`: for vectors (sum |x|^p)^(1/p), with `P(inf)` the largest |x|, `P(-inf)` the
    /// smallest and `P(0.0)` the count of non-zeros; for matrices 1, -1 (max / min column
    /// sum of |a|), 2, -2 (largest / smallest singular value), inf, -inf (max / min row sum).
    P(f64),
}

/// |x| in a float dtype: complex input gives its modulus in the parts' dtype.
fn float_abs(x: &NDArray) -> Result<NDArray> {
    let x = if x.dtype().is_float() || x.dtype().is_complex() {
        x.clone()
    } else {
        x.astype(DType::F64)?
    };
    x.abs()
}

/// The `ord`-norm of `x` over `axes` (all when `None`), keeping the reduced dims as 1 with
/// `keepdims`. Results are float (f64 for integer input).
pub fn vector_norm(
    x: &NDArray,
    axes: Option<&[isize]>,
    keepdims: bool,
    ord: NormOrd,
) -> Result<NDArray> {
    const OP: &str = "linalg.vector_norm";
    let a = float_abs(x)?;
    let p = match ord {
        NormOrd::P(p) => p,
        NormOrd::Fro => 2.0,
        NormOrd::Nuc => {
            return Err(Error::invalid(
                OP,
                "ord 'nuc' is a matrix norm; vectors take a number",
            ))
        }
    };
    if a.numel() == 0 && p.is_infinite() {
        return Err(Error::invalid(
            OP,
            format!(
                "the {p}-norm of an empty array (shape {:?}) is undefined",
                x.shape()
            ),
        ));
    }
    if p == f64::INFINITY {
        a.max(axes, keepdims)
    } else if p == f64::NEG_INFINITY {
        a.min(axes, keepdims)
    } else if p == 0.0 {
        a.ne_scalar(0.0)?.astype(a.dtype())?.sum(axes, keepdims)
    } else if p == 1.0 {
        a.sum(axes, keepdims)
    } else if p == 2.0 {
        a.mul(&a)?.sum(axes, keepdims)?.sqrt()
    } else {
        a.pow_scalar(p)?.sum(axes, keepdims)?.pow_scalar(1.0 / p)
    }
}

/// The `ord`-norm of each matrix of `x` (..., m, n), shape (...) or (..., 1, 1) with
/// `keepdims`.
pub fn matrix_norm(x: &NDArray, keepdims: bool, ord: NormOrd) -> Result<NDArray> {
    const OP: &str = "linalg.matrix_norm";
    let nd = x.ndim();
    super::check_matrices(OP, x, false)?;
    let (rows, cols) = (-2isize, -1isize);
    let keep = |r: NDArray| -> Result<NDArray> {
        if keepdims {
            let mut s = r.shape().to_vec();
            s.extend([1, 1]);
            let s: Vec<isize> = s.iter().map(|&d| d as isize).collect();
            r.reshape(&s)
        } else {
            Ok(r)
        }
    };
    let a = float_abs(x)?;
    let empty = x.shape()[nd - 2] == 0 || x.shape()[nd - 1] == 0;
    match ord {
        NormOrd::Fro => keep(a.mul(&a)?.sum(Some(&[rows, cols]), false)?.sqrt()?),
        NormOrd::Nuc => keep(factor::svdvals(x)?.sum(Some(&[-1]), false)?),
        NormOrd::P(p) if p == 2.0 || p == -2.0 => {
            if empty {
                return Err(Error::invalid(
                    OP,
                    format!("ord {p} of empty matrices (shape {:?})", x.shape()),
                ));
            }
            let s = factor::svdvals(x)?;
            keep(if p > 0.0 {
                s.max(Some(&[-1]), false)?
            } else {
                s.min(Some(&[-1]), false)?
            })
        }
        NormOrd::P(p) if p.abs() == 1.0 || p.is_infinite() => {
            if empty {
                return Err(Error::invalid(
                    OP,
                    format!("ord {p} of empty matrices (shape {:?})", x.shape()),
                ));
            }
            // 1 / -1: column sums; inf / -inf: row sums.
            let along = if p.abs() == 1.0 { rows } else { cols };
            let sums = a.sum(Some(&[along]), false)?;
            keep(if p > 0.0 {
                sums.max(Some(&[-1]), false)?
            } else {
                sums.min(Some(&[-1]), false)?
            })
        }
        NormOrd::P(p) => Err(Error::invalid(
            OP,
            format!("ord {p} is not a matrix norm; use 'fro', 'nuc', 1, -1, 2, -2, inf or -inf"),
        )),
    }
}

/// The diagonal `offset` above the main one (below when negative) of each matrix of `x`
/// (..., m, n), as a view of shape (..., k): writes through it reach `x`.
pub fn diagonal(x: &NDArray, offset: isize) -> Result<NDArray> {
    const OP: &str = "linalg.diagonal";
    let nd = x.ndim();
    super::check_matrices(OP, x, false)?;
    let (m, n) = (x.shape()[nd - 2] as isize, x.shape()[nd - 1] as isize);
    let (sm, sn) = (x.strides()[nd - 2], x.strides()[nd - 1]);
    let (r0, c0) = if offset >= 0 {
        (0, offset)
    } else {
        (-offset, 0)
    };
    let len = (m - r0).min(n - c0).max(0) as usize;
    let mut shape = x.shape()[..nd - 2].to_vec();
    shape.push(len);
    let mut strides = x.strides()[..nd - 2].to_vec();
    strides.push(sm + sn);
    let start = if len == 0 { 0 } else { r0 * sm + c0 * sn };
    let off = x.offset() as isize + start;
    x.as_strided(&shape, &strides, off as usize)
}

/// The sum of each matrix's diagonal `offset` (..., in `x`'s dtype, integers summed as `sum`
/// sums them).
pub fn trace(x: &NDArray, offset: isize) -> Result<NDArray> {
    diagonal(x, offset)?.sum(Some(&[-1]), false)
}

/// The outer product (m, n) of two vectors (m,) and (n,), in their promoted dtype.
pub fn outer(a: &NDArray, b: &NDArray) -> Result<NDArray> {
    if a.ndim() != 1 || b.ndim() != 1 {
        return Err(Error::invalid(
            "linalg.outer",
            format!(
                "needs two vectors, got shapes {:?} and {:?}",
                a.shape(),
                b.shape()
            ),
        ));
    }
    a.reshape(&[-1, 1])?.mul(&b.reshape(&[1, -1])?)
}

/// The cross product of 3-vectors along `axis` of `a` and `b` (broadcast together), in their
/// promoted dtype.
pub fn cross(a: &NDArray, b: &NDArray, axis: isize) -> Result<NDArray> {
    const OP: &str = "linalg.cross";
    let pick = |x: &NDArray, i: usize| -> Result<NDArray> {
        let nd = x.ndim() as isize;
        let ax = if axis < 0 { axis + nd } else { axis };
        if ax < 0 || ax >= nd {
            return Err(Error::invalid(
                OP,
                format!("axis {axis} is out of range for shape {:?}", x.shape()),
            ));
        }
        let ax = ax as usize;
        if x.shape()[ax] != 3 {
            return Err(Error::invalid(
                OP,
                format!(
                    "needs size 3 along axis {axis}; shapes {:?} and {:?}",
                    a.shape(),
                    b.shape()
                ),
            ));
        }
        x.slice(&crate::ndarray::axis_range(x.ndim(), ax, i, 1))
    };
    let (a0, a1, a2) = (pick(a, 0)?, pick(a, 1)?, pick(a, 2)?);
    let (b0, b1, b2) = (pick(b, 0)?, pick(b, 1)?, pick(b, 2)?);
    let c0 = a1.mul(&b2)?.sub(&a2.mul(&b1)?)?;
    let c1 = a2.mul(&b0)?.sub(&a0.mul(&b2)?)?;
    let c2 = a0.mul(&b1)?.sub(&a1.mul(&b0)?)?;
    let nd = c0.ndim() as isize;
    let ax = if axis < 0 { axis + nd } else { axis };
    NDArray::concat(&[&c0, &c1, &c2], ax)
}

/// `tensordot`: contracts `a`'s axes `axes.0` with `b`'s `axes.1` (pairwise, equal sizes); the
/// result has `a`'s free axes then `b`'s.
pub fn tensordot(a: &NDArray, b: &NDArray, axes: (&[isize], &[isize])) -> Result<NDArray> {
    const OP: &str = "linalg.tensordot";
    let norm = |x: &NDArray, ax: &[isize]| -> Result<Vec<usize>> {
        ax.iter()
            .map(|&k| {
                let nd = x.ndim() as isize;
                let k2 = if k < 0 { k + nd } else { k };
                if k2 < 0 || k2 >= nd {
                    return Err(Error::invalid(
                        OP,
                        format!("axis {k} is out of range for shape {:?}", x.shape()),
                    ));
                }
                Ok(k2 as usize)
            })
            .collect()
    };
    let (ca, cb) = (norm(a, axes.0)?, norm(b, axes.1)?);
    if ca.len() != cb.len()
        || ca
            .iter()
            .zip(&cb)
            .any(|(&i, &j)| a.shape()[i] != b.shape()[j])
    {
        return Err(Error::invalid(
            OP,
            format!(
                "axes {:?} of shape {:?} and {:?} of shape {:?} differ in count or size",
                axes.0,
                a.shape(),
                axes.1,
                b.shape()
            ),
        ));
    }
    let free_a: Vec<usize> = (0..a.ndim()).filter(|i| !ca.contains(i)).collect();
    let free_b: Vec<usize> = (0..b.ndim()).filter(|i| !cb.contains(i)).collect();
    let size = |x: &NDArray, ax: &[usize]| ax.iter().map(|&i| x.shape()[i]).product::<usize>();
    let perm_a: Vec<isize> = free_a.iter().chain(&ca).map(|&i| i as isize).collect();
    let perm_b: Vec<isize> = cb.iter().chain(&free_b).map(|&i| i as isize).collect();
    let (fa, k, fb) = (size(a, &free_a), size(a, &ca), size(b, &free_b));
    let a2 = a
        .permute(&perm_a)?
        .compact()?
        .reshape(&[fa as isize, k as isize])?;
    let b2 = b
        .permute(&perm_b)?
        .compact()?
        .reshape(&[k as isize, fb as isize])?;
    let out: Vec<isize> = free_a
        .iter()
        .map(|&i| a.shape()[i] as isize)
        .chain(free_b.iter().map(|&i| b.shape()[i] as isize))
        .collect();
    a2.matmul(&b2)?.reshape(&out)
}

/// `a` (..., n, n) to the integer power `n` by repeated squaring: the identity for 0, the
/// inverse's power for negative `n` (an error for a singular matrix).
pub fn matrix_power(a: &NDArray, n: i64) -> Result<NDArray> {
    const OP: &str = "linalg.matrix_power";
    let size = super::check_matrices(OP, a, true)?.0;
    if n == 0 {
        let eye = NDArray::eye(size, size, 0, a.dtype())?.to_device(a.device())?;
        return eye.broadcast_to(a.shape())?.compact();
    }
    let mut base = if n < 0 { factor::inv(a)? } else { a.clone() };
    let mut e = n.unsigned_abs();
    let mut acc: Option<NDArray> = None;
    while e > 0 {
        if e & 1 == 1 {
            acc = Some(match acc {
                None => base.clone(),
                Some(x) => x.matmul(&base)?,
            });
        }
        e >>= 1;
        if e > 0 {
            base = base.matmul(&base)?;
        }
    }
    match acc {
        Some(x) => x.compact(),
        None => Err(Error::invalid(OP, "unreachable: a non-zero power")),
    }
}
