//! quill-gemm: quill's CPU matrix product, usable without the rest of quill. A BLIS-style GEMM
//! (`gemm.rs`, its loop nest in `gemm/nest.rs`: cache blocking, packing from any signed strides
//! in `pack.rs` with SIMD transposes in `transpose_pack.rs`, SIMD micro-kernels chosen at run
//! time in `kernels.rs`, block sizes from the caches in `cache.rs`), bf16 on AMX tiles
//! (`amx.rs`) or AVX512_BF16 pairs (`bf16.rs`), integers and bool as a plain loop (`int.rs`),
//! and the batched strided product over them with its threading (`batch.rs`). Which kernel
//! runs is `kernel.rs` (the family) and `select.rs` (the GEMM for a type); the measured numbers
//! behind block sizes and path choices are data in `tuning.rs`. Threads meet through
//! quill-par's fork-join.
//!
//! Two ways in:
//! - [`matmul`]: `(batch.., m, k) @ (batch.., k, n)` over [`Operand`]s (a slice, a shape and
//!   signed strides) into a contiguous output, for f32, f64, f16, bf16, the integers and bool.
//! - [`matmul_complex`]: the same for complex f32 / f64 held as `[re, im]` pairs, on the real
//!   GEMM (`complex.rs`: one real product of the expanded pairs, or the 3M method's three).
//! - [`select`]: the [`Gemm`] for f32 or f64, to run single products over strided [`Mat`]s
//!   ([`Gemm::run`], [`Gemm::run_into`] to accumulate, [`Gemm::run_direct_a`]) from a caller's
//!   own threads or with its own scratch ([`with_scratch`]).
//!
//! `QUILL_MATMUL_KERNEL` (amx, avx512, avx2, generic) picks the kernel family, [`with_kernel`]
//! per thread; `REQUIRE_KERNELS` makes tests that would skip a family fail instead.

#![warn(missing_docs)]

mod amx;
mod batch;
mod bf16;
mod cache;
mod complex;
mod gemm;
mod int;
mod kernel;
mod kernels;
mod pack;
mod select;
mod transpose_pack;
pub mod tuning;
mod types;

pub use batch::{matmul, row_major, Element, Error, Operand};
pub use cache::CacheSizes;
pub use complex::{matmul_complex, matmul_complex_with, Method};
pub use gemm::{with_scratch, Gemm};
pub use kernel::{active_kernel, with_kernel, Kernel, Unavailable};
pub use select::select;
pub use types::{Cvt, Mat, Pack, Real};
