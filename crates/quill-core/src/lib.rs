//! quill-core: the pure layer of quill. Shapes, layouts and every zero-copy view transform,
//! NumPy slicing, the loop plan that kernels run, dtypes with their cast rules, and the one
//! `Error` type. No unsafe code, no devices, no data.
//!
//! Walking a strided loop has exactly one implementation, [`Runs`] (module [`runs`]): the inner
//! runs of a [`LoopPlan`] (or of raw shape / strides / offsets) over any element range, with
//! offsets updated incrementally; [`Offsets`] is its per-element form, and `Layout::offsets`
//! is built on it. Kernels and helpers must use it rather than write their own index counter.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod backend;
pub mod conv;
pub mod dtype;
pub mod error;
pub mod layout;
pub mod ops;
pub mod plan;
pub mod promote;
pub mod runs;
pub mod shape;
pub mod slice;

pub use backend::{Along, AttnDims, Backend, NormDims, Stat, Update};
pub use conv::{Conv2dSpec, ConvDims, PoolDims};
pub use dtype::{DType, Element, Scalar, C128, C64};
pub use error::{Dims, Error, Result};
pub use half::{bf16, f16};
pub use layout::{Layout, OffsetIter};
pub use ops::{BinaryOp, ReduceOp, UnaryOp};
pub use plan::LoopPlan;
pub use promote::{promote_types, promote_with_scalar};
pub use runs::{Offsets, Run, Runs};
pub use slice::{Ellipsis, NewAxis, SliceArg};
