//! Reading and writing arrays: safetensors files and checksummed checkpoints, written
//! atomically.
//!
//! [`save_safetensors`] and [`load_safetensors`] speak the safetensors format (an 8-byte
//! little-endian header length, a JSON header, then the raw little-endian tensor bytes), the
//! format PyTorch, candle and the Hugging Face hub read and write, so a quill checkpoint can be
//! opened by any of them and theirs by quill. [`save_checkpoint`] and [`load_checkpoint`] add a
//! SHA-256 digest per tensor to the metadata and check it on load. [`write_atomic`] is the
//! crash-safe file replacement all of them use, for other outputs too.

mod atomic;
mod checkpoint;
mod safetensors;

pub use atomic::write_atomic;
pub use checkpoint::{load_checkpoint, save_checkpoint, Checkpoint, CHECKSUM_PREFIX};
pub use safetensors::{load_safetensors, save_safetensors};
