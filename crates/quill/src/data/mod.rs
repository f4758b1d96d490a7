//! Datasets, data loading and transforms: reading IDX files (raw or gzip) with optional SHA-256
//! verification (`idx`), MNIST-format datasets (`mnist`), the `Dataset` trait with an in-memory
//! implementation whose batches are contiguous gathers (`dataset`), a `DataLoader` that prepares
//! batches on a background thread with a seeded shuffle (`loader`), and seeded per-batch image
//! augmentations (`transforms`), CIFAR-10's pickled batches (`cifar`, read by the data-only
//! unpickler in `pickle`, which runs no code and refuses hostile nesting), and text corpora for
//! language models (`text`, streamed a line at a time).
//!
//! ```no_run
//! use quill::data::{DataLoader, Mnist, Normalize};
//! let train = Mnist::load("data/mnist", true)?;
//! let loader = DataLoader::new(train.into_dataset()?, 128)?
//!     .shuffle(true)
//!     .seed(0)
//!     .transform(Normalize::new(&[0.1307], &[0.3081])?);
//! for epoch in 0..2 {
//!     for batch in loader.epoch(epoch) {
//!         let (x, y) = batch?; // x: f32 (128, 1, 28, 28), y: i64 (128)
//!         # let _ = (x, y);
//!     }
//! }
//! # Ok::<(), quill::Error>(())
//! ```

pub mod cifar;
pub mod dataset;
pub mod idx;
pub mod loader;
pub mod mnist;
pub mod pickle;
pub mod text;
pub mod transforms;

pub use cifar::Cifar10;
pub use dataset::{Dataset, TensorDataset};
pub use idx::{read_idx, read_idx_with_checksum, sha256_hex, Checksum};
pub use loader::{DataLoader, Epoch};
pub use mnist::{Mnist, MnistRaw};
pub use text::{
    batchify, get_batch, tokenize_file, unigram_perplexity, Corpus, Dictionary, Tokenizer,
};
pub use transforms::{Compose, Normalize, RandomCrop, RandomHorizontalFlip, Transform};

use quill_core::Error;
use std::path::{Path, PathBuf};

/// An error about a file: the message starts with the path, so it says which file is at fault.
pub(crate) fn file_error(op: &'static str, path: &Path, what: impl std::fmt::Display) -> Error {
    Error::invalid(op, format!("{}: {what}", path.display()))
}

/// `dir/name.gz` when it exists, else `dir/name` when that does: every loader accepts a file
/// gzipped or not, the `.gz` name first.
pub(crate) fn find_maybe_gz(dir: &Path, name: &str) -> Option<PathBuf> {
    [dir.join(format!("{name}.gz")), dir.join(name)]
        .into_iter()
        .find(|p| p.is_file())
}
