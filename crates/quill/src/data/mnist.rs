//! MNIST-format datasets (MNIST, Fashion-MNIST, anything with the same four IDX files): loading
//! one split as f32 images in [0, 1] and i64 labels.

use super::idx::{read_idx_raw, Checksum};
use super::{file_error, TensorDataset};
use crate::NDArray;
use quill_core::Result;
use std::path::{Path, PathBuf};

const OP: &str = "Mnist::load";
/// Both MNIST and Fashion-MNIST have ten classes; a label outside 0..10 means a corrupt file.
const NUM_CLASSES: u8 = 10;

/// One split of an MNIST-format dataset, held in memory.
#[derive(Clone, Debug)]
pub struct Mnist {
    /// f32, shape (n, 1, rows, cols) (28 x 28 for MNIST), values `pixel / 255` in [0, 1].
    pub images: NDArray,
    /// i64, shape (n), values in 0..10.
    pub labels: NDArray,
    /// True when `SHA256SUMS` beside the files listed both and their digests matched.
    pub verified: bool,
}

impl Mnist {
    /// Loads the training split (`train-*`) or the test split (`t10k-*`) from `dir`, which holds
    /// `{train,t10k}-{images-idx3,labels-idx1}-ubyte`, each optionally with a `.gz` suffix (the
    /// `.gz` name is tried first). Works for `data/mnist` and for Fashion-MNIST directories such
    /// as Debian's `/usr/share/datasets/fashion-mnist`, which use the same names.
    pub fn load(dir: impl AsRef<Path>, train: bool) -> Result<Mnist> {
        let dir = dir.as_ref();
        let prefix = if train { "train" } else { "t10k" };
        let images_path = find(dir, &format!("{prefix}-images-idx3-ubyte"))?;
        let labels_path = find(dir, &format!("{prefix}-labels-idx1-ubyte"))?;

        Mnist::load_files(&images_path, &labels_path)
    }

    /// Loads one split from its images file and its labels file (raw or gzip, told apart by
    /// content), named directly.
    pub fn load_files(images: impl AsRef<Path>, labels: impl AsRef<Path>) -> Result<Mnist> {
        let raw = MnistRaw::read(images, labels)?;
        let [n, rows, cols] = raw.shape;
        let scaled: Vec<f32> = raw.pixels.iter().map(|&p| f32::from(p) / 255.0).collect();
        let labels: Vec<i64> = raw.labels.iter().map(|&l| i64::from(l)).collect();
        Ok(Mnist {
            images: NDArray::from_vec(scaled, &[n, 1, rows, cols])?,
            labels: NDArray::from_vec(labels, &[n])?,
            verified: raw.verified,
        })
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.labels.shape()[0]
    }

    /// True when the split holds no sample.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The images as (n, rows * cols): a view of the same buffer, for MLPs.
    pub fn flat_images(&self) -> Result<NDArray> {
        self.images.reshape(&[self.len() as isize, -1])
    }

    /// An in-memory dataset of (image (1, rows, cols), label) pairs, for a `DataLoader`.
    pub fn into_dataset(self) -> Result<TensorDataset> {
        TensorDataset::new(self.images, self.labels)
    }
}

/// `dir/name(.gz)`; an error naming both when neither exists.
fn find(dir: &Path, name: &str) -> Result<PathBuf> {
    super::find_maybe_gz(dir, name).ok_or_else(|| {
        let raw = dir.join(name);
        file_error(OP, &raw, format!("not found (nor {}.gz)", raw.display()))
    })
}

/// One split of an MNIST-format dataset as stored, checked (3-D images, 1-D labels of the same
/// count, every label in 0..10) but not converted: for callers that scale the pixels themselves.
#[derive(Clone, Debug)]
pub struct MnistRaw {
    /// (n, rows, cols).
    pub shape: [usize; 3],
    /// n * rows * cols bytes, C order.
    pub pixels: Vec<u8>,
    /// n labels, each in 0..10.
    pub labels: Vec<u8>,
    /// True when `SHA256SUMS` beside the files listed both and their digests matched.
    pub verified: bool,
}

impl MnistRaw {
    /// Reads and checks the images file and the labels file.
    pub fn read(images: impl AsRef<Path>, labels: impl AsRef<Path>) -> Result<MnistRaw> {
        let (images_path, labels_path) = (images.as_ref(), labels.as_ref());
        let (ishape, pixels, ichk) = read_idx_raw(images_path)?;
        let (lshape, raw_labels, lchk) = read_idx_raw(labels_path)?;
        let [n, rows, cols] = ishape[..] else {
            return Err(file_error(
                OP,
                images_path,
                format!("expected 3-D images (n, rows, cols), got dims {ishape:?}"),
            ));
        };
        if lshape.len() != 1 {
            return Err(file_error(
                OP,
                labels_path,
                format!("expected 1-D labels (n), got dims {lshape:?}"),
            ));
        }
        if n != lshape[0] {
            return Err(file_error(
                OP,
                labels_path,
                format!(
                    "{} labels but {} holds {n} images",
                    lshape[0],
                    images_path.display(),
                ),
            ));
        }
        if let Some(i) = raw_labels.iter().position(|&l| l >= NUM_CLASSES) {
            return Err(file_error(
                OP,
                labels_path,
                format!(
                    "label {} at index {i} is outside 0..{NUM_CLASSES}",
                    raw_labels[i]
                ),
            ));
        }
        Ok(MnistRaw {
            shape: [n, rows, cols],
            pixels,
            labels: raw_labels,
            verified: ichk == Checksum::Verified && lchk == Checksum::Verified,
        })
    }
}
