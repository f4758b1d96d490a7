//! Shared test support for quill-core's integration tests: the view oracle (an array as an explicit
//! table of flat buffer offsets, with every view op implemented naively on the table), Python's
//! slice semantics written as a filter over candidate positions, an exact "is this table a strided
//! layout?" check, a tiny deterministic RNG, and a builder of random realistic views.
//!
//! Nothing here calls the view logic under test except `Layout::contiguous` / `Layout::as_strided`
//! to make starting layouts, whose offsets the oracle recomputes from the raw parts.

#![allow(dead_code)]

use quill_core::{Error, Layout, SliceArg};

/// An array as an explicit table: its shape and, in C order, the flat offset of every element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub shape: Vec<usize>,
    pub vals: Vec<usize>,
}

/// Number of elements of a shape (1 for rank 0).
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// The C-order multi-index of element `k`.
pub fn unravel(shape: &[usize], mut k: usize) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = k % shape[d];
        k /= shape[d];
    }
    idx
}

/// The C-order position of a multi-index.
pub fn ravel(shape: &[usize], idx: &[usize]) -> usize {
    assert_eq!(shape.len(), idx.len());
    let mut k = 0;
    for d in 0..shape.len() {
        assert!(idx[d] < shape[d]);
        k = k * shape[d] + idx[d];
    }
    k
}

/// Every multi-index of `shape` in C order (one empty index for rank 0, none for size 0).
pub fn all_indices(shape: &[usize]) -> Vec<Vec<usize>> {
    (0..numel(shape)).map(|k| unravel(shape, k)).collect()
}

/// Maps a possibly negative axis into `0..n`; the oracle's own normalisation.
pub fn norm_axis(a: isize, n: usize) -> Option<usize> {
    let n = n as i128;
    let a = a as i128;
    let v = if a < 0 { a + n } else { a };
    (0..n).contains(&v).then_some(v as usize)
}

impl Table {
    /// The table of a raw strided layout: offset + sum(index * stride), enumerated index by index.
    pub fn strided(shape: &[usize], strides: &[isize], offset: usize) -> Table {
        let vals = all_indices(shape)
            .iter()
            .map(|idx| {
                let v = offset as i128
                    + idx
                        .iter()
                        .zip(strides)
                        .map(|(&i, &s)| i as i128 * s as i128)
                        .sum::<i128>();
                usize::try_from(v).expect("strided table reaches a negative offset")
            })
            .collect();
        Table {
            shape: shape.to_vec(),
            vals,
        }
    }

    pub fn contiguous(shape: &[usize]) -> Table {
        Table {
            shape: shape.to_vec(),
            vals: (0..numel(shape)).collect(),
        }
    }

    pub fn numel(&self) -> usize {
        self.vals.len()
    }

    pub fn at(&self, idx: &[usize]) -> usize {
        self.vals[ravel(&self.shape, idx)]
    }

    /// Builds a table of `shape` whose element at index `i` is this table's element at `src(i)`.
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
    /// element, each stride is read off the unit step along its axis, then every element is checked.
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

/// The positions Python's `range(n)[start:stop:step]` selects, found by filtering every candidate
/// position rather than by a length formula. `step != 0`.
pub fn py_slice_positions(
    start: Option<isize>,
    stop: Option<isize>,
    step: isize,
    n: usize,
) -> Vec<usize> {
    assert!(step != 0);
    let n = n as i128;
    let step = step as i128;
    let wrap = |v: isize| if v < 0 { v as i128 + n } else { v as i128 };
    if step > 0 {
        // The first position: start, counted from the end if negative, never before 0.
        let first = start.map_or(0, |s| wrap(s).max(0));
        let end = stop.map_or(n, wrap);
        (0..n)
            .filter(|&i| i >= first && i < end && (i - first) % step == 0)
            .map(|i| i as usize)
            .collect()
    } else {
        // The first position: start, counted from the end if negative, never past the last.
        let first = start.map_or(n - 1, |s| wrap(s).min(n - 1));
        let end = stop.map_or(-1, wrap);
        (0..n)
            .rev()
            .filter(|&i| i <= first && i > end && (first - i) % (-step) == 0)
            .map(|i| i as usize)
            .collect()
    }
}

/// The oracle's `-1` inference: `None` when the spec is invalid for `numel` elements.
pub fn infer_shape(numel: usize, spec: &[isize]) -> Option<Vec<usize>> {
    let holes = spec.iter().filter(|&&d| d == -1).count();
    if holes > 1 || spec.iter().any(|&d| d < -1) {
        return None;
    }
    let known: u128 = spec
        .iter()
        .filter(|&&d| d >= 0)
        .map(|&d| d as u128)
        .product();
    if holes == 0 {
        return (known == numel as u128).then(|| spec.iter().map(|&d| d as usize).collect());
    }
    if known == 0 || !(numel as u128).is_multiple_of(known) {
        return None;
    }
    let fill = (numel as u128 / known) as usize;
    Some(
        spec.iter()
            .map(|&d| if d == -1 { fill } else { d as usize })
            .collect(),
    )
}

/// The table of a layout as the code under test reports it.
pub fn table_of(l: &Layout) -> Table {
    Table {
        shape: l.shape().to_vec(),
        vals: l.offsets().collect(),
    }
}

/// splitmix64: a tiny deterministic generator for deriving op arguments from proptest seeds.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }
    /// True with probability `num / den`.
    pub fn chance(&mut self, num: usize, den: usize) -> bool {
        self.below(den) < num
    }
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        self.shuffle(&mut p);
        p
    }
    /// A dim size: mostly 1..=4, sometimes 0.
    pub fn dim(&mut self) -> usize {
        match self.below(24) {
            0 => 0,
            1..=6 => 1,
            k => 2 + k % 3,
        }
    }
    /// A random shape of rank `rank` with at most `max_numel` elements.
    pub fn shape(&mut self, rank: usize, max_numel: usize) -> Vec<usize> {
        loop {
            let s: Vec<usize> = (0..rank).map(|_| self.dim()).collect();
            if s.iter().map(|&d| d.max(1)).product::<usize>() <= max_numel {
                return s;
            }
        }
    }
    /// Writes axis `a` of a rank-`n` array either as itself or as its negative alias.
    pub fn alias(&mut self, a: usize, n: usize) -> isize {
        if self.chance(1, 2) {
            a as isize
        } else {
            a as isize - n as isize
        }
    }
}

/// A realistic random view of `shape` over a buffer it returns the length of: a contiguous
/// parent with a random dim order, each dim enlarged by a step of 1 or 2 and then sliced back
/// with a step of +-1 or +-2, and sometimes an extra leading dim indexed to move the offset.
pub fn random_view(rng: &mut Rng, shape: &[usize]) -> (Layout, usize) {
    let r = shape.len();
    let perm = rng.permutation(r);
    let mult: Vec<usize> = (0..r).map(|_| 1 + rng.below(2)).collect();
    let lead = rng.below(3);
    // parent[perm order] with a leading dim of `lead + 1`
    let mut parent_shape = vec![lead + 1];
    parent_shape.extend(perm.iter().map(|&a| shape[a] * mult[a]));
    let parent = Layout::contiguous(&parent_shape).unwrap();
    let buffer_len = numel(&parent_shape);
    let mut inv = vec![0isize; r + 1];
    for (k, &a) in perm.iter().enumerate() {
        inv[a + 1] = (k + 1) as isize;
    }
    let l = parent.permute(&inv).unwrap();
    let mut args = vec![SliceArg::Index(rng.below(lead + 1) as isize)];
    for &m in &mult {
        let step = if rng.chance(1, 3) {
            -(m as isize)
        } else {
            m as isize
        };
        args.push(SliceArg::Range {
            start: None,
            stop: None,
            step,
        });
    }
    let l = l.slice(&args).unwrap();
    assert_eq!(l.shape(), shape);
    (l, buffer_len)
}

/// One view op with its arguments, applicable both to a `Layout` and to the oracle `Table`.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Permute(Vec<isize>),
    Transpose(isize, isize),
    BroadcastTo(Vec<usize>),
    Squeeze(Vec<isize>),
    SqueezeAll,
    Unsqueeze(isize),
    Flip(Vec<isize>),
    Slice(Vec<SliceArg>),
    Reshape(Vec<isize>),
}

/// Normalises a list of axes for the oracle: `None` on an out-of-range or repeated axis.
fn norm_axes(axes: &[isize], n: usize) -> Option<Vec<usize>> {
    let out: Vec<usize> = axes
        .iter()
        .map(|&a| norm_axis(a, n))
        .collect::<Option<_>>()?;
    let mut sorted = out.clone();
    sorted.sort_unstable();
    sorted.dedup();
    (sorted.len() == out.len()).then_some(out)
}

impl Op {
    pub fn on_layout(&self, l: &Layout) -> quill_core::Result<Layout> {
        match self {
            Op::Permute(a) => l.permute(a),
            Op::Transpose(a, b) => l.transpose(*a, *b),
            Op::BroadcastTo(s) => l.broadcast_to(s),
            Op::Squeeze(a) => l.squeeze(a),
            Op::SqueezeAll => Ok(l.squeeze_all()),
            Op::Unsqueeze(a) => l.unsqueeze(*a),
            Op::Flip(a) => l.flip(a),
            Op::Slice(args) => l.slice(args),
            Op::Reshape(s) => l.reshape(s),
        }
    }

    /// The oracle's result, or `None` when the arguments are invalid for this table.
    pub fn on_table(&self, t: &Table) -> Option<Table> {
        let n = t.shape.len();
        match self {
            Op::Permute(a) => {
                if a.len() != n {
                    return None;
                }
                Some(t.permute(&norm_axes(a, n)?))
            }
            Op::Transpose(a, b) => Some(t.transpose(norm_axis(*a, n)?, norm_axis(*b, n)?)),
            Op::BroadcastTo(s) => {
                // Also refuse shapes whose element count does not fit (before building anything).
                let big = s
                    .iter()
                    .try_fold(1usize, |acc, &d| acc.checked_mul(d.max(1)))?;
                if big > isize::MAX as usize {
                    return None;
                }
                t.broadcast_to(s)
            }
            Op::Squeeze(a) => t.squeeze(&norm_axes(a, n)?),
            Op::SqueezeAll => {
                let ones: Vec<usize> = (0..n).filter(|&a| t.shape[a] == 1).collect();
                t.squeeze(&ones)
            }
            Op::Unsqueeze(a) => Some(t.unsqueeze(norm_axis(*a, n + 1)?)),
            Op::Flip(a) => Some(t.flip(&norm_axes(a, n)?)),
            Op::Slice(args) => t.slice(args),
            Op::Reshape(s) => {
                let shape = infer_shape(t.numel(), s)?;
                let big = shape
                    .iter()
                    .try_fold(1usize, |acc, &d| acc.checked_mul(d.max(1)))?;
                if big > isize::MAX as usize {
                    return None;
                }
                t.reshape(&shape)
            }
        }
    }
}

/// Applies `op` to the layout and to its oracle table and checks they agree: both valid with equal
/// shapes and offsets, or both invalid. A reshape may also refuse with `ReshapeNeedsCopy`, which
/// is checked against the oracle: refused exactly when no strided layout reproduces the table.
/// Returns the new pair when the op produced a view.
pub fn step(l: &Layout, t: &Table, op: &Op) -> Option<(Layout, Table)> {
    assert_eq!(&table_of(l), t, "layout and oracle disagree before {op:?}");
    match (op.on_layout(l), op.on_table(t)) {
        (Ok(l2), Some(t2)) => {
            assert_eq!(
                l2.shape(),
                t2.shape.as_slice(),
                "shape after {op:?} on {l:?}"
            );
            assert_eq!(
                table_of(&l2),
                t2,
                "offsets after {op:?} on {l:?} (got layout {l2:?})"
            );
            if let Op::Reshape(_) = op {
                assert!(t2.fits_strided());
            }
            Some((l2, t2))
        }
        (Err(e), Some(t2)) => {
            assert!(
                matches!(op, Op::Reshape(_)) && matches!(e, Error::ReshapeNeedsCopy { .. }),
                "{op:?} on {l:?} failed with {e} but the oracle gives {t2:?}"
            );
            assert!(
                !l.is_contiguous(),
                "reshape of the contiguous {l:?} refused: {e}"
            );
            assert!(
                !t2.fits_strided(),
                "{op:?} on {l:?} refused ({e}) but a strided view exists: {t2:?}"
            );
            None
        }
        (Ok(l2), None) => panic!("{op:?} on {l:?} gave {l2:?} but the arguments are invalid"),
        (Err(_), None) => None,
    }
}

/// Invariants every layout over a buffer of `buffer_len` elements must satisfy.
pub fn check_invariants(l: &Layout, buffer_len: usize) {
    let offs: Vec<usize> = l.offsets().collect();
    assert_eq!(offs.len(), numel(l.shape()), "{l:?}");
    assert_eq!(l.numel(), offs.len(), "{l:?}");
    assert_eq!(l.ndim(), l.shape().len());
    assert_eq!(l.strides().len(), l.shape().len());
    assert!(
        offs.iter().all(|&o| o < buffer_len),
        "{l:?} reaches outside a buffer of {buffer_len}: {offs:?}"
    );
    if offs.is_empty() {
        assert!(l.offset() <= buffer_len, "{l:?}");
        assert_eq!(
            l.offset_bounds(),
            (l.offset() as i128, l.offset() as i128),
            "{l:?}"
        );
    } else {
        assert_eq!(offs[0], l.offset(), "{l:?}");
        let lo = *offs.iter().min().unwrap() as i128;
        let hi = *offs.iter().max().unwrap() as i128;
        assert_eq!(l.offset_bounds(), (lo, hi), "{l:?}");
    }
    let consecutive = offs.windows(2).all(|w| w[1] == w[0] + 1);
    assert_eq!(
        l.is_contiguous(),
        consecutive,
        "is_contiguous of {l:?} with offsets {offs:?}"
    );
    if l.is_non_overlapping() {
        let mut sorted = offs.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(
            sorted.len(),
            offs.len(),
            "{l:?} claims no overlap but repeats offsets {offs:?}"
        );
    }
    let bdim = (0..l.ndim()).find(|&d| l.strides()[d] == 0 && l.shape()[d] > 1);
    assert_eq!(l.broadcast_dim(), bdim, "{l:?}");
}
