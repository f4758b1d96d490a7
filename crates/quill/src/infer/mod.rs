//! A trained checkpoint put to use: the language model sampled ([`TextModel`]), the image
//! classifier asked about pictures and scored on a test split ([`ImageClassifier`]). Each is
//! rebuilt from the checkpoint alone: `quill train` records the model's kind, sizes,
//! vocabulary and input normalisation in the safetensors metadata. The CLI's `generate`,
//! `evaluate` and `predict` and Python's `quill.infer` are both thin faces on this module.

mod image;
mod text;

pub use image::{image_model, Evaluation, ImageClassifier, MNIST_MEAN, MNIST_STD};
pub use text::{seq_kind, Draw, Sampler, TextModel};

use crate::{Error, NDArray, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// The `model.`-prefixed tensors of a checkpoint, prefix removed: the model's state dict.
fn model_state(tensors: &[(String, NDArray)]) -> Vec<(String, NDArray)> {
    tensors
        .iter()
        .filter_map(|(n, a)| n.strip_prefix("model.").map(|s| (s.to_string(), a.clone())))
        .collect()
}

/// An error of `op` about the checkpoint at `path`.
fn at(op: &'static str, path: &Path, msg: impl std::fmt::Display) -> Error {
    Error::invalid(op, format!("{}: {msg}", path.display()))
}

/// The metadata value `key`, or an error saying which job writes checkpoints with it.
fn meta<'a>(
    op: &'static str,
    path: &Path,
    metadata: &'a BTreeMap<String, String>,
    key: &str,
    job: &str,
) -> Result<&'a String> {
    metadata.get(key).ok_or_else(|| {
        at(
            op,
            path,
            format!(
                "no '{key}' in its metadata: it is not a checkpoint of {job} from this quill \
                 version"
            ),
        )
    })
}
