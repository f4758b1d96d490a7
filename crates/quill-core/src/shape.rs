//! Shape arithmetic shared by every op: checked element counts, axis normalisation, contiguous
//! strides and NumPy broadcasting of shapes.

use crate::error::{Dims, Error, Result};

/// Number of elements, or an `Overflow` error naming `op` when the product overflows `usize`
/// (or `isize`, since strides are signed and must be able to reach every element).
pub fn checked_numel(op: &'static str, shape: &[usize]) -> Result<usize> {
    let mut n: usize = 1;
    let mut zero = false;
    for &d in shape {
        if d == 0 {
            zero = true;
        }
        n = n.checked_mul(d.max(1)).ok_or(Error::Overflow {
            op,
            shape: shape.into(),
        })?;
    }
    if n > isize::MAX as usize {
        return Err(Error::Overflow {
            op,
            shape: shape.into(),
        });
    }
    Ok(if zero { 0 } else { n })
}

/// Maps a possibly negative axis into `0..ndim + extra` (`extra = 1` for insertion points).
pub fn normalize_axis(op: &'static str, axis: isize, ndim: usize, extra: usize) -> Result<usize> {
    let n = (ndim + extra) as isize;
    let a = if axis < 0 { axis + n } else { axis };
    if a < 0 || a >= n {
        return Err(Error::AxisOutOfRange {
            op,
            axis,
            ndim,
            extra,
        });
    }
    Ok(a as usize)
}

/// Normalises a list of axes and rejects repeats.
pub fn normalize_axes(op: &'static str, axes: &[isize], ndim: usize) -> Result<Vec<usize>> {
    let mut seen = vec![false; ndim];
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = normalize_axis(op, a, ndim, 0)?;
        if seen[n] {
            return Err(Error::DuplicateAxis {
                op,
                axis: a,
                axes: axes.to_vec(),
            });
        }
        seen[n] = true;
        out.push(n);
    }
    Ok(out)
}

/// C-order strides for `shape` (in elements). Callers check the element count first, so the
/// products fit in `isize`.
pub fn contiguous_strides(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut acc: isize = 1;
    for i in (0..shape.len()).rev() {
        strides[i] = acc;
        acc = acc.saturating_mul(shape[i].max(1) as isize);
    }
    strides
}

/// The NumPy broadcast of two shapes (right-aligned; a dim of 1 stretches).
pub fn broadcast_shapes(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(Error::ShapeMismatch {
                op,
                lhs: a.into(),
                rhs: b.into(),
                hint: format!(" (cannot broadcast: dim {i} of the result: {da} vs {db})"),
            });
        };
    }
    checked_numel(op, &out)?;
    Ok(out)
}

/// Copies `shape` into a [`Dims`], the form errors print it in.
pub fn dims(shape: &[usize]) -> Dims {
    shape.into()
}
