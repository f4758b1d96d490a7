//! CIFAR-10 in its "python version" layout (`data_batch_1` .. `data_batch_5`, `test_batch`:
//! pickled dicts whose `data` is a uint8 (n, 3072) array of 32x32 RGB planes and `labels` a list
//! of ints in 0..10), loaded as f32 images in [0, 1] of shape (n, 3, 32, 32) and i64 labels.

use super::pickle::{describe, unpickle, PickledArray, Value};
use super::{file_error, idx::read_checked, TensorDataset};
use crate::NDArray;
use quill_core::{DType, Result};
use std::path::{Path, PathBuf};

const OP: &str = "Cifar10::load";
const PIXELS: usize = 3 * 32 * 32;
const NUM_CLASSES: i64 = 10;

/// One split of CIFAR-10, held in memory.
#[derive(Clone, Debug)]
pub struct Cifar10 {
    /// f32, shape (n, 3, 32, 32), values `pixel / 255`.
    pub images: NDArray,
    /// i64, shape (n), values in 0..10.
    pub labels: NDArray,
}

impl Cifar10 {
    /// The training split (the five `data_batch_*` files, those present, in order; at least
    /// one) or the test split (`test_batch`) from `dir`. Files may be gzipped and are checked
    /// against `SHA256SUMS` when listed there.
    pub fn load(dir: impl AsRef<Path>, train: bool) -> Result<Cifar10> {
        let (pixels, labels) = Cifar10::load_raw(dir, train)?;
        let n = labels.len();
        let scaled: Vec<f32> = pixels.iter().map(|&p| f32::from(p) / 255.0).collect();
        Ok(Cifar10 {
            images: NDArray::from_vec(scaled, &[n, 3, 32, 32])?,
            labels: NDArray::from_vec(labels, &[n])?,
        })
    }

    /// As [`Cifar10::load`], the pixels as stored (u8, (n, 3072) in C order: n images of three
    /// 32x32 planes) and the labels (each in 0..10), for callers that scale the pixels
    /// themselves (the Python package).
    pub fn load_raw(dir: impl AsRef<Path>, train: bool) -> Result<(Vec<u8>, Vec<i64>)> {
        let dir = dir.as_ref();
        let paths: Vec<PathBuf> = if train {
            (1..=5)
                .filter_map(|i| super::find_maybe_gz(dir, &format!("data_batch_{i}")))
                .collect()
        } else {
            super::find_maybe_gz(dir, "test_batch")
                .into_iter()
                .collect()
        };
        if paths.is_empty() {
            let want = if train {
                "data_batch_1 .. data_batch_5"
            } else {
                "test_batch"
            };
            return Err(file_error(
                OP,
                dir,
                format!("no CIFAR-10 batch file ({want}) found"),
            ));
        }
        let (mut pixels, mut labels) = (Vec::new(), Vec::new());
        for p in &paths {
            read_batch(p, &mut pixels, &mut labels)?;
        }
        Ok((pixels, labels))
    }

    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.shape()[0]
    }

    /// True when the split holds no image.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An in-memory dataset of (image (3, 32, 32), label) pairs, for a `DataLoader`.
    pub fn into_dataset(self) -> Result<TensorDataset> {
        TensorDataset::new(self.images, self.labels)
    }
}

/// Appends one batch file's pixels and labels.
fn read_batch(path: &Path, pixels: &mut Vec<u8>, labels: &mut Vec<i64>) -> Result<()> {
    let (bytes, _) = read_checked(OP, path)?;
    let pickle = unpickle(&bytes).map_err(|e| file_error(OP, path, e))?;
    drop(bytes);
    let err = |what: String| file_error(OP, path, what);
    let root = pickle.root();
    let value = |key: &str| pickle.get(root, key).and_then(|r| pickle.value(r));
    let data = match value("data") {
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(err(format!(
                "'data' is a {}, not a NumPy array",
                describe(other)
            )))
        }
        None => {
            return Err(err(format!(
                "no 'data' entry in a {}: not a CIFAR-10 batch",
                pickle.describe(root)
            )))
        }
    };
    let PickledArray { dtype, shape, data } = data;
    if *dtype != DType::U8 || shape.len() != 2 || shape[1] != PIXELS {
        return Err(err(format!(
            "'data' must be uint8 (n, {PIXELS}), got {dtype} {shape:?}"
        )));
    }
    let found = match value("labels") {
        Some(Value::List(items)) => items
            .iter()
            .enumerate()
            .map(|(i, &r)| match pickle.value(r) {
                Some(Value::Int(l)) => Ok(*l),
                Some(other) => Err(err(format!(
                    "label at index {i} is a {}, not an int",
                    describe(other)
                ))),
                None => Err(err(format!("label at index {i} is missing"))),
            })
            .collect::<Result<Vec<i64>>>()?,
        Some(Value::Array(a)) if a.shape.len() == 1 => array_labels(a).map_err(err)?,
        Some(other) => {
            return Err(err(format!(
                "'labels' is a {}, not a list of ints",
                describe(other)
            )))
        }
        None => return Err(err("no 'labels' entry: not a CIFAR-10 batch".into())),
    };
    if found.len() != shape[0] {
        return Err(err(format!(
            "{} labels for {} images",
            found.len(),
            shape[0]
        )));
    }
    if let Some(i) = found.iter().position(|l| !(0..NUM_CLASSES).contains(l)) {
        return Err(err(format!(
            "label {} at index {i} is outside 0..{NUM_CLASSES}",
            found[i]
        )));
    }
    pixels.extend_from_slice(data);
    labels.extend(found);
    Ok(())
}

/// The labels of a 1-D integer array (any of NumPy's integer dtypes quill reads).
fn array_labels(a: &PickledArray) -> std::result::Result<Vec<i64>, String> {
    let le = |c: &[u8]| {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        b
    };
    match a.dtype {
        DType::U8 => Ok(a.data.iter().map(|&b| i64::from(b)).collect()),
        DType::I32 => Ok(a
            .data
            .chunks_exact(4)
            .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect()),
        DType::I64 => Ok(a
            .data
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(le(c)))
            .collect()),
        other => Err(format!("'labels' is a {other} array, not integers")),
    }
}
