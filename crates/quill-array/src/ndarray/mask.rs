//! Boolean-mask indexing, NumPy's `x[mask]` and `x[mask] = v`: a mask of rank k matching the
//! first k dims of `x` selects the elements (or sub-arrays) where it is true, in C order.

use super::NDArray;
use quill_core::{DType, Error, Result};

fn check(op: &'static str, x: &NDArray, mask: &NDArray) -> Result<()> {
    let k = mask.ndim();
    if mask.dtype() != DType::Bool {
        return Err(Error::DTypeMismatch {
            op,
            expected: DType::Bool,
            got: mask.dtype(),
        });
    }
    // NumPy also takes a mask with size-0 dims where the array's differ: it selects nothing.
    let fits = k <= x.ndim()
        && mask
            .shape()
            .iter()
            .zip(x.shape())
            .all(|(&m, &d)| m == d || m == 0);
    if !fits {
        return Err(Error::invalid(
            op,
            format!(
                "a boolean index of shape {:?} must match the leading dims of the array's shape \
                 {:?}",
                mask.shape(),
                x.shape()
            ),
        ));
    }
    Ok(())
}

/// The flat positions (int64) where `mask` is true; a rank-0 mask counts as one element.
fn hits(mask: &NDArray) -> Result<NDArray> {
    let flat = mask.compact()?.reshape(&[-1])?;
    Ok(flat.nonzero()?.remove(0))
}

impl NDArray {
    /// `self[mask]`: shape `[count] + self.shape[k..]`, a copy.
    pub fn select_mask(&self, mask: &NDArray) -> Result<NDArray> {
        const OP: &str = "boolean index";
        check(OP, self, mask)?;
        let k = mask.ndim();
        if mask.shape() != &self.shape()[..k] {
            let mut empty = vec![0];
            empty.extend_from_slice(&self.shape()[k..]);
            return NDArray::zeros(&empty, self.dtype())?.to_device(self.device());
        }
        // The lead count spelled out: -1 is ambiguous when a trailing dim is 0.
        let lead: usize = self.shape()[..k].iter().product();
        let mut shape: Vec<isize> = vec![lead as isize];
        shape.extend(self.shape()[k..].iter().map(|&d| d as isize));
        let rows = self.compact()?.reshape(&shape)?;
        rows.index_select(0, &hits(mask)?)
    }

    /// `self[mask] = value`, `value` broadcasting to `self.shape[k..]` (one value for every
    /// selected element or row) or of shape `[count] + self.shape[k..]` (one per selection).
    pub fn assign_mask(&self, mask: &NDArray, value: &NDArray) -> Result<()> {
        const OP: &str = "boolean index assignment";
        // Read-only first, as NumPy: even a mask that selects nothing may not write.
        self.check_writable(OP)?;
        check(OP, self, mask)?;
        let k = mask.ndim();
        if mask.shape() != &self.shape()[..k] {
            return Ok(()); // a mask with a size-0 dim the array lacks selects nothing
        }
        let rest = &self.shape()[k..];
        let per_row = value.ndim() <= rest.len()
            && quill_core::shape::broadcast_shapes(OP, value.shape(), rest)
                .is_ok_and(|s| s == rest);
        let value = if per_row {
            value.clone()
        } else {
            // One value per selected row: scatter them back into a full-size array.
            let idx = hits(mask)?;
            let mut want = vec![idx.numel()];
            want.extend_from_slice(rest);
            if value.shape() != &want[..] {
                return Err(Error::invalid(
                    OP,
                    format!(
                        "value of shape {:?} fits neither the selected rows {:?} nor one row {:?}",
                        value.shape(),
                        want,
                        rest
                    ),
                ));
            }
            if idx.numel() == 0 {
                return Ok(());
            }
            // Row r of the spread value is the value of the selection r belongs to (any row
            // for unselected r: `where` keeps self there).
            let lead: usize = self.shape()[..k].iter().product();
            let mut rows = vec![0usize; lead];
            for (i, p) in idx.to_vec::<i64>()?.into_iter().enumerate() {
                rows[p as usize] = i;
            }
            let pick: Vec<i64> = rows.into_iter().map(|r| r as i64).collect();
            let pick = NDArray::from_vec(pick, &[lead])?.to_device(value.device())?;
            let spread = value.index_select(0, &pick)?;
            spread.reshape(&self.shape().iter().map(|&d| d as isize).collect::<Vec<_>>())?
        };
        let mut mshape: Vec<isize> = mask.shape().iter().map(|&d| d as isize).collect();
        mshape.extend(std::iter::repeat_n(1, rest.len()));
        let m = mask.reshape(&mshape)?.broadcast_to(self.shape())?;
        let merged = NDArray::where_(&m, &value.astype(self.dtype())?, self)?;
        self.assign(&merged)
    }
}
