//! NumPy basic indexing on a layout: per-axis ranges with any step (negative too, bounds clamped
//! as Python's `slice.indices`), integer indices that drop the axis, new axes and an ellipsis;
//! and the `s![..]` macro that builds the argument list.

use crate::error::{Error, Result};
use crate::layout::Layout;
use std::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

/// One entry of an index expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SliceArg {
    /// `i`: selects one position (negative counts from the end) and removes the axis.
    Index(isize),
    /// `start..stop;step`: `None` bounds default by the sign of `step`, as in Python.
    Range {
        /// First position (inclusive; negative counts from the end), clamped to the axis.
        start: Option<isize>,
        /// End position (exclusive; negative counts from the end), clamped to the axis.
        stop: Option<isize>,
        /// Distance between selected positions; negative walks backwards, 0 is an error.
        step: isize,
    },
    /// Inserts an axis of size 1.
    NewAxis,
    /// Stands for as many full ranges as needed (Python's `...`); at most one per expression.
    Ellipsis,
}

/// Marker for `s![.., NewAxis]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewAxis;
/// Marker for `s![Ellipsis, 0]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ellipsis;

impl SliceArg {
    /// The whole axis, `..` (Python's `:`).
    pub const FULL: SliceArg = SliceArg::Range {
        start: None,
        stop: None,
        step: 1,
    };

    /// Builds [`SliceArg::Range`] from its three parts, unchecked (`slice` validates it).
    pub fn range(start: Option<isize>, stop: Option<isize>, step: isize) -> SliceArg {
        SliceArg::Range { start, stop, step }
    }

    /// Applies a step to a range; on anything else the step is kept as an invalid range so that
    /// `slice` reports it (the macro cannot fail).
    pub fn step_by(self, step: isize) -> SliceArg {
        match self {
            SliceArg::Range { start, stop, .. } => SliceArg::Range { start, stop, step },
            other => other.with_bad_step(step),
        }
    }

    fn with_bad_step(self, _step: isize) -> SliceArg {
        // An index, a new axis or an ellipsis cannot take a step: mark with step 0, which
        // `slice` rejects with a message naming the entry.
        SliceArg::Range {
            start: Some(isize::MIN),
            stop: Some(isize::MIN),
            step: 0,
        }
    }
}

impl From<NewAxis> for SliceArg {
    fn from(_: NewAxis) -> Self {
        SliceArg::NewAxis
    }
}
impl From<Ellipsis> for SliceArg {
    fn from(_: Ellipsis) -> Self {
        SliceArg::Ellipsis
    }
}
impl From<RangeFull> for SliceArg {
    fn from(_: RangeFull) -> Self {
        SliceArg::FULL
    }
}

macro_rules! int_slice_args {
    ($($t:ty),*) => {$(
        impl From<$t> for SliceArg {
            fn from(i: $t) -> Self {
                SliceArg::Index(clamp_isize(i as i128))
            }
        }
        impl From<Range<$t>> for SliceArg {
            fn from(r: Range<$t>) -> Self {
                SliceArg::range(Some(clamp_isize(r.start as i128)), Some(clamp_isize(r.end as i128)), 1)
            }
        }
        impl From<RangeFrom<$t>> for SliceArg {
            fn from(r: RangeFrom<$t>) -> Self {
                SliceArg::range(Some(clamp_isize(r.start as i128)), None, 1)
            }
        }
        impl From<RangeTo<$t>> for SliceArg {
            fn from(r: RangeTo<$t>) -> Self {
                SliceArg::range(None, Some(clamp_isize(r.end as i128)), 1)
            }
        }
        impl From<RangeInclusive<$t>> for SliceArg {
            fn from(r: RangeInclusive<$t>) -> Self {
                let end = *r.end() as i128 + 1;
                // `..=-1` means "to the end", which an exclusive bound of 0 would not say.
                SliceArg::range(Some(clamp_isize(*r.start() as i128)), if end == 0 { None } else { Some(clamp_isize(end)) }, 1)
            }
        }
        impl From<RangeToInclusive<$t>> for SliceArg {
            fn from(r: RangeToInclusive<$t>) -> Self {
                let end = r.end as i128 + 1;
                SliceArg::range(None, if end == 0 { None } else { Some(clamp_isize(end)) }, 1)
            }
        }
    )*};
}
int_slice_args!(i32, i64, isize, usize, u32);

fn clamp_isize(v: i128) -> isize {
    v.clamp(isize::MIN as i128, isize::MAX as i128) as isize
}

/// Builds an array of `SliceArg`s: `s![1.., ..;-1, 3, NewAxis, Ellipsis]`. A `;step` after a range sets
/// its step (`..;2`, `1..5;-1`, `..;-1`).
#[macro_export]
macro_rules! s {
    ($($e:expr $(; $step:expr)?),* $(,)?) => {
        [$( $crate::s!(@one $e $(; $step)?) ),*]
    };
    (@one $e:expr) => { $crate::SliceArg::from($e) };
    (@one $e:expr; $step:expr) => { $crate::SliceArg::from($e).step_by($step as isize) };
}

/// Resolves `start`, `stop` and `step` against an axis of `n` (Python's `slice.indices`) and
/// returns `(first index, length)`.
pub fn resolve_range(
    start: Option<isize>,
    stop: Option<isize>,
    step: isize,
    n: usize,
) -> (isize, usize) {
    let n = n as isize;
    let norm = |v: isize| if v < 0 { v.saturating_add(n) } else { v };
    if step > 0 {
        let a = start.map_or(0, |v| norm(v).clamp(0, n));
        let b = stop.map_or(n, |v| norm(v).clamp(0, n));
        let len = if b > a {
            ((b - a - 1) / step + 1) as usize
        } else {
            0
        };
        (a, len)
    } else {
        let a = start.map_or(n - 1, |v| norm(v).clamp(-1, n - 1));
        let b = stop.map_or(-1, |v| norm(v).clamp(-1, n - 1));
        let len = if a > b {
            ((a - b - 1) / step.unsigned_abs() as isize + 1) as usize
        } else {
            0
        };
        (a, len)
    }
}

impl Layout {
    /// NumPy basic indexing. Missing trailing entries mean full ranges.
    pub fn slice(&self, args: &[SliceArg]) -> Result<Layout> {
        const OP: &str = "slice";
        let consumed = args
            .iter()
            .filter(|a| matches!(a, SliceArg::Index(_) | SliceArg::Range { .. }))
            .count();
        let ellipses = args
            .iter()
            .filter(|a| matches!(a, SliceArg::Ellipsis))
            .count();
        if ellipses > 1 {
            return Err(Error::invalid(
                OP,
                format!("at most one ellipsis is allowed, got {ellipses} in {args:?}"),
            ));
        }
        if consumed > self.ndim() {
            return Err(Error::invalid(
                OP,
                format!(
                    "too many indices: {consumed} given for an array of shape {:?} (rank {})",
                    self.shape(),
                    self.ndim()
                ),
            ));
        }
        let mut shape = Vec::with_capacity(self.ndim() + args.len());
        let mut strides = Vec::with_capacity(self.ndim() + args.len());
        let mut offset = self.offset() as isize;
        let mut empty = self.numel() == 0;
        let mut axis = 0usize;
        let mut deltas: Vec<isize> = Vec::new();
        for (k, arg) in args.iter().enumerate() {
            match *arg {
                SliceArg::NewAxis => {
                    shape.push(1);
                    strides.push(0);
                }
                SliceArg::Ellipsis => {
                    for _ in 0..self.ndim() - consumed {
                        shape.push(self.shape()[axis]);
                        strides.push(self.strides()[axis]);
                        axis += 1;
                    }
                }
                SliceArg::Index(i) => {
                    let n = self.shape()[axis];
                    let j = if i < 0 {
                        i.saturating_add(n as isize)
                    } else {
                        i
                    };
                    if j < 0 || j >= n as isize {
                        return Err(Error::IndexOutOfRange {
                            op: OP,
                            index: i,
                            axis,
                            size: n,
                        });
                    }
                    deltas.push(j * self.strides()[axis]);
                    axis += 1;
                }
                SliceArg::Range { start, stop, step } => {
                    if step == 0 {
                        let what = if start == Some(isize::MIN) && stop == Some(isize::MIN) {
                            format!("entry {k} is not a range, so it cannot take a step")
                        } else {
                            format!("entry {k}: slice step cannot be zero")
                        };
                        return Err(Error::invalid(OP, what));
                    }
                    let n = self.shape()[axis];
                    let s = self.strides()[axis];
                    let (first, len) = resolve_range(start, stop, step, n);
                    if len == 0 {
                        empty = true;
                    } else {
                        deltas.push(first * s);
                    }
                    shape.push(len);
                    // Only dims of length > 1 ever apply their stride, and then |step| < n, so
                    // the product is bounded by the buffer; a saturated value is never used.
                    strides.push(if len > 1 { s.saturating_mul(step) } else { s });
                    axis += 1;
                }
            }
        }
        for a in axis..self.ndim() {
            shape.push(self.shape()[a]);
            strides.push(self.strides()[a]);
        }
        // An empty result reaches nothing: keep the old offset so it stays inside the buffer.
        if !empty {
            offset += deltas.iter().sum::<isize>();
        }
        Ok(Layout::from_parts_unchecked(
            shape,
            strides,
            offset as usize,
        ))
    }
}
