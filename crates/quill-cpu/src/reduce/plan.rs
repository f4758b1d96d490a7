//! The reduction plan: split an input layout into kept dims (which index the output) and reduced
//! dims, drop size-1 dims, coalesce each group separately, and choose the loop shape:
//! - inner (`outer == false`): each output is a fold over the reduced block, whose innermost dim
//!   is the reduced dim of smallest stride (stride 1 for the common "reduce the last axes");
//! - outer (`outer == true`): the reduced dims have no unit stride but a kept dim does (sum over
//!   axis 0 of a C-contiguous matrix): that kept dim becomes the innermost output dim and whole
//!   rows of it are folded into a row of accumulators, which vectorises over the kept dim.
//!
//! Reduced dims may be flipped and reordered (the fold is associative) except for argmax/argmin,
//! whose answer is a position in C order: for them only adjacent dims merge.

use quill_core::{Layout, Offsets, Runs};
use std::ops::Range;

/// One dim of a plan: (size, stride in elements).
pub type Dim = (usize, isize);

/// A group of dims (kept or reduced), outermost first, walked with quill-core's `Runs`.
#[derive(Debug, Clone, Default)]
pub struct Dims {
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
}

impl Dims {
    fn of(dims: Vec<Dim>) -> Dims {
        let (shape, strides) = dims.into_iter().unzip();
        Dims { shape, strides }
    }
    /// The innermost dim (size, stride); the group must not be empty.
    pub fn last(&self) -> Dim {
        let n = self.shape.len() - 1;
        (self.shape[n], self.strides[n])
    }
    /// The group without its innermost dim.
    pub fn outer(&self) -> Dims {
        let n = self.shape.len().saturating_sub(1);
        Dims {
            shape: self.shape[..n].to_vec(),
            strides: self.strides[..n].to_vec(),
        }
    }
    /// The inner runs of the positions `range` (C order) from the first element at `base`.
    #[inline]
    pub fn runs(&self, base: isize, range: Range<usize>) -> Runs<'_, 1> {
        Runs::from_parts(&self.shape, [&self.strides], [base as usize], range)
    }
    /// The offset of every position in `range`, in order.
    #[inline]
    pub fn offsets(&self, base: isize, range: Range<usize>) -> Offsets<'_, 1> {
        self.runs(base, range).elements()
    }
    /// The offset of position `linear`.
    pub fn offset(&self, base: isize, linear: usize) -> isize {
        let [o] = self
            .offsets(base, linear..linear + 1)
            .next()
            .expect("linear is inside the group");
        o as isize
    }
}

#[derive(Debug, Clone)]
pub struct ReducePlan {
    /// Offset of the first element reached (after flips).
    pub base: isize,
    /// Kept dims in the order the kernels write the output (C-contiguous over these sizes).
    pub kept: Dims,
    /// Reduced dims, outermost first; never empty (a lone `(1, 1)` when nothing is reduced).
    pub red: Dims,
    pub outer: bool,
    /// The kept sizes in the output's order, and for each its position in `kept`, when the
    /// kernels' order differs (the outer loop moved its unit-stride dim last).
    pub perm: Option<(Vec<usize>, Vec<usize>)>,
    pub n_out: usize,
    pub n_red: usize,
}

/// Merges dim `i` into dim `i + 1` where stepping through `i` continues `i + 1`.
fn coalesce(dims: &mut Vec<Dim>) {
    let mut i = dims.len();
    while i >= 2 {
        i -= 1;
        let (outer, inner) = (dims[i - 1], dims[i]);
        if outer.1 == inner.1 * inner.0 as isize {
            dims[i].0 *= outer.0;
            dims.remove(i - 1);
        }
    }
}

impl ReducePlan {
    /// `axes` are distinct and in range (the caller normalises them). `ordered`: keep the
    /// reduced dims' C order (argmax / argmin).
    pub fn new(l: &Layout, axes: &[usize], ordered: bool) -> ReducePlan {
        let mut base = l.offset() as isize;
        let (mut kept, mut red): (Vec<Dim>, Vec<Dim>) = (Vec::new(), Vec::new());
        for (d, (&n, &s)) in l.shape().iter().zip(l.strides()).enumerate() {
            if axes.contains(&d) {
                red.push((n, s));
            } else {
                kept.push((n, s));
            }
        }
        let n_out: usize = kept.iter().map(|d| d.0).product();
        let n_red: usize = red.iter().map(|d| d.0).product();
        let mut plan = ReducePlan {
            base,
            kept: Dims::default(),
            red: Dims::of(vec![(1, 1)]),
            outer: false,
            perm: None,
            n_out,
            n_red,
        };
        if n_out == 0 || n_red == 0 {
            return plan;
        }
        kept.retain(|d| d.0 != 1);
        red.retain(|d| d.0 != 1);
        if !ordered {
            for r in red.iter_mut() {
                if r.1 < 0 {
                    base += (r.0 as isize - 1) * r.1;
                    r.1 = -r.1;
                }
            }
            red.sort_by_key(|r| std::cmp::Reverse(r.1));
        }
        coalesce(&mut kept);
        coalesce(&mut red);
        if red.is_empty() {
            red.push((1, 1));
        }
        plan.base = base;
        let inner_stride = red.last().expect("red is non-empty").1;
        let unit = kept.iter().rposition(|d| d.1 == 1);
        if let (Some(c), true) = (unit, inner_stride.unsigned_abs() != 1 && n_red > 1) {
            plan.outer = true;
            if c + 1 != kept.len() {
                let sizes: Vec<usize> = kept.iter().map(|d| d.0).collect();
                let pos: Vec<usize> = (0..kept.len())
                    .map(|j| match j {
                        j if j == c => kept.len() - 1,
                        j if j > c => j - 1,
                        j => j,
                    })
                    .collect();
                let col = kept.remove(c);
                kept.push(col);
                plan.perm = Some((sizes, pos));
            }
        }
        plan.kept = Dims::of(kept);
        plan.red = Dims::of(red);
        plan
    }
}
