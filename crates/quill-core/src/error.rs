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

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{op}: axis {axis} is out of range for an array of rank {ndim} (valid: {lo}..={hi})", lo = -(*ndim as i64) - (*extra as i64), hi = *ndim as i64 + *extra as i64 - 1)]
    AxisOutOfRange {
        op: &'static str,
        axis: isize,
        ndim: usize,
        extra: usize,
    },

    #[error("{op}: axis {axis} is repeated in {axes:?}")]
    DuplicateAxis {
        op: &'static str,
        axis: isize,
        axes: Vec<isize>,
    },

    #[error("{op}: index {index} is out of range for axis {axis} with size {size}")]
    IndexOutOfRange {
        op: &'static str,
        index: isize,
        axis: usize,
        size: usize,
    },

    #[error("{op}: cannot broadcast {from} to {to} ({detail})")]
    Broadcast {
        op: &'static str,
        from: Dims,
        to: Dims,
        detail: String,
    },

    #[error("{op}: shape mismatch: {lhs} vs {rhs}{hint}")]
    ShapeMismatch {
        op: &'static str,
        lhs: Dims,
        rhs: Dims,
        hint: String,
    },

    #[error("{op}: cannot reshape an array of shape {from} ({from_numel} elements) into {to} ({to_numel} elements)")]
    ReshapeSize {
        op: &'static str,
        from: Dims,
        from_numel: usize,
        to: String,
        to_numel: String,
    },

    #[error("{op}: no view of shape {to} exists for the layout shape {from} strides {strides:?}; call reshape (which copies) or compact() first")]
    ReshapeNeedsCopy {
        op: &'static str,
        from: Dims,
        strides: Vec<isize>,
        to: Dims,
    },

    #[error("{op}: the number of elements of shape {shape} overflows usize")]
    Overflow { op: &'static str, shape: Dims },

    #[error("{op}: layout shape {shape} strides {strides:?} offset {offset} reaches offsets {reach}, outside the buffer of {len} elements")]
    OutOfBounds {
        op: &'static str,
        shape: Dims,
        strides: Vec<isize>,
        offset: usize,
        reach: String,
        len: usize,
    },

    #[error("{op}: cannot write into a view with shape {shape} strides {strides:?}: dim {dim} has stride 0 and size > 1 (a broadcast view is read-only); compact() it first")]
    ReadOnlyView {
        op: &'static str,
        shape: Dims,
        strides: Vec<isize>,
        dim: usize,
    },

    #[error("{op}: dtype mismatch: expected {expected}, got {got}")]
    DTypeMismatch {
        op: &'static str,
        expected: DType,
        got: DType,
    },

    #[error("{op}: {shape} has {numel} elements but the data has {len}")]
    DataLength {
        op: &'static str,
        shape: Dims,
        numel: usize,
        len: usize,
    },

    #[error("{op}: {msg}")]
    InvalidArgument { op: &'static str, msg: String },

    /// A device is missing or failed: no driver, no such GPU, a kernel that did not compile,
    /// out of memory.
    #[error("{op}: {device}: {msg}")]
    Device {
        op: &'static str,
        device: String,
        msg: String,
    },

    /// A backend has no kernel for this op (or for this dtype of it). The array layer turns it
    /// into the documented host fallback; a user sees it only where no fallback exists.
    #[error("{op}: not supported by the {backend} backend for {what}")]
    Unsupported {
        op: &'static str,
        backend: &'static str,
        what: String,
    },

    /// A number that the target dtype cannot hold (NumPy 2 refuses it rather than wrapping):
    /// writing `-1` into u8, `2**40` into i32, `inf` into an integer array. Python sees
    /// `OverflowError`, as from NumPy.
    #[error("{op}: {value} out of bounds for {dtype}{hint}")]
    ValueOutOfRange {
        op: &'static str,
        /// The value as the user wrote it (`"Python integer 300"`, `"float inf"`).
        value: String,
        dtype: DType,
        /// The valid range and, where it helps, the fix.
        hint: String,
    },

    /// A buffer larger than this machine can provide, or one the allocator refused. Rust aborts
    /// the process on a failed allocation, so every array buffer is checked before it is made
    /// (`quill_cpu::pool::take`); Python sees `MemoryError`.
    #[error("{op}: out of memory: {numel} elements of {dtype} need {bytes} bytes{why}")]
    OutOfMemory {
        op: &'static str,
        numel: usize,
        dtype: DType,
        /// The bytes asked for (saturated at `usize::MAX` when the product overflows).
        bytes: usize,
        /// Why it cannot be had: over the machine's memory and swap, or refused by the allocator.
        why: String,
    },

    #[error("{op}: operands on different devices: {lhs} and {rhs}; move one with to_device first")]
    DeviceMismatch {
        op: &'static str,
        lhs: String,
        rhs: String,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn device(op: &'static str, device: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::Device {
            op,
            device: device.into(),
            msg: msg.into(),
        }
    }

    pub fn unsupported(op: &'static str, backend: &'static str, what: impl Into<String>) -> Self {
        Error::Unsupported {
            op,
            backend,
            what: what.into(),
        }
    }

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
