//! quill-array: the array layer. `NDArray` (a shared buffer on a device plus a `Layout` and a
//! dtype), its views, constructors and ops; `backend.rs`, the one dispatch from a primitive to
//! the backend that holds the buffer (and the one host fallback); `fused/`, the fused ops and
//! their device policy. The layers above (autograd, nn, optim, data, io in the `quill` crate)
//! see only `NDArray`'s public API: Cargo keeps them from touching buffers.

#![warn(missing_docs)]

mod backend;
pub mod device;
mod fallback;
pub mod fft;
pub mod fused;
pub mod linalg;
pub mod ndarray;

#[cfg(feature = "cuda")]
pub use backend::cuda;
pub use device::Device;
pub use fallback::{host_round_trips, reset_host_round_trips, supported_ops, supports};
pub use fused::{fused_kernel, fused_ops};
pub use ndarray::{IndexArg, NDArray, Pinned};

/// The host buffer pool (quill-cpu's size-class allocator, which every CPU array's buffer
/// comes from): its switch, statistics and release, for the layers above.
pub mod pool {
    pub use quill_cpu::pool::{empty_cache, set_enabled, stats, PoolStats};
}
