//! quill-dist: data-parallel training for quill on an existing communication engine.
//!
//! - [`Communicator`] (rank, world size, `all_reduce` sum/mean, `broadcast`, `all_gather`,
//!   `barrier`, each failing with a typed [`DistError`] naming the op, the rank and the sizes,
//!   and never waiting past a timeout) with three implementations: [`Local`] (one rank, always
//!   built), [`ThreadGroup`] (N ranks as threads, for tests without MPI), `Mpi` (feature `mpi`:
//!   rsmpi over the system's MPI, e.g. Open MPI) and `Nccl` (feature `nccl`: NCCL through
//!   cudarc, one GPU per rank, bootstrapped over another communicator; host buffers copied to
//!   the GPU and back around each collective).
//! - [`DistributedDataParallel`]: parameters and buffers broadcast from rank 0, gradients
//!   averaged in buckets launched from a post-accumulate gradient hook while backward runs
//!   (`quill::Tensor::register_post_accumulate_grad_hook`), on a communication thread;
//!   [`DistributedDataParallel::no_sync`] accumulates gradients over several backward passes
//!   before one all-reduce (gradient accumulation, as PyTorch's `no_sync`).
//! - [`DistributedSampler`] and [`Shard`]: disjoint per-rank shards reshuffled each epoch from a
//!   shared seed, padded as PyTorch's sampler.
//!
//! Where it sits: `quill-dist` depends on `quill` (and `quill-core` for errors); `quill-cli`
//! depends on it for `quill train --distributed` and `quill bench allreduce`. Without features it
//! needs no MPI and no GPU.

#![warn(missing_docs)]

mod communicator;
mod ddp;
mod error;
mod local;
#[cfg(feature = "mpi")]
mod mpi;
#[cfg(feature = "nccl")]
mod nccl;
mod sampler;
mod threads;

pub use communicator::{default_timeout, Communicator, ReduceOp};
pub use ddp::{broadcast_tensors, DdpOptions, DistributedDataParallel, NoSync};
pub use error::{DistError, Result};
pub use local::Local;
#[cfg(feature = "mpi")]
pub use mpi::Mpi;
#[cfg(feature = "nccl")]
pub use nccl::Nccl;
pub use sampler::{DistributedSampler, Shard};
pub use threads::{ThreadComm, ThreadGroup};
