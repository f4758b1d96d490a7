//! quill-par: the fork-join every parallel CPU kernel of quill runs through (`fork.rs`: the
//! caller runs parts itself while rayon pool threads claim the rest), where a helper runs when
//! `QUILL_PIN_THREADS=1` asks for it (`placement.rs`, off by default), and run-time SIMD
//! selection for kernels written as plain loops (`simd.rs`). It knows nothing of arrays or
//! layouts: quill-gemm and quill-cpu both build on it.

#![warn(missing_docs)]

mod fork;
mod placement;
pub mod simd;

pub use fork::{for_each, for_each_chunk, for_each_item, map, threads};

/// Elements (or multiply-adds) below which a kernel stays on one thread: handing work to a
/// pool thread and meeting it again costs a few µs.
pub const GRAIN: usize = 1 << 16;
