//! `Layout`: shape, signed strides (in elements) and offset into a flat buffer, and every view
//! transform on it. Nothing here touches data; each transform returns a new layout over the same
//! buffer, or an error naming the op and its arguments.

use crate::error::{Error, Result};
use crate::runs::{Offsets, Runs};
use crate::shape::{checked_numel, contiguous_strides, normalize_axes, normalize_axis};

/// How an n-d view maps onto a flat buffer: element `[i0, i1, ...]` lives at
/// `offset + sum(i_k * strides[k])`, all in elements. Strides may be negative or zero.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    shape: Vec<usize>,
    strides: Vec<isize>,
    offset: usize,
}

impl Layout {
    /// A C-contiguous layout at offset 0.
    pub fn contiguous(shape: &[usize]) -> Result<Layout> {
        checked_numel("contiguous", shape)?;
        Ok(Layout {
            shape: shape.to_vec(),
            strides: contiguous_strides(shape),
            offset: 0,
        })
    }

    /// Builds a layout from raw parts, checking that every reachable offset lies inside a buffer
    /// of `buffer_len` elements (the seed's `as_strided`, made safe).
    pub fn as_strided(
        shape: &[usize],
        strides: &[isize],
        offset: usize,
        buffer_len: usize,
    ) -> Result<Layout> {
        const OP: &str = "as_strided";
        if shape.len() != strides.len() {
            return Err(Error::invalid(
                OP,
                format!(
                    "shape {:?} has {} dims but strides {:?} has {}",
                    shape,
                    shape.len(),
                    strides,
                    strides.len()
                ),
            ));
        }
        let numel = checked_numel(OP, shape)?;
        let l = Layout {
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            offset,
        };
        let (lo, hi) = l.offset_bounds();
        // No buffer holds more than isize::MAX elements; the view transforms rely on every
        // offset fitting in isize.
        let len = buffer_len.min(isize::MAX as usize);
        let ok = if numel == 0 {
            offset <= len
        } else {
            lo >= 0 && hi < len as i128
        };
        if !ok {
            return Err(Error::OutOfBounds {
                op: OP,
                shape: shape.into(),
                strides: strides.to_vec(),
                offset,
                reach: format!("{lo}..={hi}"),
                len: buffer_len,
            });
        }
        Ok(l)
    }

    /// The size of each dim.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// The step in the buffer, in elements, between neighbours along each dim.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }
    /// The buffer position, in elements, of the element at index `[0, 0, ...]`.
    pub fn offset(&self) -> usize {
        self.offset
    }
    /// The rank: the number of dims (0 for a scalar).
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }
    /// The number of elements: the product of the dims (1 for rank 0, 0 if any dim is 0).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// C-order contiguity; size-1 dims are ignored and a size-0 array is contiguous.
    pub fn is_contiguous(&self) -> bool {
        if self.numel() == 0 {
            return true;
        }
        let mut expected: isize = 1;
        for (&d, &s) in self.shape.iter().zip(&self.strides).rev() {
            if d == 1 {
                continue;
            }
            if s != expected {
                return false;
            }
            expected *= d as isize;
        }
        true
    }

    /// The smallest and largest reachable offsets (i128, so raw `as_strided` input cannot
    /// overflow). For a size-0 layout both are the offset.
    pub fn offset_bounds(&self) -> (i128, i128) {
        let mut lo = self.offset as i128;
        let mut hi = lo;
        if self.shape.contains(&0) {
            return (lo, hi);
        }
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            let ext = (d as i128 - 1) * s as i128;
            if ext < 0 {
                lo += ext;
            } else {
                hi += ext;
            }
        }
        (lo, hi)
    }

    /// The first dim that makes this view unwritable: stride 0 with size > 1 (a broadcast).
    pub fn broadcast_dim(&self) -> Option<usize> {
        (0..self.ndim()).find(|&i| self.strides[i] == 0 && self.shape[i] > 1)
    }

    /// True when no two indices can reach the same offset (a sufficient test: sorted by |stride|,
    /// each stride exceeds the span of the smaller ones). Views made by slicing, permuting and
    /// flipping a contiguous array always pass; some `as_strided` views do not.
    pub fn is_non_overlapping(&self) -> bool {
        if self.numel() <= 1 {
            return true;
        }
        let mut dims: Vec<(usize, usize)> = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|(&d, _)| d > 1)
            .map(|(&d, &s)| (d, s.unsigned_abs()))
            .collect();
        dims.sort_by_key(|&(_, s)| s);
        let mut span: usize = 0;
        for (d, s) in dims {
            if s <= span {
                return false;
            }
            span += (d - 1) * s;
        }
        true
    }

    /// Reorders the dims: dim `k` of the result is dim `axes[k]` of `self`. `axes` must name
    /// every axis exactly once (negative axes count from the end).
    pub fn permute(&self, axes: &[isize]) -> Result<Layout> {
        const OP: &str = "permute";
        if axes.len() != self.ndim() {
            return Err(Error::invalid(
                OP,
                format!(
                    "axes {:?} has {} entries but the array {:?} has rank {}",
                    axes,
                    axes.len(),
                    self.shape,
                    self.ndim()
                ),
            ));
        }
        let axes = normalize_axes(OP, axes, self.ndim())?;
        Ok(Layout {
            shape: axes.iter().map(|&a| self.shape[a]).collect(),
            strides: axes.iter().map(|&a| self.strides[a]).collect(),
            offset: self.offset,
        })
    }

    /// Swaps dims `a` and `b` (negative axes count from the end).
    pub fn transpose(&self, a: isize, b: isize) -> Result<Layout> {
        const OP: &str = "transpose";
        let a = normalize_axis(OP, a, self.ndim(), 0)?;
        let b = normalize_axis(OP, b, self.ndim(), 0)?;
        let mut l = self.clone();
        l.shape.swap(a, b);
        l.strides.swap(a, b);
        Ok(l)
    }

    /// NumPy broadcasting: align right, a dim of 1 (or a missing leading dim) stretches with
    /// stride 0.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Layout> {
        const OP: &str = "broadcast_to";
        let fail = |detail: String| Error::Broadcast {
            op: OP,
            from: self.shape.as_slice().into(),
            to: shape.into(),
            detail,
        };
        if shape.len() < self.ndim() {
            return Err(fail(format!(
                "target rank {} is below the array's rank {}",
                shape.len(),
                self.ndim()
            )));
        }
        checked_numel(OP, shape)?;
        let lead = shape.len() - self.ndim();
        let mut strides = vec![0isize; shape.len()];
        for (i, &t) in shape.iter().enumerate().skip(lead) {
            let (d, s) = (self.shape[i - lead], self.strides[i - lead]);
            strides[i] = if d == t {
                s
            } else if d == 1 {
                0
            } else {
                return Err(fail(format!("dim {i}: {d} vs {t}")));
            };
        }
        Ok(Layout {
            shape: shape.to_vec(),
            strides,
            offset: self.offset,
        })
    }

    /// Removes the given size-1 axes; an axis whose size is not 1 is an error (as NumPy).
    pub fn squeeze(&self, axes: &[isize]) -> Result<Layout> {
        const OP: &str = "squeeze";
        let axes = normalize_axes(OP, axes, self.ndim())?;
        for &a in &axes {
            if self.shape[a] != 1 {
                return Err(Error::invalid(
                    OP,
                    format!(
                        "cannot squeeze axis {a} of shape {:?}: its size is {}, not 1",
                        self.shape, self.shape[a]
                    ),
                ));
            }
        }
        Ok(self.keep_dims(|i| !axes.contains(&i)))
    }

    /// Removes every size-1 axis.
    pub fn squeeze_all(&self) -> Layout {
        self.keep_dims(|i| self.shape[i] != 1)
    }

    fn keep_dims(&self, keep: impl Fn(usize) -> bool) -> Layout {
        let idx: Vec<usize> = (0..self.ndim()).filter(|&i| keep(i)).collect();
        Layout {
            shape: idx.iter().map(|&i| self.shape[i]).collect(),
            strides: idx.iter().map(|&i| self.strides[i]).collect(),
            offset: self.offset,
        }
    }

    /// Inserts a size-1 axis at `axis` (in `-ndim-1..=ndim`).
    pub fn unsqueeze(&self, axis: isize) -> Result<Layout> {
        let a = normalize_axis("unsqueeze", axis, self.ndim(), 1)?;
        let stride = if a < self.ndim() {
            self.strides[a].saturating_mul(self.shape[a].max(1) as isize)
        } else {
            1
        };
        let mut l = self.clone();
        l.shape.insert(a, 1);
        l.strides.insert(a, stride);
        Ok(l)
    }

    /// Reverses the given axes: the offset moves to the last element and the stride changes sign.
    pub fn flip(&self, axes: &[isize]) -> Result<Layout> {
        let axes = normalize_axes("flip", axes, self.ndim())?;
        let mut l = self.clone();
        let nonempty = self.numel() > 0;
        for a in axes {
            if nonempty {
                l.offset = (l.offset as isize + (l.shape[a] as isize - 1) * l.strides[a]) as usize;
            }
            l.strides[a] = -l.strides[a];
        }
        Ok(l)
    }

    /// Resolves one `-1` in a requested shape against `numel`.
    pub fn infer_shape(op: &'static str, from: &[usize], shape: &[isize]) -> Result<Vec<usize>> {
        let numel: usize = from.iter().product();
        let mut infer = None;
        let mut known: usize = 1;
        for (i, &d) in shape.iter().enumerate() {
            if d == -1 {
                if infer.replace(i).is_some() {
                    return Err(Error::invalid(
                        op,
                        format!("only one dim may be -1, got {shape:?}"),
                    ));
                }
            } else if d < 0 {
                return Err(Error::invalid(
                    op,
                    format!("invalid dim {d} in shape {shape:?}"),
                ));
            } else {
                known = known.checked_mul(d as usize).ok_or(Error::Overflow {
                    op,
                    shape: shape
                        .iter()
                        .map(|&d| d.max(0) as usize)
                        .collect::<Vec<_>>()
                        .into(),
                })?;
            }
        }
        let size_err = || Error::ReshapeSize {
            op,
            from: from.into(),
            from_numel: numel,
            to: format!("{shape:?}"),
            to_numel: if infer.is_some() {
                format!("{known} x ?")
            } else {
                known.to_string()
            },
        };
        let mut out: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
        match infer {
            Some(i) => {
                if known == 0 || !numel.is_multiple_of(known) {
                    return Err(size_err());
                }
                out[i] = numel / known;
            }
            None if known != numel => return Err(size_err()),
            None => {}
        }
        // A zero dim hides the overflow of the others from `known`: [0, 2^62, 4] is no shape.
        checked_numel(op, &out)?;
        Ok(out)
    }

    /// A view of `shape` (one dim may be -1) over the same elements in C order, or
    /// `ReshapeNeedsCopy` when no strided layout can express it (NumPy's no-copy rule).
    pub fn reshape(&self, shape: &[isize]) -> Result<Layout> {
        const OP: &str = "view";
        let new_shape = Layout::infer_shape(OP, &self.shape, shape)?;
        if self.numel() == 0 {
            return Ok(Layout {
                strides: contiguous_strides(&new_shape),
                shape: new_shape,
                offset: self.offset,
            });
        }
        match nocopy_strides(&self.shape, &self.strides, &new_shape) {
            Some(strides) => Ok(Layout {
                shape: new_shape,
                strides,
                offset: self.offset,
            }),
            None => Err(Error::ReshapeNeedsCopy {
                op: OP,
                from: self.shape.as_slice().into(),
                strides: self.strides.clone(),
                to: new_shape.as_slice().into(),
            }),
        }
    }

    /// Offsets of every element in C order.
    pub fn offsets(&self) -> OffsetIter<'_> {
        OffsetIter::new(self)
    }

    pub(crate) fn from_parts_unchecked(
        shape: Vec<usize>,
        strides: Vec<isize>,
        offset: usize,
    ) -> Layout {
        Layout {
            shape,
            strides,
            offset,
        }
    }
}

/// NumPy's `_attempt_nocopy_reshape`: walk old and new dims in groups of equal product; each old
/// group must be contiguous in itself, and the new group takes C strides from its last stride.
/// Requires equal, non-zero element counts.
fn nocopy_strides(
    old_shape: &[usize],
    old_strides: &[isize],
    new_shape: &[usize],
) -> Option<Vec<isize>> {
    let (od, os): (Vec<usize>, Vec<isize>) = old_shape
        .iter()
        .zip(old_strides)
        .filter(|(&d, _)| d != 1)
        .map(|(&d, &s)| (d, s))
        .unzip();
    let nd = new_shape;
    let mut ns = vec![0isize; nd.len()];
    let (mut oi, mut oj, mut ni, mut nj) = (0, 1, 0, 1);
    while ni < nd.len() && oi < od.len() {
        let mut np = nd[ni];
        let mut op = od[oi];
        while np != op {
            if np < op {
                np *= *nd.get(nj)?;
                nj += 1;
            } else {
                op *= *od.get(oj)?;
                oj += 1;
            }
        }
        for ok in oi..oj - 1 {
            if os[ok] != od[ok + 1] as isize * os[ok + 1] {
                return None;
            }
        }
        ns[nj - 1] = os[oj - 1];
        for nk in (ni + 1..nj).rev() {
            ns[nk - 1] = ns[nk] * nd[nk] as isize;
        }
        ni = nj;
        nj += 1;
        oi = oj;
        oj += 1;
    }
    let last = if ni > 0 { ns[ni - 1] } else { 1 };
    for s in ns.iter_mut().skip(ni) {
        *s = last;
    }
    Some(ns)
}

/// The offsets of a layout's elements in C order: [`Offsets`] over the layout's own shape and
/// strides (see the `runs` module).
#[derive(Debug, Clone)]
pub struct OffsetIter<'a>(Offsets<'a, 1>);

impl<'a> OffsetIter<'a> {
    fn new(layout: &'a Layout) -> Self {
        let n = layout.numel();
        OffsetIter(
            Runs::from_parts(&layout.shape, [&layout.strides], [layout.offset], 0..n).elements(),
        )
    }
}

impl Iterator for OffsetIter<'_> {
    type Item = usize;
    #[inline]
    fn next(&mut self) -> Option<usize> {
        self.0.next().map(|[o]| o)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for OffsetIter<'_> {}
