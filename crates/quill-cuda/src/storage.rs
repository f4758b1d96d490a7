//! `CudaStorage`: a flat buffer of `len` elements of one dtype in a caching-allocator block on
//! one device. Views (layouts) live in quill's NDArray, as for the CPU storage; the kernels
//! take the block's device pointer plus a layout.

use crate::alloc::{AllocatorRef, Block, MemoryStats};
use crate::device::{device, CudaDevice};
use cudarc::driver::{DevicePtr, DevicePtrMut};
use quill_core::{DType, Error, Result};
use std::sync::Arc;

/// A flat buffer of `len` elements of one dtype on one GPU, in a block of the device's caching
/// allocator (the block goes back to the cache on drop).
pub struct CudaStorage {
    block: Block,
    len: usize,
    dtype: DType,
    dev: Arc<CudaDevice>,
}

impl std::fmt::Debug for CudaStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaStorage({:?}, {} x {})",
            self.dev, self.len, self.dtype
        )
    }
}

fn bytes_of(op: &'static str, len: usize, dtype: DType) -> Result<usize> {
    len.checked_mul(dtype.size_in_bytes())
        .ok_or_else(|| Error::invalid(op, format!("{len} elements of {dtype} overflow usize")))
}

impl CudaStorage {
    /// `len` uninitialised elements on device `ordinal` (callers write every element).
    pub(crate) fn uninit(dev: &Arc<CudaDevice>, len: usize, dtype: DType) -> Result<CudaStorage> {
        let bytes = bytes_of("cuda alloc", len, dtype)?;
        let owner = Arc::new(AllocatorRef(dev.clone()));
        let block = dev.alloc.take(bytes, &owner)?;
        Ok(CudaStorage {
            block,
            len,
            dtype,
            dev: dev.clone(),
        })
    }

    /// `len` elements on GPU `ordinal` whose every element the caller overwrites (a join's
    /// output, say): memory from the caching allocator, not cleared.
    pub fn for_overwrite(ordinal: usize, len: usize, dtype: DType) -> Result<CudaStorage> {
        CudaStorage::uninit(&device(ordinal)?, len, dtype)
    }

    /// A copy of `bytes` (the little-endian elements of a host buffer) on GPU `ordinal`.
    pub fn from_host_bytes(ordinal: usize, bytes: &[u8], dtype: DType) -> Result<CudaStorage> {
        let size = dtype.size_in_bytes();
        if !bytes.len().is_multiple_of(size) {
            return Err(Error::invalid(
                "to_device",
                format!(
                    "{} bytes is not a whole number of {dtype} elements",
                    bytes.len()
                ),
            ));
        }
        let dev = device(ordinal)?;
        let mut s = CudaStorage::uninit(&dev, bytes.len() / size, dtype)?;
        if !bytes.is_empty() {
            let stream = dev.stream.clone();
            let mut dst = s.block.slice_mut().slice_mut(..bytes.len());
            stream
                .memcpy_htod(bytes, &mut dst)
                .map_err(|e| dev.err("to_device", e))?;
        }
        Ok(s)
    }

    /// The elements as little-endian bytes on the host (waits for queued work).
    pub fn to_host_bytes(&self) -> Result<Vec<u8>> {
        let n = self.len * self.dtype.size_in_bytes();
        let mut out = vec![0u8; n];
        if n > 0 {
            let src = self.block.slice().slice(..n);
            self.dev
                .stream
                .memcpy_dtoh(&src, &mut out)
                .map_err(|e| self.dev.err("to_host", e))?;
            self.dev.synchronize()?;
        }
        Ok(out)
    }

    /// The number of elements (not bytes; the block may be larger, rounded to its size class).
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for a buffer of no elements (which still holds a minimal block).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The element type; the first `len * dtype.size_in_bytes()` bytes of the block are in use.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// The GPU the buffer lives on (the `N` of `cuda:N`).
    pub fn ordinal(&self) -> usize {
        self.dev.ordinal()
    }
    /// The shared device context whose stream and kernels operate on this buffer.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }

    /// The device address of element 0, for kernel arguments.
    pub(crate) fn ptr(&self) -> u64 {
        let (p, _sync) = self.block.slice().device_ptr(&self.dev.stream);
        p
    }
    /// The device address of element 0, for a kernel that writes.
    pub(crate) fn ptr_mut(&mut self) -> u64 {
        let stream = self.dev.stream.clone();
        let (p, _sync) = self.block.slice_mut().device_ptr_mut(&stream);
        p
    }
    /// The device address of element 0 for a foreign holder (DLPack): waits for the work
    /// queued on quill's stream first, so the holder's own stream sees finished values.
    pub fn export_address(&mut self) -> Result<u64> {
        let p = self.ptr_mut();
        self.dev.synchronize()?;
        Ok(p)
    }
}

/// Allocation statistics of GPU `ordinal`.
pub fn memory_stats(ordinal: usize) -> Result<MemoryStats> {
    Ok(device(ordinal)?.alloc.stats())
}
/// Bytes held by arrays on GPU `ordinal` (`torch.cuda.memory_allocated`).
pub fn memory_allocated(ordinal: usize) -> Result<usize> {
    Ok(memory_stats(ordinal)?.allocated)
}
/// The peak of `memory_allocated` (`torch.cuda.max_memory_allocated`).
pub fn max_memory_allocated(ordinal: usize) -> Result<usize> {
    Ok(memory_stats(ordinal)?.max_allocated)
}
/// Returns cached, unused blocks of GPU `ordinal` to the driver (`torch.cuda.empty_cache`).
pub fn empty_cache(ordinal: usize) -> Result<()> {
    device(ordinal)?.alloc.empty_cache();
    Ok(())
}
