//! quill's CUDA backend. Kernels are CUDA C sources kept in `kernels/`, compiled by NVRTC for
//! the device's architecture on first use and cached per device; GEMM goes through cuBLAS; a
//! caching allocator serves device memory. Nothing here needs CUDA at build time: the driver,
//! NVRTC and cuBLAS are opened at run time, and every entry point returns an error (never
//! panics) when they are missing.

#![warn(missing_docs)]

pub mod alloc;
mod backend;
pub mod blas;
pub mod device;
pub mod kernels;
pub mod klayout;
pub mod ops;
pub mod storage;

pub use alloc::MemoryStats;
pub use device::{device, device_count, driver_present, is_available, CudaDevice};
pub use storage::{empty_cache, max_memory_allocated, memory_allocated, memory_stats, CudaStorage};
