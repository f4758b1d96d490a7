//! The loop plan every kernel runs: the operands' layouts (already broadcast to one shape) with
//! size-1 dims dropped and adjacent dims merged wherever every operand allows it (PyTorch's
//! `coalesce_dimensions`), plus the choice of 32- or 64-bit index math.

use crate::layout::Layout;

/// A strided loop over one or more operands of one shape, coalesced to as few dims as the
/// operands' strides allow; kernels walk it with [`Runs`](crate::Runs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopPlan {
    /// Coalesced shape, outermost first. Empty for a single element; `[0]` for no elements.
    pub shape: Vec<usize>,
    /// Per operand, its strides over `shape`.
    pub strides: Vec<Vec<isize>>,
    /// Per operand, the offset of its first element.
    pub offsets: Vec<usize>,
    /// True when every reachable offset and the element count fit in `i32`.
    pub index32: bool,
}

impl LoopPlan {
    /// Plans a loop over operands that share one shape. Panics only on a caller bug (operands of
    /// different shapes), never on user data: callers broadcast first.
    pub fn new(layouts: &[&Layout]) -> LoopPlan {
        let shape0 = layouts[0].shape();
        assert!(
            layouts.iter().all(|l| l.shape() == shape0),
            "LoopPlan::new: operands must share a shape"
        );
        let n_ops = layouts.len();
        let offsets: Vec<usize> = layouts.iter().map(|l| l.offset()).collect();
        if shape0.contains(&0) {
            return LoopPlan {
                shape: vec![0],
                strides: vec![vec![1]; n_ops],
                offsets,
                index32: true,
            };
        }
        // Drop size-1 dims: their strides never apply.
        let keep: Vec<usize> = (0..shape0.len()).filter(|&i| shape0[i] != 1).collect();
        let mut shape: Vec<usize> = keep.iter().map(|&i| shape0[i]).collect();
        let mut strides: Vec<Vec<isize>> = layouts
            .iter()
            .map(|l| keep.iter().map(|&i| l.strides()[i]).collect())
            .collect();
        // Merge i into i+1 (outer into inner) when every operand steps through dim i exactly as
        // if it continued dim i+1.
        let mut i = shape.len();
        while i >= 2 {
            i -= 1;
            let (outer, inner) = (i - 1, i);
            let mergeable = strides
                .iter()
                .all(|s| s[outer] == s[inner] * shape[inner] as isize);
            if mergeable {
                shape[inner] *= shape[outer];
                shape.remove(outer);
                for s in strides.iter_mut() {
                    s.remove(outer);
                }
            }
        }
        let mut plan = LoopPlan {
            shape,
            strides,
            offsets,
            index32: true,
        };
        plan.index32 = plan.fits_i32();
        plan
    }

    /// The plan of `offsets.len()` operands that are all one contiguous run of `n` elements
    /// (what `new` gives for same-shape contiguous operands, without its work).
    pub fn flat(n: usize, offsets: &[usize]) -> LoopPlan {
        let mut plan = LoopPlan {
            shape: vec![n],
            strides: vec![vec![1]; offsets.len()],
            offsets: offsets.to_vec(),
            index32: true,
        };
        plan.index32 = plan.fits_i32();
        plan
    }

    /// The number of elements the loop visits: the product of `shape`.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    /// The number of loop dims after coalescing (0 for a single element).
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    fn fits_i32(&self) -> bool {
        let lim = i32::MAX as i128;
        if self.numel() as i128 > lim {
            return false;
        }
        self.strides.iter().zip(&self.offsets).all(|(s, &o)| {
            let (mut lo, mut hi) = (o as i128, o as i128);
            for (&d, &st) in self.shape.iter().zip(s) {
                let e = (d as i128 - 1) * st as i128;
                if e < 0 {
                    lo += e
                } else {
                    hi += e
                }
            }
            lo >= 0 && hi <= lim
        })
    }

    /// Rewrites the plan so operand `k` walks memory forwards, outermost dim with the largest
    /// stride: negative strides of `k` are flipped (in every operand, moving offsets), dims are
    /// sorted by `k`'s stride, and the result is coalesced again. Element pairing between
    /// operands is unchanged; only the visiting order changes. Used for writes into arbitrary
    /// views, so that the destination splits into disjoint runs.
    pub fn normalize_for(&self, k: usize) -> LoopPlan {
        if self.numel() <= 1 {
            return self.clone();
        }
        let mut strides = self.strides.clone();
        let mut offsets = self.offsets.clone();
        for d in 0..self.ndim() {
            if strides[k][d] < 0 {
                let ext = self.shape[d] as isize - 1;
                for (s, o) in strides.iter_mut().zip(offsets.iter_mut()) {
                    *o = (*o as isize + ext * s[d]) as usize;
                    s[d] = -s[d];
                }
            }
        }
        let mut order: Vec<usize> = (0..self.ndim()).collect();
        order.sort_by(|&a, &b| strides[k][b].cmp(&strides[k][a]));
        let shape: Vec<usize> = order.iter().map(|&d| self.shape[d]).collect();
        let layouts: Vec<Layout> = strides
            .iter()
            .zip(&offsets)
            .map(|(s, &o)| {
                Layout::from_parts_unchecked(
                    shape.clone(),
                    order.iter().map(|&d| s[d]).collect(),
                    o,
                )
            })
            .collect();
        let refs: Vec<&Layout> = layouts.iter().collect();
        LoopPlan::new(&refs)
    }

    /// Offset of element `linear` (C order over `shape`) for operand `k`.
    pub fn offset_of(&self, k: usize, mut linear: usize) -> usize {
        let mut off = self.offsets[k] as isize;
        for d in (0..self.ndim()).rev() {
            let i = linear % self.shape[d];
            linear /= self.shape[d];
            off += i as isize * self.strides[k][d];
        }
        off as usize
    }
}
