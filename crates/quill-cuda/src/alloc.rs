//! The caching allocator, shaped like PyTorch's: requests are rounded up to a size class
//! (512 bytes below 1 MiB, 2 MiB above), freed blocks go back to a free list of their class
//! instead of to the driver, and a later request of the same class reuses one without a
//! `cuMemAlloc` (which synchronises and costs tens of microseconds). quill runs one stream per
//! device, so one set of free lists per device is one per stream. When the driver reports out
//! of memory the cache is emptied and the request tried once more; if that fails too the
//! error names the size asked for and what is held.

use cudarc::driver::{CudaSlice, CudaStream};
use quill_core::{Error, Result};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

const SMALL: usize = 1 << 20;
const SMALL_ROUND: usize = 512;
const LARGE_ROUND: usize = 2 << 20;

/// The size class a request of `bytes` is served from (at least one rounding unit, so that
/// empty arrays still get a valid pointer).
pub fn size_class(bytes: usize) -> usize {
    let round = if bytes <= SMALL {
        SMALL_ROUND
    } else {
        LARGE_ROUND
    };
    bytes.max(1).div_ceil(round).saturating_mul(round)
}

/// Allocation statistics, as `torch.cuda.memory_*`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes in blocks that arrays hold now (size-class rounded).
    pub allocated: usize,
    /// The most `allocated` has been since the last `reset_peak`.
    pub max_allocated: usize,
    /// Bytes obtained from the driver: held by arrays or cached in the free lists.
    pub reserved: usize,
    /// Requests served from a free list, without a call to the driver.
    pub cache_hits: u64,
    /// Requests that went to the driver (`cuMemAlloc`) because their size class had no free
    /// block; a count that keeps growing in a steady training loop means the cache is not
    /// reusing blocks.
    pub driver_allocs: u64,
}

#[derive(Default)]
struct State {
    free: BTreeMap<usize, Vec<CudaSlice<u8>>>,
    stats: MemoryStats,
}

/// One device's caching allocator: the free lists per size class and the statistics. Each
/// `CudaDevice` owns one, serving its single stream.
pub struct Allocator {
    stream: Arc<CudaStream>,
    device: String,
    state: Mutex<State>,
}

/// A block of device memory that returns to its allocator's free list when dropped.
pub struct Block {
    slice: Option<CudaSlice<u8>>,
    class: usize,
    owner: Arc<AllocatorRef>,
}

/// What a block needs to find its way home.
pub(crate) struct AllocatorRef(pub(crate) Arc<crate::device::CudaDevice>);

impl Block {
    pub(crate) fn slice(&self) -> &CudaSlice<u8> {
        self.slice.as_ref().expect("present until drop")
    }
    pub(crate) fn slice_mut(&mut self) -> &mut CudaSlice<u8> {
        self.slice.as_mut().expect("present until drop")
    }
    /// The block's size in bytes: its size class, which may exceed what was asked for.
    pub fn capacity(&self) -> usize {
        self.class
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        if let Some(s) = self.slice.take() {
            self.owner.0.alloc.release(s, self.class);
        }
    }
}

impl Allocator {
    pub(crate) fn new(stream: Arc<CudaStream>, device: String) -> Allocator {
        Allocator {
            stream,
            device,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A block of at least `bytes` bytes, uninitialised.
    pub(crate) fn take(&self, bytes: usize, owner: &Arc<AllocatorRef>) -> Result<Block> {
        let class = size_class(bytes);
        let reused = {
            let mut st = self.lock();
            let s = st.free.get_mut(&class).and_then(Vec::pop);
            if s.is_some() {
                st.stats.cache_hits += 1;
            }
            s
        };
        let slice = match reused {
            Some(s) => s,
            None => {
                // SAFETY: the block is uninitialised device memory; every user writes before
                // reading (constructors fill, kernels write their whole output).
                let s = match unsafe { self.stream.alloc::<u8>(class) } {
                    Ok(s) => s,
                    Err(_) => {
                        self.empty_cache();
                        // SAFETY: as above.
                        unsafe { self.stream.alloc::<u8>(class) }
                            .map_err(|e| self.out_of_memory(bytes, class, e))?
                    }
                };
                let mut st = self.lock();
                st.stats.driver_allocs += 1;
                st.stats.reserved += class;
                s
            }
        };
        let mut st = self.lock();
        st.stats.allocated += class;
        st.stats.max_allocated = st.stats.max_allocated.max(st.stats.allocated);
        Ok(Block {
            slice: Some(slice),
            class,
            owner: owner.clone(),
        })
    }

    fn out_of_memory(&self, bytes: usize, class: usize, e: impl std::fmt::Display) -> Error {
        let st = self.lock().stats;
        Error::device(
            "cuda alloc",
            self.device.clone(),
            format!(
                "out of memory: tried to allocate {} ({} rounded); quill holds {} in arrays and \
                 {} reserved in all ({e})",
                human(bytes),
                human(class),
                human(st.allocated),
                human(st.reserved)
            ),
        )
    }

    fn release(&self, s: CudaSlice<u8>, class: usize) {
        let mut st = self.lock();
        st.stats.allocated -= class;
        st.free.entry(class).or_default().push(s);
    }

    /// Returns every cached (unused) block to the driver.
    pub fn empty_cache(&self) {
        let freed: HashMap<usize, Vec<CudaSlice<u8>>> = {
            let mut st = self.lock();
            let free = std::mem::take(&mut st.free);
            let bytes: usize = free.iter().map(|(c, v)| c * v.len()).sum();
            st.stats.reserved -= bytes;
            free.into_iter().collect()
        };
        drop(freed); // CudaSlice's drop frees on the driver, outside the lock.
    }

    /// A snapshot of this device's allocation statistics.
    pub fn stats(&self) -> MemoryStats {
        self.lock().stats
    }

    /// Starts a new peak: `max_allocated` becomes what arrays hold now, so a later reading
    /// measures one phase (`torch.cuda.reset_peak_memory_stats`).
    pub fn reset_peak(&self) {
        let mut st = self.lock();
        st.stats.max_allocated = st.stats.allocated;
    }
}

/// `1.5 GiB`-style sizes for messages.
pub fn human(bytes: usize) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_round_like_pytorch() {
        assert_eq!(size_class(0), 512);
        assert_eq!(size_class(1), 512);
        assert_eq!(size_class(512), 512);
        assert_eq!(size_class(513), 1024);
        assert_eq!(size_class(SMALL), SMALL);
        assert_eq!(size_class(SMALL + 1), LARGE_ROUND);
        assert_eq!(size_class(LARGE_ROUND + 1), 2 * LARGE_ROUND);
        // Absurd requests saturate (the driver then refuses them) rather than overflow.
        assert_eq!(size_class(usize::MAX), usize::MAX);
        for b in [3usize, 700, 5000, 3 << 20, 1 << 33] {
            let c = size_class(b);
            assert!(c >= b && c.is_multiple_of(SMALL_ROUND), "{b} -> {c}");
        }
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(100), "100 bytes");
        assert_eq!(human(1536), "1.50 KiB");
        assert_eq!(human(3 << 30), "3.00 GiB");
    }
}
