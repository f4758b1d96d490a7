//! The oracle: an array as an explicit table, its shape and, in C order, the flat buffer offset
//! (or any id) of every element, with every view op implemented naively on the table by
//! gathering entries through an index map. Invalid arguments give `None`, so the oracle also
//! says which calls must fail.

use crate::index::{all_indices, naive_offsets, numel, ravel};
use crate::slicing::py_slice_positions;
use quill_core::SliceArg;

/// An array as its shape and the C-order list of its elements' offsets (or ids).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    /// The array's shape.
    pub shape: Vec<usize>,
    /// One entry per element in C order (`numel(shape)` of them): its buffer offset, or its id.
    pub vals: Vec<usize>,
}

impl Table {
    /// The table of a raw strided layout: offset + sum(index * stride), by the odometer.
    pub fn strided(shape: &[usize], strides: &[isize], offset: usize) -> Table {
        Table {
            shape: shape.to_vec(),
            vals: naive_offsets(shape, strides, offset),
        }
    }

    /// `0, 1, ..., n - 1` in C order: a fresh contiguous array (or ids of its elements).
    pub fn contiguous(shape: &[usize]) -> Table {
        Table {
            shape: shape.to_vec(),
            vals: (0..numel(shape)).collect(),
        }
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.vals.len()
    }

    /// The entry at the multi-index `idx` (one in-range index per dim; panics otherwise).
    pub fn at(&self, idx: &[usize]) -> usize {
        self.vals[ravel(&self.shape, idx)]
    }

    /// The table of `shape` whose element at index `i` is this table's element at `src(i)`.
    fn gather(&self, shape: Vec<usize>, src: impl Fn(&[usize]) -> Vec<usize>) -> Table {
        let vals = all_indices(&shape)
            .iter()
            .map(|i| self.at(&src(i)))
            .collect();
        Table { shape, vals }
    }

    /// `axes` must be a permutation of `0..ndim` (already normalised).
    pub fn permute(&self, axes: &[usize]) -> Table {
        let shape = axes.iter().map(|&a| self.shape[a]).collect();
        self.gather(shape, |i| {
            let mut old = vec![0; axes.len()];
            for (k, &a) in axes.iter().enumerate() {
                old[a] = i[k];
            }
            old
        })
    }

    /// Swaps axes `a` and `b` (already normalised, both `< ndim`).
    pub fn transpose(&self, a: usize, b: usize) -> Table {
        let mut axes: Vec<usize> = (0..self.shape.len()).collect();
        axes.swap(a, b);
        self.permute(&axes)
    }

    /// NumPy broadcasting by repetition; `None` when the shapes are incompatible.
    pub fn broadcast_to(&self, target: &[usize]) -> Option<Table> {
        if target.len() < self.shape.len() {
            return None;
        }
        let lead = target.len() - self.shape.len();
        for (j, &d) in self.shape.iter().enumerate() {
            if d != 1 && d != target[lead + j] {
                return None;
            }
        }
        Some(self.gather(target.to_vec(), |t| {
            (0..self.shape.len())
                .map(|j| if self.shape[j] == 1 { 0 } else { t[lead + j] })
                .collect()
        }))
    }

    /// Removes the given (normalised, distinct) axes, which must have size 1.
    pub fn squeeze(&self, axes: &[usize]) -> Option<Table> {
        if axes.iter().any(|&a| self.shape[a] != 1) {
            return None;
        }
        let keep: Vec<usize> = (0..self.shape.len())
            .filter(|a| !axes.contains(a))
            .collect();
        let shape = keep.iter().map(|&a| self.shape[a]).collect();
        Some(self.gather(shape, |i| {
            let mut old = vec![0; self.shape.len()];
            for (k, &a) in keep.iter().enumerate() {
                old[a] = i[k];
            }
            old
        }))
    }

    /// Inserts a size-1 axis at `axis` (in `0..=ndim`).
    pub fn unsqueeze(&self, axis: usize) -> Table {
        let mut shape = self.shape.clone();
        shape.insert(axis, 1);
        self.gather(shape, |i| {
            let mut old = i.to_vec();
            old.remove(axis);
            old
        })
    }

    /// Reverses the given (normalised, distinct) axes.
    pub fn flip(&self, axes: &[usize]) -> Table {
        self.gather(self.shape.clone(), |i| {
            let mut old = i.to_vec();
            for &a in axes {
                old[a] = self.shape[a] - 1 - i[a];
            }
            old
        })
    }

    /// Same C-order list, new shape; `None` when the element counts differ.
    pub fn reshape(&self, shape: &[usize]) -> Option<Table> {
        (numel(shape) == self.numel()).then(|| Table {
            shape: shape.to_vec(),
            vals: self.vals.clone(),
        })
    }

    /// NumPy basic indexing, naively; `None` for an invalid index expression.
    pub fn slice(&self, args: &[SliceArg]) -> Option<Table> {
        enum Out {
            Axis(usize, Vec<usize>),
            New,
        }
        let ndim = self.shape.len();
        let consumed = args
            .iter()
            .filter(|a| matches!(a, SliceArg::Index(_) | SliceArg::Range { .. }))
            .count();
        let ellipses = args
            .iter()
            .filter(|a| matches!(a, SliceArg::Ellipsis))
            .count();
        if ellipses > 1 || consumed > ndim {
            return None;
        }
        // Expand: the ellipsis (or the end) stands for full ranges over the remaining axes.
        let mut expanded: Vec<SliceArg> = Vec::new();
        for a in args {
            if let SliceArg::Ellipsis = a {
                expanded.extend(std::iter::repeat_n(SliceArg::FULL, ndim - consumed));
            } else {
                expanded.push(*a);
            }
        }
        if ellipses == 0 {
            expanded.extend(std::iter::repeat_n(SliceArg::FULL, ndim - consumed));
        }
        let mut fixed: Vec<Option<usize>> = vec![None; ndim];
        let mut outs: Vec<Out> = Vec::new();
        let mut axis = 0;
        for a in expanded {
            match a {
                SliceArg::NewAxis => outs.push(Out::New),
                SliceArg::Index(i) => {
                    let n = self.shape[axis] as i128;
                    let j = if i < 0 { i as i128 + n } else { i as i128 };
                    if j < 0 || j >= n {
                        return None;
                    }
                    fixed[axis] = Some(j as usize);
                    axis += 1;
                }
                SliceArg::Range { start, stop, step } => {
                    if step == 0 {
                        return None;
                    }
                    outs.push(Out::Axis(
                        axis,
                        py_slice_positions(start, stop, step, self.shape[axis]),
                    ));
                    axis += 1;
                }
                SliceArg::Ellipsis => unreachable!(),
            }
        }
        assert_eq!(axis, ndim);
        let shape: Vec<usize> = outs
            .iter()
            .map(|o| match o {
                Out::Axis(_, p) => p.len(),
                Out::New => 1,
            })
            .collect();
        Some(self.gather(shape, |i| {
            let mut old: Vec<usize> = fixed.iter().map(|f| f.unwrap_or(0)).collect();
            for (k, o) in outs.iter().enumerate() {
                if let Out::Axis(a, p) = o {
                    old[*a] = p[i[k]];
                }
            }
            old
        }))
    }

    /// True when some offset and strides reproduce this table exactly: the offset is the first
    /// element, each stride is read off the unit step along its axis, then every element is
    /// checked.
    pub fn fits_strided(&self) -> bool {
        if self.numel() == 0 {
            return true;
        }
        let base = self.vals[0] as i128;
        let r = self.shape.len();
        let strides: Vec<i128> = (0..r)
            .map(|d| {
                if self.shape[d] > 1 {
                    let mut e = vec![0; r];
                    e[d] = 1;
                    self.at(&e) as i128 - base
                } else {
                    0
                }
            })
            .collect();
        all_indices(&self.shape)
            .iter()
            .zip(&self.vals)
            .all(|(idx, &v)| {
                base + idx
                    .iter()
                    .zip(&strides)
                    .map(|(&i, &s)| i as i128 * s)
                    .sum::<i128>()
                    == v as i128
            })
    }
}
