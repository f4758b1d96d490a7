//! The one error type of quill. Every variant names the op and the shapes, axes or values involved,
//! so that a message read alone says what went wrong and, where it helps, how to fix it.

use crate::DType;
use std::fmt;

/// A shape printed as `[3, 4]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Dims(pub Vec<usize>);

impl fmt::Debug for Dims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}
impl fmt::Display for Dims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}
impl From<&[usize]> for Dims {
    fn from(s: &[usize]) -> Self {
        Dims(s.to_vec())
    }
}

/// Every error a quill operation can return. Each variant carries `op`, the name of the
/// operation that failed (`"reshape"`, `"from_vec"`), which starts its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An axis argument lies outside `-(ndim + extra)..ndim + extra`; returned when a possibly
    /// negative axis is normalised.
    #[error("{op}: axis {axis} is out of range for an array of rank {ndim} (valid: {lo}..={hi})", lo = -(*ndim as i64) - (*extra as i64), hi = *ndim as i64 + *extra as i64 - 1)]
    AxisOutOfRange {
        /// The operation that failed.
        op: &'static str,
        /// The axis as the caller gave it, possibly negative.
        axis: isize,
        /// The rank of the array the axis refers to.
        ndim: usize,
        /// Extra valid positions beyond `ndim`: 1 where the axis is an insertion point
        /// (`unsqueeze`, `stack`), otherwise 0.
        extra: usize,
    },

    /// The same axis appears twice in an axis list (counting `-1` and `ndim - 1` as equal).
    #[error("{op}: axis {axis} is repeated in {axes:?}")]
    DuplicateAxis {
        /// The operation that failed.
        op: &'static str,
        /// The entry that repeats an earlier one, as the caller wrote it.
        axis: isize,
        /// The whole axis list as the caller gave it.
        axes: Vec<isize>,
    },

    /// An integer index lies outside `-size..size` for its axis (e.g. in NumPy-style slicing).
    #[error("{op}: index {index} is out of range for axis {axis} with size {size}")]
    IndexOutOfRange {
        /// The operation that failed.
        op: &'static str,
        /// The index as the caller gave it, possibly negative.
        index: isize,
        /// The axis being indexed (normalised, `0..ndim`).
        axis: usize,
        /// The length of that axis.
        size: usize,
    },

    /// A shape cannot be broadcast to a target shape: the target has a lower rank, or a dim
    /// differs and is not 1.
    #[error("{op}: cannot broadcast {from} to {to} ({detail})")]
    Broadcast {
        /// The operation that failed.
        op: &'static str,
        /// The shape being broadcast.
        from: Dims,
        /// The target shape.
        to: Dims,
        /// Which rank or dim is incompatible, in words.
        detail: String,
    },

    /// Two operands (or an operand and what the op expects) have incompatible shapes.
    #[error("{op}: shape mismatch: {lhs} vs {rhs}{hint}")]
    ShapeMismatch {
        /// The operation that failed.
        op: &'static str,
        /// The first (left) shape.
        lhs: Dims,
        /// The second (right or expected) shape.
        rhs: Dims,
        /// Appended verbatim to the message: empty, or text starting with a space that says
        /// which shapes the op accepts.
        hint: String,
    },

    /// A reshape asks for a shape whose element count differs from the array's, or whose
    /// inferred (`-1`) dim cannot make them equal.
    #[error("{op}: cannot reshape an array of shape {from} ({from_numel} elements) into {to} ({to_numel} elements)")]
    ReshapeSize {
        /// The operation that failed.
        op: &'static str,
        /// The current shape.
        from: Dims,
        /// The number of elements of `from`.
        from_numel: usize,
        /// The requested shape as written, `-1` (inferred dim) included.
        to: String,
        /// The element count of the requested shape; `"N x ?"` when one dim is inferred.
        to_numel: String,
    },

    /// A view-only reshape is impossible because the strides cannot express the new shape
    /// without copying the data.
    #[error("{op}: no view of shape {to} exists for the layout shape {from} strides {strides:?}; call reshape (which copies) or compact() first")]
    ReshapeNeedsCopy {
        /// The operation that failed.
        op: &'static str,
        /// The layout's current shape.
        from: Dims,
        /// The layout's current strides, in elements.
        strides: Vec<isize>,
        /// The requested shape.
        to: Dims,
    },

    /// A size computed from a shape overflows: its element count or byte size exceeds
    /// `isize::MAX`, or a dim grown by concatenation or padding overflows `usize`.
    #[error("{op}: the number of elements of shape {shape} overflows usize")]
    Overflow {
        /// The operation that failed.
        op: &'static str,
        /// The shape involved: the result's, or the input's where the result cannot be formed
        /// (from reshape, a `-1` dim shows as 0).
        shape: Dims,
    },

    /// A layout would address elements outside its buffer; returned by `Layout::as_strided`.
    #[error("{op}: layout shape {shape} strides {strides:?} offset {offset} reaches offsets {reach}, outside the buffer of {len} elements")]
    OutOfBounds {
        /// The operation that failed.
        op: &'static str,
        /// The layout's shape.
        shape: Dims,
        /// The layout's strides, in elements.
        strides: Vec<isize>,
        /// The layout's starting offset into the buffer, in elements.
        offset: usize,
        /// The lowest and highest offsets the layout reaches, as `"lo..=hi"`.
        reach: String,
        /// The buffer length, in elements.
        len: usize,
    },

    /// A write targets a broadcast view, where a stride-0 dim of size > 1 aliases one element
    /// many times.
    #[error("{op}: cannot write into a view with shape {shape} strides {strides:?}: dim {dim} has stride 0 and size > 1 (a broadcast view is read-only); compact() it first")]
    ReadOnlyView {
        /// The operation that failed.
        op: &'static str,
        /// The view's shape.
        shape: Dims,
        /// The view's strides, in elements.
        strides: Vec<isize>,
        /// The first dim with stride 0 and size > 1.
        dim: usize,
    },

    /// An operand has a different dtype from the one the op requires.
    #[error("{op}: dtype mismatch: expected {expected}, got {got}")]
    DTypeMismatch {
        /// The operation that failed.
        op: &'static str,
        /// The dtype the op requires.
        expected: DType,
        /// The dtype it was given.
        got: DType,
    },

    /// Data supplied to build an array has a length other than the shape's element count.
    #[error("{op}: {shape} has {numel} elements but the data has {len}")]
    DataLength {
        /// The operation that failed.
        op: &'static str,
        /// The requested shape.
        shape: Dims,
        /// The element count of `shape`.
        numel: usize,
        /// The number of elements in the supplied data.
        len: usize,
    },

    /// An argument is invalid in a way no other variant covers; `msg` says which and why.
    #[error("{op}: {msg}")]
    InvalidArgument {
        /// The operation that failed.
        op: &'static str,
        /// What is wrong with the argument.
        msg: String,
    },

    /// A device is missing or failed: no driver, no such GPU, a kernel that did not compile,
    /// out of memory.
    #[error("{op}: {device}: {msg}")]
    Device {
        /// The operation that failed.
        op: &'static str,
        /// A label for the device involved (e.g. `"cuda:0"`).
        device: String,
        /// What went wrong, usually the driver's own message.
        msg: String,
    },

    /// A backend has no kernel for this op (or for this dtype of it). The array layer turns it
    /// into the documented host fallback; a user sees it only where no fallback exists.
    #[error("{op}: not supported by the {backend} backend for {what}")]
    Unsupported {
        /// The operation that failed.
        op: &'static str,
        /// The backend's name.
        backend: &'static str,
        /// What is unsupported: the dtype, or the particular form of the op.
        what: String,
    },

    /// A number that the target dtype cannot hold (NumPy 2 refuses it rather than wrapping):
    /// writing `-1` into u8, `2**40` into i32, `inf` into an integer array. Python sees
    /// `OverflowError`, as from NumPy.
    #[error("{op}: {value} out of bounds for {dtype}{hint}")]
    ValueOutOfRange {
        /// The operation that failed.
        op: &'static str,
        /// The value as the user wrote it (`"Python integer 300"`, `"float inf"`).
        value: String,
        /// The dtype that cannot hold the value.
        dtype: DType,
        /// The valid range and, where it helps, the fix.
        hint: String,
    },

    /// A buffer larger than this machine can provide, or one the allocator refused. Rust aborts
    /// the process on a failed allocation, so every array buffer is checked before it is made
    /// (`quill_cpu::pool::take`); Python sees `MemoryError`.
    #[error("{op}: out of memory: {numel} elements of {dtype} need {bytes} bytes{why}")]
    OutOfMemory {
        /// The operation that failed.
        op: &'static str,
        /// The number of elements asked for.
        numel: usize,
        /// The element type, which sets the bytes per element.
        dtype: DType,
        /// The bytes asked for (saturated at `usize::MAX` when the product overflows).
        bytes: usize,
        /// Why it cannot be had: over the machine's memory and swap, or refused by the allocator.
        why: String,
    },

    /// Two operands live on different devices; the op does not move either one itself.
    #[error("{op}: operands on different devices: {lhs} and {rhs}; move one with to_device first")]
    DeviceMismatch {
        /// The operation that failed.
        op: &'static str,
        /// The first operand's device (e.g. `"cuda:0"`).
        lhs: String,
        /// The second operand's device.
        rhs: String,
    },
}

/// `std::result::Result` with quill's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Builds [`Error::Device`] from any string-like device name and message.
    pub fn device(op: &'static str, device: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::Device {
            op,
            device: device.into(),
            msg: msg.into(),
        }
    }

    /// Builds [`Error::Unsupported`] from any string-like description of what is missing.
    pub fn unsupported(op: &'static str, backend: &'static str, what: impl Into<String>) -> Self {
        Error::Unsupported {
            op,
            backend,
            what: what.into(),
        }
    }

    /// Builds [`Error::InvalidArgument`] from any string-like message.
    pub fn invalid(op: &'static str, msg: impl Into<String>) -> Self {
        Error::InvalidArgument {
            op,
            msg: msg.into(),
        }
    }
}

impl From<Vec<usize>> for Dims {
    fn from(s: Vec<usize>) -> Self {
        Dims(s)
    }
}
