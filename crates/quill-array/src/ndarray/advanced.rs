//! NumPy's advanced (integer-array) indexing, `a[i, j]` with `i` and `j` integer arrays, as the
//! Array API standard asks since 2024.12: the index arrays (and the ints beside them) broadcast
//! together to a shape B; the result holds, for each position of B, the element (or the
//! sub-array over the dims left unindexed) they name. Slices, `None` and `...` mix in as basic
//! indexing does. Where the advanced entries sit next to each other B replaces their dims in
//! place, else it goes first (NumPy's rule). The result is a copy: one `index_select` over the
//! indexed dims flattened, after each index is checked against its own dim.

use super::NDArray;
use quill_core::shape::broadcast_shapes;
use quill_core::{DType, Error, Result, SliceArg};

/// One entry of an indexing expression: a basic one (int, slice, `None`, `...`) or an array of
/// integer positions.
#[derive(Clone, Debug)]
pub enum IndexArg {
    /// Basic indexing, as `NDArray::slice` takes it.
    Basic(SliceArg),
    /// Integer positions along one dim (negative count from the end).
    Array(NDArray),
}

const OP: &str = "advanced indexing";

impl NDArray {
    /// `a[idx]` with NumPy semantics for any mix of basic entries and integer arrays: a view when
    /// there is no array entry, else a copy of shape (as NumPy) B + the dims left, with B moved
    /// to where the array entries sit when they are adjacent. An index out of its dim's range
    /// is `IndexOutOfRange` naming the dim; a non-integer array an error naming its dtype.
    pub fn index(&self, idx: &[IndexArg]) -> Result<NDArray> {
        let basic_only: Option<Vec<SliceArg>> = idx
            .iter()
            .map(|a| match a {
                IndexArg::Basic(s) => Some(*s),
                IndexArg::Array(_) => None,
            })
            .collect();
        if let Some(basic) = basic_only {
            return self.slice(&basic);
        }
        // 1. Basic indexing with every advanced entry (arrays and the ints beside them) kept
        //    as a full range, noting which dims of that view they index.
        let consumed = idx
            .iter()
            .filter(|a| !matches!(a, IndexArg::Basic(SliceArg::NewAxis | SliceArg::Ellipsis)))
            .count();
        let mut basic = Vec::with_capacity(idx.len());
        let mut positions = Vec::new();
        let mut arrays = Vec::new();
        let mut out_dim = 0;
        for a in idx {
            match a {
                IndexArg::Basic(SliceArg::Ellipsis) => {
                    basic.push(SliceArg::Ellipsis);
                    // Saturating: too many indices is `slice`'s error, reported below.
                    out_dim += self.ndim().saturating_sub(consumed);
                }
                IndexArg::Basic(SliceArg::Index(i)) => {
                    basic.push(SliceArg::range(None, None, 1));
                    positions.push(out_dim);
                    arrays.push(NDArray::scalar(*i as i64));
                    out_dim += 1;
                }
                IndexArg::Basic(s) => {
                    basic.push(*s);
                    out_dim += 1;
                }
                IndexArg::Array(arr) => {
                    if !arr.dtype().is_int() {
                        return Err(Error::invalid(
                            OP,
                            format!(
                                "index arrays must hold integers, got {} (a bool mask must be \
                                 the only index)",
                                arr.dtype()
                            ),
                        ));
                    }
                    basic.push(SliceArg::range(None, None, 1));
                    positions.push(out_dim);
                    arrays.push(arr.clone());
                    out_dim += 1;
                }
            }
        }
        let v = self.slice(&basic)?;
        // 2. The index arrays broadcast to B, each checked against its dim and made
        //    non-negative, then folded into one flat position over the indexed dims.
        let mut b: Vec<usize> = Vec::new();
        for a in &arrays {
            b = broadcast_shapes(OP, &b, a.shape()).map_err(|_| {
                let shapes: Vec<&[usize]> = arrays.iter().map(|a| a.shape()).collect();
                Error::invalid(
                    OP,
                    format!("the index arrays' shapes {shapes:?} do not broadcast together"),
                )
            })?;
        }
        let dims: Vec<usize> = positions.iter().map(|&p| v.shape()[p]).collect();
        let mut flat = NDArray::zeros(&b, DType::I64)?;
        for (k, (a, &p)) in arrays.iter().zip(&positions).enumerate() {
            let dim = dims[k];
            let a = a.astype(DType::I64)?.to_device(self.device())?;
            let a = checked(&a, dim, p)?;
            let below: usize = dims[k + 1..].iter().product();
            flat = flat.add(&a.mul_scalar(below as i64)?)?;
        }
        // 3. The indexed dims moved first and flattened, one index_select, B unfolded.
        let rest: Vec<usize> = (0..v.ndim()).filter(|d| !positions.contains(d)).collect();
        let order: Vec<isize> = positions.iter().chain(&rest).map(|&d| d as isize).collect();
        let moved = v.permute(&order)?;
        let mut lead = vec![dims.iter().product::<usize>() as isize];
        lead.extend(rest.iter().map(|&d| v.shape()[d] as isize));
        let picked = moved
            .reshape(&lead)?
            .index_select(0, &flat.reshape(&[-1])?.to_device(self.device())?)?;
        let mut shape: Vec<isize> = b.iter().map(|&d| d as isize).collect();
        shape.extend(rest.iter().map(|&d| v.shape()[d] as isize));
        let out = picked.reshape(&shape)?;
        // 4. Adjacent advanced entries: B goes where they were (NumPy's rule).
        let adjacent = positions.windows(2).all(|w| w[1] == w[0] + 1);
        let first = positions[0];
        if !adjacent || first == 0 {
            return Ok(out);
        }
        let nb = b.len();
        let order: Vec<isize> = (nb..nb + first)
            .chain(0..nb)
            .chain(nb + first..out.ndim())
            .map(|d| d as isize)
            .collect();
        out.permute(&order)
    }
}

/// `a` with negative positions counted from the end of a dim of length `dim`; an error naming
/// the first position outside it (the dim is `axis` of the indexed view).
fn checked(a: &NDArray, dim: usize, axis: usize) -> Result<NDArray> {
    if a.numel() == 0 {
        return Ok(a.clone());
    }
    let lo = a.min(None, false)?.item::<i64>()?;
    let hi = a.max(None, false)?.item::<i64>()?;
    let n = dim as i64;
    for bad in [lo, hi] {
        if bad < -n || bad >= n {
            return Err(Error::IndexOutOfRange {
                op: OP,
                index: bad as isize,
                axis,
                size: dim,
            });
        }
    }
    if lo >= 0 {
        return Ok(a.clone());
    }
    NDArray::where_(&a.lt_scalar(0i64)?, &a.add_scalar(n)?, a)
}
