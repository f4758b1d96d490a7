//! Moving arrays between devices: `to_device` (a copy of the elements) and `relocate` (the
//! whole buffer, in place, for every array sharing it). The copies themselves are the
//! dispatch's (`backend.rs`).

use super::NDArray;
use crate::backend::Storage;
use crate::device::Device;
use quill_core::{Layout, Result};

impl NDArray {
    /// True when the buffer is in GPU memory.
    pub fn is_cuda(&self) -> bool {
        matches!(self.device(), Device::Cuda(_))
    }

    /// This array on `device`: itself when it is there already, else a contiguous copy there
    /// (a view is compacted on its own device first, so only its elements move).
    pub fn to_device(&self, device: Device) -> Result<NDArray> {
        if self.device() == device {
            return Ok(self.clone());
        }
        // Only the view's elements move: a view is compacted on its own device first.
        let whole = self.is_contiguous() && self.offset() == 0 && self.numel() == self.buffer_len();
        let c = if whole {
            self.clone()
        } else {
            self.deep_copy()?
        };
        let moved = c.read().moved_to(device)?;
        Ok(NDArray::from_storage(
            moved,
            Layout::contiguous(self.shape())?,
        ))
    }
}

impl NDArray {
    /// Moves this array's whole buffer to `device` in place, so that every array sharing it
    /// (views, the clones a model and its optimizer hold) now lives there. The array must be
    /// the whole buffer, contiguous (a parameter, say); a view is an error.
    pub fn relocate(&self, device: Device) -> Result<()> {
        const OP: &str = "relocate";
        if self.device() == device {
            return Ok(());
        }
        if !self.is_contiguous() || self.offset() != 0 || self.numel() != self.buffer_len() {
            return Err(quill_core::Error::invalid(
                OP,
                format!(
                    "only an array that is its whole buffer can move in place; this one is a \
                     view (shape {:?}, strides {:?}, offset {}) of {} elements; use to_device",
                    self.shape(),
                    self.strides(),
                    self.offset(),
                    self.buffer_len()
                ),
            ));
        }
        self.refuse_if_pinned(OP)?;
        let moved: Storage = self.read().moved_to(device)?;
        *self.write() = moved;
        Ok(())
    }
}
