//! quill-test-support: what quill's test suites share, in one place (dev-only, never published).
//!
//! - [`prng`]: the one deterministic generator (SplitMix64) every test draws from.
//! - [`index`]: index arithmetic and naive strided offsets (an odometer, independent of quill).
//! - [`slicing`]: Python's slice rule, written as a filter over candidate positions.
//! - [`table`]: the oracle, an array as the explicit C-order table of its flat offsets (or ids)
//!   with every view op done naively on the table.
//! - [`layout_ops`]: view ops applied to a `Layout` and to its table side by side, and the
//!   invariants every layout must satisfy (quill-core's tests).
//! - [`shapes`]: random shapes and random non-overlapping strided layouts.
//! - [`arrays`]: `NDArray` builders over those layouts and random element values.
//! - [`chain`]: random chains of view ops applied to an `NDArray` and to its table.
//! - [`compare`]: exact (NaN-aware, sign-of-zero-aware) and tolerance comparisons.
//! - [`dtypes`]: `with_dtype!` and the list of every dtype.
//! - [`device`]: `device_test!`, one test body run on the CPU and (feature `cuda`) on GPU 0.
//! - [`grads`]: gradient checks of the first and second order.
//! - [`kernels`]: the CPU matmul kernels a test can run here (`REQUIRE_KERNELS` forbids skips).
//!
//! Nothing here calls the code under test to compute an expected value: inputs are built with
//! `from_vec` / `as_strided` / `Layout::contiguous`, and every result layout is recomputed from
//! its raw parts by the oracle.

#![warn(missing_docs)]

pub mod arrays;
pub mod chain;
pub mod compare;
pub mod device;
pub mod dtypes;
pub mod grads;
pub mod index;
pub mod kernels;
pub mod layout_ops;
pub mod prng;
pub mod shapes;
pub mod slicing;
pub mod table;

pub use arrays::*;
pub use chain::*;
pub use compare::*;
pub use device::*;
pub use dtypes::*;
pub use index::*;
pub use layout_ops::*;
pub use prng::*;
pub use shapes::*;
pub use slicing::*;
pub use table::*;

/// The crates the exported macros name, so that a caller needs neither as a direct dependency.
#[doc(hidden)]
pub mod __reexport {
    pub use quill;
    pub use quill_core;
}
