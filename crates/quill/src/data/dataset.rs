//! The `Dataset` trait (indexed samples, fetched a batch at a time) and `TensorDataset`, an
//! in-memory dataset over an inputs array and a targets array whose batches are one contiguous
//! gather of rows into a fresh buffer, never one small array per sample.

use crate::NDArray;
use quill_core::{Error, Result};

/// Indexed (input, target) samples. Batched access is the primitive so that an implementation can
/// gather a whole batch at once; `Send + Sync` so a `DataLoader` can read it from its worker.
pub trait Dataset: Send + Sync {
    /// Number of samples.
    fn len(&self) -> usize;

    /// Whether the dataset has no samples; a loader over it yields no batches.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The samples at `indices`, stacked along a new leading axis of size `indices.len()`.
    /// An index `>= len()` is an error.
    fn get_batch(&self, indices: &[usize]) -> Result<(NDArray, NDArray)>;

    /// Sample `i` on its own (the batch of one, without the leading axis).
    fn get(&self, i: usize) -> Result<(NDArray, NDArray)> {
        let (x, y) = self.get_batch(&[i])?;
        Ok((x.squeeze(&[0])?, y.squeeze(&[0])?))
    }
}

/// Samples are the rows (first-axis slices) of `inputs` and `targets`, which share the first axis.
#[derive(Clone, Debug)]
pub struct TensorDataset {
    inputs: NDArray,
    targets: NDArray,
}

impl TensorDataset {
    /// A dataset over the rows of `inputs` and `targets` (any dtypes, rank >= 1, equal first
    /// dimension). Non-contiguous arrays are copied once here so every batch is a plain gather.
    pub fn new(inputs: NDArray, targets: NDArray) -> Result<TensorDataset> {
        const OP: &str = "TensorDataset::new";
        if inputs.ndim() == 0 || targets.ndim() == 0 {
            return Err(Error::invalid(
                OP,
                format!(
                    "inputs and targets need a sample axis; got shapes {:?} and {:?}",
                    inputs.shape(),
                    targets.shape()
                ),
            ));
        }
        if inputs.shape()[0] != targets.shape()[0] {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: inputs.shape().into(),
                rhs: targets.shape().into(),
                hint: " (inputs and targets must have the same first dimension)".into(),
            });
        }
        Ok(TensorDataset {
            inputs: inputs.compact()?,
            targets: targets.compact()?,
        })
    }

    /// All inputs, sample axis first, as stored (made contiguous by [`TensorDataset::new`]).
    pub fn inputs(&self) -> &NDArray {
        &self.inputs
    }

    /// All targets, sample axis first, row `i` paired with row `i` of [`TensorDataset::inputs`].
    pub fn targets(&self) -> &NDArray {
        &self.targets
    }
}

impl Dataset for TensorDataset {
    fn len(&self) -> usize {
        self.inputs.shape()[0]
    }

    fn get_batch(&self, indices: &[usize]) -> Result<(NDArray, NDArray)> {
        let n = self.len();
        if let Some(&bad) = indices.iter().find(|&&i| i >= n) {
            return Err(Error::IndexOutOfRange {
                op: "TensorDataset::get_batch",
                index: bad as isize,
                axis: 0,
                size: n,
            });
        }
        Ok((
            self.inputs.select_rows(indices)?,
            self.targets.select_rows(indices)?,
        ))
    }
}
