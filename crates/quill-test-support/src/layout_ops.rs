//! View ops on quill-core's `Layout` checked step by step against the table oracle: one `Op`
//! value applies to a `Layout` and to a `Table`, `step` compares the two results (including
//! the no-copy rule of reshape), `check_invariants` holds a layout to what its offsets say, and
//! `random_view` builds a realistic non-contiguous layout of a given shape.

use crate::index::{norm_axis, numel};
use crate::prng::Prng;
use crate::table::Table;
use quill_core::{Error, Layout, SliceArg};

/// The table of a layout as the code under test reports it (through `Layout::offsets`).
pub fn table_of(l: &Layout) -> Table {
    Table {
        shape: l.shape().to_vec(),
        vals: l.offsets().collect(),
    }
}

/// A realistic random view of `shape` over a buffer it returns the length of: a contiguous
/// parent with a random dim order, each dim enlarged by a step of 1 or 2 and then sliced back
/// with a step of +-1 or +-2, and sometimes an extra leading dim indexed to move the offset.
pub fn random_view(rng: &mut Prng, shape: &[usize]) -> (Layout, usize) {
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
        let step = if rng.odds(1, 3) {
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
    /// `permute(axes)`: axes may be negative; must name every dim once.
    Permute(Vec<isize>),
    /// `transpose(a, b)`: swaps two (possibly negative) axes.
    Transpose(isize, isize),
    /// `broadcast_to(shape)` under NumPy's rules.
    BroadcastTo(Vec<usize>),
    /// `squeeze(axes)`: each named axis must have size 1.
    Squeeze(Vec<isize>),
    /// `squeeze()` with no axes: drops every size-1 dim.
    SqueezeAll,
    /// `unsqueeze(axis)`: a new size-1 dim at `axis` of the result (`-1` appends).
    Unsqueeze(isize),
    /// `flip(axes)`: reverses the named axes.
    Flip(Vec<isize>),
    /// Basic indexing with integers, ranges with steps, `NewAxis` and `Ellipsis`.
    Slice(Vec<SliceArg>),
    /// `reshape(shape)` with at most one `-1`; on a layout it may refuse with
    /// `ReshapeNeedsCopy`, which `step` checks against the oracle.
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

/// True when a shape's element count (dims of 0 counted as 1) fits `isize`, the bound quill
/// puts on every shape before building anything.
fn fits_isize(shape: &[usize]) -> bool {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d.max(1)))
        .is_some_and(|n| n <= isize::MAX as usize)
}

impl Op {
    /// quill-core's result of the op on `l` (the code under test).
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
            // Shapes whose element count does not fit are refused before building anything.
            Op::BroadcastTo(s) => fits_isize(s).then(|| t.broadcast_to(s))?,
            Op::Squeeze(a) => t.squeeze(&norm_axes(a, n)?),
            Op::SqueezeAll => {
                let ones: Vec<usize> = (0..n).filter(|&a| t.shape[a] == 1).collect();
                t.squeeze(&ones)
            }
            Op::Unsqueeze(a) => Some(t.unsqueeze(norm_axis(*a, n + 1)?)),
            Op::Flip(a) => Some(t.flip(&norm_axes(a, n)?)),
            Op::Slice(args) => t.slice(args),
            Op::Reshape(s) => {
                let shape = crate::index::infer_shape(t.numel(), s)?;
                fits_isize(&shape).then(|| t.reshape(&shape))?
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
