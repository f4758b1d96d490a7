//! The size-class buffer pool. Large buffers are costly to obtain fresh (every first touch of a
//! page faults: about 2 GB/s here against 16 GB/s for a buffer already mapped), so a dropped
//! buffer of 256 KiB or more is kept, keyed by element type and size class, and the next
//! allocation of that class takes it. Classes are 4 per power of two, so at most 25 % is wasted.
//! The pool holds at most `QUILL_POOL_MAX_BYTES` (default 1 GiB); `empty_cache` releases all.
//! Fresh large buffers are zero-mapped by the allocator and advised to use transparent huge pages.

use crate::storage::CpuElement;
use quill_core::{Error, Result};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

const MIN_POOLED_BYTES: usize = 256 << 10;
// A CNN step frees a dozen or more activation-sized buffers of one class at once (outputs and
// gradients of conv, BatchNorm, ReLU): at 8 per class the rest went back to the OS and the
// next step page-faulted them in again (a quarter of the step in `clear_page`). The byte cap
// still bounds the total.
const MAX_PER_CLASS: usize = 64;

type Key = (TypeId, usize);

struct Pool {
    free: Mutex<HashMap<Key, Vec<Box<dyn Any + Send>>>>,
    held_bytes: AtomicUsize,
    max_bytes: usize,
}

static ENABLED: AtomicBool = AtomicBool::new(true);
static HITS: AtomicU64 = AtomicU64::new(0);
static MISSES: AtomicU64 = AtomicU64::new(0);

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        free: Mutex::new(HashMap::new()),
        held_bytes: AtomicUsize::new(0),
        max_bytes: std::env::var("QUILL_POOL_MAX_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1 << 30),
    })
}

/// Pool statistics since start: buffers reused, buffers allocated fresh, bytes held now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Allocations of a poolable size (256 KiB or more) served by a pooled buffer.
    pub hits: u64,
    /// Allocations of a poolable size that found no pooled buffer and went to the allocator;
    /// smaller ones are counted in neither.
    pub misses: u64,
    /// Bytes held in the pool now, free for reuse (not the bytes of live arrays).
    pub held_bytes: usize,
}

/// The pool's counters now. Hits and misses only grow (`empty_cache` does not reset them):
/// the difference of two readings measures the work between them.
pub fn stats() -> PoolStats {
    PoolStats {
        hits: HITS.load(Ordering::Relaxed),
        misses: MISSES.load(Ordering::Relaxed),
        held_bytes: pool().held_bytes.load(Ordering::Relaxed),
    }
}

/// Turns reuse on or off (off: every allocation is fresh; used to measure first-touch cost).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
    if !on {
        empty_cache();
    }
}

/// Frees every pooled buffer.
pub fn empty_cache() {
    let drained: Vec<_> = pool()
        .free
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
        .collect();
    pool().held_bytes.store(0, Ordering::Relaxed);
    drop(drained);
}

/// The capacity (in elements) of the class that holds `n` elements of `size` bytes, or `None`
/// when such a buffer is too small to pool.
fn class_of(n: usize, size: usize) -> Option<usize> {
    let bytes = n.checked_mul(size)?;
    if bytes < MIN_POOLED_BYTES {
        return None;
    }
    let quarter = 1usize << (usize::BITS - 1 - n.leading_zeros()).saturating_sub(2);
    n.checked_next_multiple_of(quarter)
}

fn lock() -> std::sync::MutexGuard<'static, HashMap<Key, Vec<Box<dyn Any + Send>>>> {
    pool().free.lock().unwrap_or_else(|e| e.into_inner())
}

fn take_pooled<T: CpuElement>(cap: usize) -> Option<Vec<T>> {
    if !ENABLED.load(Ordering::Relaxed) {
        return None;
    }
    let boxed = lock().get_mut(&(TypeId::of::<T>(), cap))?.pop()?;
    let v = *boxed.downcast::<Vec<T>>().ok()?;
    pool()
        .held_bytes
        .fetch_sub(cap * std::mem::size_of::<T>(), Ordering::Relaxed);
    Some(v)
}

/// Checks that a buffer of `n` elements of `T` can exist on this machine: its bytes must not
/// overflow and must fit in memory plus swap. The one gate every array buffer passes (Rust
/// aborts the process when an allocation fails, so a too-large request must never reach it).
pub fn check<T: CpuElement>(op: &'static str, n: usize) -> Result<usize> {
    let size = std::mem::size_of::<T>();
    let limit = max_buffer_bytes();
    match n.checked_mul(size) {
        Some(bytes) if bytes <= limit && bytes <= isize::MAX as usize => Ok(bytes),
        bytes => Err(out_of_memory::<T>(
            op,
            n,
            bytes.unwrap_or(usize::MAX),
            format!(", more than this machine's {limit} bytes of memory and swap"),
        )),
    }
}

fn out_of_memory<T: CpuElement>(
    op: &'static str,
    numel: usize,
    bytes: usize,
    why: String,
) -> Error {
    Error::OutOfMemory {
        op,
        numel,
        dtype: T::DTYPE,
        bytes,
        why,
    }
}

/// A small buffer from the global allocator, with a failed allocation as an error.
fn small_vec<T: CpuElement>(op: &'static str, n: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|e| {
        out_of_memory::<T>(
            op,
            n,
            n.saturating_mul(std::mem::size_of::<T>()),
            format!(": {e}"),
        )
    })?;
    v.resize(n, T::zero());
    Ok(v)
}

/// A buffer of exactly `n` elements with unspecified (valid) contents, for `op` (named in the
/// `Error::OutOfMemory` it returns when the buffer cannot exist).
pub fn take<T: CpuElement>(op: &'static str, n: usize) -> Result<Vec<T>> {
    check::<T>(op, n)?;
    let Some(cap) = class_of(n, std::mem::size_of::<T>()) else {
        return small_vec(op, n);
    };
    if let Some(mut v) = take_pooled::<T>(cap) {
        HITS.fetch_add(1, Ordering::Relaxed);
        v.resize(n, T::zero());
        return Ok(v);
    }
    MISSES.fetch_add(1, Ordering::Relaxed);
    let mut v = alloc_zeroed_vec::<T>(op, cap)?;
    v.truncate(n);
    Ok(v)
}

/// A zero-filled buffer of exactly `n` elements for `op` (errors as `take`).
pub fn take_zeroed<T: CpuElement>(op: &'static str, n: usize) -> Result<Vec<T>> {
    check::<T>(op, n)?;
    let Some(cap) = class_of(n, std::mem::size_of::<T>()) else {
        return small_vec(op, n);
    };
    if let Some(mut v) = take_pooled::<T>(cap) {
        HITS.fetch_add(1, Ordering::Relaxed);
        v.clear();
        v.resize(n, T::zero());
        return Ok(v);
    }
    MISSES.fetch_add(1, Ordering::Relaxed);
    let mut v = alloc_zeroed_vec::<T>(op, cap)?;
    v.truncate(n);
    Ok(v)
}

/// Returns a buffer to the pool (or frees it when it is small, not of a class size, or the pool
/// is full).
pub fn give<T: CpuElement>(v: Vec<T>) {
    let cap = v.capacity();
    if !ENABLED.load(Ordering::Relaxed) || class_of(cap, std::mem::size_of::<T>()) != Some(cap) {
        return;
    }
    let bytes = cap * std::mem::size_of::<T>();
    let p = pool();
    if p.held_bytes.load(Ordering::Relaxed) + bytes > p.max_bytes {
        return;
    }
    let mut free = lock();
    let list = free.entry((TypeId::of::<T>(), cap)).or_default();
    if list.len() < MAX_PER_CLASS {
        list.push(Box::new(v));
        p.held_bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// A vector of `cap` zero elements whose pages the allocator maps lazily (calloc), so that a
/// kernel's first write is the only touch. A refused allocation is an error, not an abort.
fn alloc_zeroed_vec<T: CpuElement>(op: &'static str, cap: usize) -> Result<Vec<T>> {
    let bytes = cap.saturating_mul(std::mem::size_of::<T>());
    let layout = std::alloc::Layout::array::<T>(cap)
        .map_err(|e| out_of_memory::<T>(op, cap, bytes, format!(": {e}")))?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: `layout` has non-zero size (checked above).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut T;
    if ptr.is_null() {
        return Err(out_of_memory::<T>(
            op,
            cap,
            bytes,
            ": the allocator refused it".into(),
        ));
    }
    advise_huge_pages(ptr as *mut u8, layout.size());
    // SAFETY: `ptr` is non-null and comes from the global allocator with
    // `Layout::array::<T>(cap)`, which is the layout `Vec<T>` uses for capacity `cap`; all `cap`
    // elements are initialised, since the memory is zeroed and zero bits are a valid value of
    // every `CpuElement` (a sealed set of primitive numbers and bool).
    Ok(unsafe { Vec::from_raw_parts(ptr, cap, cap) })
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: *mut u8, len: usize) {
    const HUGE: usize = 2 << 20;
    if len < 2 * HUGE {
        return;
    }
    let page = 4096;
    let start = (ptr as usize).next_multiple_of(page);
    let end = (ptr as usize + len) & !(page - 1);
    if end > start {
        // SAFETY: madvise only gives the kernel a hint about pages of our own live allocation
        // ([start, end) lies inside [ptr, ptr + len), page aligned); it never changes contents
        // for MADV_HUGEPAGE, and a failure is harmless, so the result is ignored.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_ptr: *mut u8, _len: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_bound_waste() {
        for n in [
            65536usize,
            65537,
            100_000,
            1 << 20,
            (1 << 20) + 1,
            3_000_001,
        ] {
            let c = class_of(n, 4).unwrap();
            assert!(c >= n && (c - n) * 4 <= n, "{n} -> {c}");
            assert_eq!(class_of(c, 4), Some(c), "a class size is its own class");
        }
        assert_eq!(class_of(1000, 4), None);
        assert_eq!(class_of(usize::MAX, 8), None);
    }

    #[test]
    fn reuse_gives_right_length_and_zeroes_when_asked() {
        let n = 300_000;
        let mut v = take::<f32>("test", n).unwrap();
        assert_eq!(v.len(), n);
        v.iter_mut().for_each(|x| *x = 7.0);
        give(v);
        let w = take_zeroed::<f32>("test", n - 5).unwrap();
        assert_eq!(w.len(), n - 5);
        assert!(w.iter().all(|&x| x == 0.0));
        give(w);
        let u = take::<f32>("test", n + 3).unwrap();
        assert_eq!(u.len(), n + 3);
    }

    /// The gate's bounds: at the limit a request passes the check, one element past it (and
    /// any byte count that overflows) is `OutOfMemory` naming the op, never an abort.
    #[test]
    fn requests_past_the_machine_are_errors() {
        let limit = max_buffer_bytes();
        for (n, dtype_size) in [(limit / 8 + 1, 8), (usize::MAX / 2, 8), (usize::MAX, 8)] {
            let err = take::<f64>("probe", n).unwrap_err();
            match &err {
                Error::OutOfMemory {
                    op, numel, bytes, ..
                } => {
                    assert_eq!((*op, *numel), ("probe", n));
                    assert_eq!(*bytes, n.saturating_mul(dtype_size));
                }
                e => panic!("expected OutOfMemory, got {e:?}"),
            }
            assert!(err.to_string().contains("out of memory"), "{err}");
            assert!(take_zeroed::<f64>("probe", n).is_err());
        }
        assert_eq!(check::<f64>("probe", limit / 8).unwrap(), limit / 8 * 8);
        assert!(check::<u8>("probe", limit + 1).is_err());
        // Size 0 and small buffers take the plain path.
        assert!(take::<u8>("probe", 0).unwrap().is_empty());
        assert_eq!(take_zeroed::<i64>("probe", 5).unwrap(), vec![0; 5]);
    }
}

/// The most bytes one buffer may have: this machine's physical memory plus swap (read once).
/// A larger request cannot succeed, and Rust aborts the process on a failed allocation, so
/// callers check first and return an error instead.
pub fn max_buffer_bytes() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: sysconf only reads system configuration values.
            let (pages, size) = unsafe {
                (
                    libc::sysconf(libc::_SC_PHYS_PAGES),
                    libc::sysconf(libc::_SC_PAGESIZE),
                )
            };
            let swap = std::fs::read_to_string("/proc/meminfo")
                .ok()
                .and_then(|m| {
                    m.lines()
                        .find(|l| l.starts_with("SwapTotal:"))
                        .and_then(|l| l.split_whitespace().nth(1)?.parse::<usize>().ok())
                })
                .unwrap_or(0)
                .saturating_mul(1024);
            if pages > 0 && size > 0 {
                return (pages as usize)
                    .saturating_mul(size as usize)
                    .saturating_add(swap);
            }
            usize::MAX
        }
        #[cfg(not(target_os = "linux"))]
        {
            usize::MAX
        }
    })
}

#[cfg(test)]
mod limit_tests {
    #[test]
    fn the_limit_is_a_plausible_memory_size() {
        let m = super::max_buffer_bytes();
        assert!(m >= 64 << 20, "{m}");
        assert!(m < 1 << 50 || cfg!(not(target_os = "linux")), "{m}");
    }
}
