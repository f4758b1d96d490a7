//! Zero-copy exchange with foreign code (Python's buffer protocol, DLPack). Export: a `Pinned`
//! handle owns a view of the buffer, so the memory outlives the foreign view, and counts as a
//! pin, so nothing replaces the buffer (`relocate`) while foreign code holds its address.
//! Import: `from_foreign` views another library's memory in place (a foreign `Buf`).

use super::NDArray;
use crate::backend::Storage;
use crate::device::Device;
use quill_core::{DType, Error, Layout, Result};
use quill_cpu::{dispatch_dtype, Buf, CpuElement};
use std::sync::atomic::Ordering;

/// A view whose buffer stays where it is until this handle drops.
pub struct Pinned {
    array: NDArray,
    /// Address of the view's first element (its offset applied), in the device's address space.
    address: usize,
}

impl std::fmt::Debug for Pinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Pinned({:?} at {:#x})",
            self.array.layout(),
            self.address
        )
    }
}

impl NDArray {
    /// Pins this view's buffer for a foreign holder and returns the address of its first
    /// element. Whoever writes through the address shares the buffer with every view of it,
    /// exactly as two NumPy views of one array do.
    pub fn pin(&self) -> Result<Pinned> {
        let itemsize = self.dtype.size_in_bytes();
        let offset_bytes = self.offset() * itemsize;
        let base = self.write().export_address()?;
        self.storage.pins.fetch_add(1, Ordering::AcqRel);
        Ok(Pinned {
            array: self.clone(),
            // An empty view may sit one past the end of its buffer; the sum is only an
            // address handed to the holder, never read here.
            address: base.wrapping_add(offset_bytes),
        })
    }

    /// How many foreign holders have this buffer's address now.
    pub fn pin_count(&self) -> usize {
        self.storage.pins.load(Ordering::Acquire)
    }

    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn refuse_if_pinned(&self, op: &'static str) -> Result<()> {
        match self.pin_count() {
            0 => Ok(()),
            n => Err(Error::invalid(
                op,
                format!(
                    "the buffer cannot move: {n} exported view(s) (NumPy arrays, memoryviews or \
                     DLPack capsules) hold its address; delete them first, or use to_device for \
                     a copy"
                ),
            )),
        }
    }
}

impl NDArray {
    /// A CPU array over `len` elements of `dtype` at `ptr`, memory another library owns, seen
    /// through `shape` / `strides` / `offset` (checked against `len`). `owner` is dropped (and
    /// releases the memory) when the last view of the buffer goes. Misaligned memory and bool
    /// (whose bytes quill cannot trust to be 0 or 1) are errors: copy those instead.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` elements of `dtype` until `owner` is
    /// dropped, and no one else may write them except through memory shared on purpose (the
    /// producer's own views of the same array).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn from_foreign(
        ptr: *mut u8,
        len: usize,
        dtype: DType,
        shape: &[usize],
        strides: &[isize],
        offset: usize,
        owner: Box<dyn Send + Sync>,
    ) -> Result<NDArray> {
        const OP: &str = "from_foreign";
        if dtype == DType::Bool {
            return Err(Error::invalid(
                OP,
                "bool memory is copied, not shared: its bytes may be other than 0 and 1",
            ));
        }
        let layout = Layout::as_strided(shape, strides, offset, len)?;
        let storage = dispatch_dtype!(dtype, T => {
            if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
                return Err(Error::invalid(
                    OP,
                    format!("memory at {ptr:p} is not aligned for {dtype}; copy it instead"),
                ));
            }
            // SAFETY: aligned (checked), and valid for `len` elements while `owner` lives
            // (this function's contract); every bit pattern is a valid value of the non-bool
            // element types.
            T::wrap_buf(unsafe { Buf::foreign(ptr as *mut T, len, owner) })
        });
        Ok(NDArray::from_storage(Storage::Cpu(storage), layout))
    }

    /// True when this array's buffer is memory another library owns (`from_foreign`).
    pub fn is_foreign(&self) -> bool {
        self.read().is_foreign()
    }
}

impl Pinned {
    /// The pinned view.
    pub fn array(&self) -> &NDArray {
        &self.array
    }
    /// Address of the view's first element: a host address for CPU arrays, a device address
    /// for GPU ones.
    pub fn address(&self) -> usize {
        self.address
    }
    /// The device whose memory `address` points into.
    pub fn device(&self) -> Device {
        self.array.device()
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        self.array.storage.pins.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quill_core::SliceArg;

    #[test]
    fn pin_addresses_the_first_element_of_the_view_and_counts() {
        let a = NDArray::arange(0.0, 12.0, 1.0, quill_core::DType::F32)
            .unwrap()
            .reshape(&[3, 4])
            .unwrap();
        let whole = a.pin().unwrap();
        let v = a
            .slice(&[
                SliceArg::range(Some(1), Some(3), 1),
                SliceArg::range(Some(1), None, 1),
            ])
            .unwrap();
        let part = v.pin().unwrap();
        assert_eq!(a.pin_count(), 2);
        // Row 1, column 1 is element 5: 5 floats past the start.
        assert_eq!(part.address() - whole.address(), 5 * 4);
        // SAFETY: the address is the first element of `v` (element 5 of a live 12-float buffer
        // kept alive by `part`), read while nothing writes.
        let x = unsafe { *(part.address() as *const f32) };
        assert_eq!(x, 5.0);
        drop(whole);
        drop(part);
        assert_eq!(a.pin_count(), 0);
    }
}
