//! Checkpoints with checksums: safetensors files whose metadata carries a SHA-256 digest per
//! tensor, so that flipped bits, a relabelled dtype or a changed shape are caught on load and
//! reported by tensor name.
//!
//! The digest of a tensor covers its safetensors dtype name, its shape and its little-endian
//! data bytes (`digest`), and is stored under the metadata key `sha256.NAME`. The files stay
//! plain safetensors, readable by any reader; only `load_checkpoint` checks the digests.
//! Files without any digest (written by `save_safetensors`, by other tools, or by quill before
//! checksums existed) still load, with `Checkpoint::verified` false.

use super::atomic::io_error;
use super::safetensors::{load_with, save_safetensors, st_name, write_tensor, RawTensor};
use crate::NDArray;
use quill_core::{DType, Error, Result};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

const SAVE: &str = "save_checkpoint";
const LOAD: &str = "load_checkpoint";

/// The prefix of the metadata keys that hold the tensors' digests (`sha256.NAME`).
pub const CHECKSUM_PREFIX: &str = "sha256.";

/// What `load_checkpoint` returns.
#[derive(Debug)]
pub struct Checkpoint {
    /// The tensors, in the file's order.
    pub tensors: Vec<(String, NDArray)>,
    /// The metadata, without the digest entries.
    pub metadata: BTreeMap<String, String>,
    /// True when the file carried digests (all of them matched, or loading would have failed);
    /// false for a file written without them.
    pub verified: bool,
}

/// The start of every digest: dtype and shape, so a relabelled or reshaped tensor whose bytes
/// are intact still fails its check.
fn start(dtype: DType, shape: &[usize]) -> Sha256 {
    let mut h = Sha256::new();
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    h.update(format!("{}[{}]", st_name(dtype), dims.join(",")).as_bytes());
    h
}

fn hex(h: Sha256) -> String {
    let mut s = String::with_capacity(64);
    for b in h.finalize() {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Writes `tensors` and `metadata` as `save_safetensors` does (atomically), with a digest of
/// every tensor added to the metadata. Metadata keys starting with [`CHECKSUM_PREFIX`] are
/// reserved for the digests and refused.
pub fn save_checkpoint(
    path: &Path,
    tensors: &[(String, NDArray)],
    metadata: &BTreeMap<String, String>,
) -> Result<()> {
    if let Some(k) = metadata.keys().find(|k| k.starts_with(CHECKSUM_PREFIX)) {
        return Err(Error::invalid(
            SAVE,
            format!("the metadata key {k:?} starts with {CHECKSUM_PREFIX:?}, which is reserved for the tensors' checksums"),
        ));
    }
    let mut meta = metadata.clone();
    for (name, a) in tensors {
        let mut h = start(a.dtype(), a.shape());
        write_tensor(&mut h, a)
            .map_err(|e| io_error(SAVE, "cannot checksum tensor in", path, e))?;
        meta.insert(format!("{CHECKSUM_PREFIX}{name}"), hex(h));
    }
    save_safetensors(path, tensors, &meta)
}

/// Reads a file written by [`save_checkpoint`] and checks every tensor's digest; a mismatch is
/// an error naming the tensor (and the file). A file with no digests at all loads unchecked
/// (`verified` false), so checkpoints written before checksums existed keep working; a file
/// where some tensors have digests and others do not, or a digest names no tensor, is an error.
/// Every error `load_safetensors` gives for a malformed file is given here too.
pub fn load_checkpoint(path: &Path) -> Result<Checkpoint> {
    let bad = |msg: String| Error::invalid(LOAD, format!("{}: {msg}", path.display()));
    let mut checked = 0usize;
    let (tensors, mut metadata) = load_with(path, &mut |meta, t: &RawTensor<'_>| {
        let Some(want) = meta.get(&format!("{CHECKSUM_PREFIX}{}", t.name)) else {
            if meta.keys().any(|k| k.starts_with(CHECKSUM_PREFIX)) {
                return Err(bad(format!(
                    "tensor {:?} has no checksum while the file's other tensors have one (an edited or spliced file)",
                    t.name
                )));
            }
            return Ok(());
        };
        let mut h = start(t.dtype, t.shape);
        h.update(t.bytes);
        let got = hex(h);
        if got != *want {
            return Err(bad(format!(
                "tensor {:?} ({} {:?}) fails its checksum: the file records sha256 {want}, its dtype, shape and data hash to {got} (the file is corrupted or was edited)",
                t.name,
                st_name(t.dtype),
                t.shape
            )));
        }
        checked += 1;
        Ok(())
    })?;
    let sums: Vec<String> = metadata
        .keys()
        .filter(|k| k.starts_with(CHECKSUM_PREFIX))
        .cloned()
        .collect();
    if sums.len() != checked {
        let orphan = sums
            .iter()
            .find(|k| {
                !tensors
                    .iter()
                    .any(|(n, _)| **k == format!("{CHECKSUM_PREFIX}{n}"))
            })
            .map_or("?", |k| k.as_str());
        return Err(bad(format!(
            "the metadata has the checksum {orphan:?} for a tensor the file does not hold (a tensor was removed)"
        )));
    }
    for k in &sums {
        metadata.remove(k);
    }
    Ok(Checkpoint {
        tensors,
        metadata,
        verified: !sums.is_empty(),
    })
}
