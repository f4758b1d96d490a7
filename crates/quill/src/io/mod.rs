//! Reading and writing arrays: safetensors checkpoints, written atomically.
//!
//! [`save_safetensors`] and [`load_safetensors`] speak the safetensors format (an 8-byte
//! little-endian header length, a JSON header, then the raw little-endian tensor bytes), the
//! format PyTorch, candle and the Hugging Face hub read and write, so a quill checkpoint can be
//! opened by any of them and theirs by quill.

mod checkpoint;

pub use checkpoint::{load_safetensors, save_safetensors};
