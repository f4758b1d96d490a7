//! quill: a strided N-dimensional array with zero-copy views on the CPU and CUDA GPUs, and the
//! deep-learning stack built on it (autograd, nn, optim, data, io). This crate is what users
//! import; it re-exports the array layer (`quill-array`) and the pieces of `quill-core` they
//! need. It reaches arrays only through `NDArray`'s public API.
//!
//! ```
//! use quill::{s, DType, NDArray};
//! let a = NDArray::arange(0.0, 24.0, 1.0, DType::F32)?.reshape(&[2, 3, 4])?;
//! let v = a.slice(&s![.., ..;-1, 1..;2])?;          // a view: no data moves
//! assert_eq!(v.shape(), &[2, 3, 2]);
//! assert_eq!(v.strides(), &[12, -4, 2]);
//! v.assign_scalar(0.0)?;                             // writes through to `a`
//! assert_eq!(a.to_vec::<f32>()?[1], 0.0);
//! # Ok::<(), quill::Error>(())
//! ```

#![warn(missing_docs)]

pub mod check;
pub mod data;
pub mod infer;
pub mod io;
pub mod nn;
pub mod optim;
pub mod tensor;

#[cfg(feature = "cuda")]
pub use quill_array::cuda;
pub use quill_array::fused;
pub use quill_array::pool::{
    empty_cache, set_enabled as set_buffer_pool, stats as buffer_pool_stats, PoolStats,
};
pub use quill_array::{
    device, fft, fused_kernel, fused_ops, host_round_trips, linalg, ndarray,
    reset_host_round_trips, supported_ops, supports, Device, IndexArg, NDArray, Pinned,
};
pub use quill_core::{
    bf16, f16, promote_types, s, BinaryOp, Conv2dSpec, DType, Element, Ellipsis, Error, Layout,
    NewAxis, ReduceOp, Result, Scalar, SliceArg, UnaryOp, C128, C64,
};
pub use tensor::{autocast, autocast_dtype, is_autocast_enabled, AutocastGuard, Tensor};

/// Runs `f` on a thread of quill's thread pool (rayon's global pool) and returns its result.
/// Ops called from a pool thread share their work with the other pool threads directly;
/// called from any other thread (`main`, say), every parallel op hands its work to the pool
/// and sleeps until it is done: a wake-up per op, which cost 10 % of an MNIST training step
/// (10.5 -> 9.3 ms). Wrap a training loop in it.
pub fn in_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    // `scope` runs its body on a pool thread (injecting it when called from outside).
    rayon::scope(|_| f())
}

/// The README's Rust example runs as a doctest, so the README cannot drift from the API.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
