//! The size-class buffer pool. Large buffers are costly to obtain fresh (every first touch of a
//! page faults: about 2 GB/s here against 16 GB/s for a buffer already mapped), so a dropped
//! buffer of 256 KiB or more is kept, keyed by element type and size class, and the next
//! allocation of that class takes it. Classes are 4 per power of two, so at most 25 % is wasted.
//! The pool holds at most `QUILL_POOL_MAX_BYTES` (default 1 GiB); `empty_cache` releases all.
//! Fresh large buffers are zero-mapped by the allocator and advised to use transparent huge pages.

use crate::storage::CpuElement;
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
    pub hits: u64,
    pub misses: u64,
    pub held_bytes: usize,
}

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

/// A buffer of exactly `n` elements with unspecified (valid) contents.
pub fn take<T: CpuElement>(n: usize) -> Vec<T> {
    let Some(cap) = class_of(n, std::mem::size_of::<T>()) else {
        return vec![T::zero(); n];
    };
    if let Some(mut v) = take_pooled::<T>(cap) {
        HITS.fetch_add(1, Ordering::Relaxed);
        v.resize(n, T::zero());
        return v;
    }
    MISSES.fetch_add(1, Ordering::Relaxed);
    let mut v = alloc_zeroed_vec::<T>(cap);
    v.truncate(n);
    v
}

/// A zero-filled buffer of exactly `n` elements.
pub fn take_zeroed<T: CpuElement>(n: usize) -> Vec<T> {
    let Some(cap) = class_of(n, std::mem::size_of::<T>()) else {
        return vec![T::zero(); n];
    };
    if let Some(mut v) = take_pooled::<T>(cap) {
        HITS.fetch_add(1, Ordering::Relaxed);
        v.clear();
        v.resize(n, T::zero());
        return v;
    }
    MISSES.fetch_add(1, Ordering::Relaxed);
    let mut v = alloc_zeroed_vec::<T>(cap);
    v.truncate(n);
    v
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
/// kernel's first write is the only touch.
fn alloc_zeroed_vec<T: CpuElement>(cap: usize) -> Vec<T> {
    let Ok(layout) = std::alloc::Layout::array::<T>(cap) else {
        // Only reachable when cap * size overflows isize, which the array constructors reject
        // with an error first; fall back to the standard path, which reports capacity overflow.
        return vec![T::zero(); cap];
    };
    if layout.size() == 0 {
        return Vec::new();
    }
    // SAFETY: `layout` has non-zero size (checked above).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut T;
    if ptr.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    advise_huge_pages(ptr as *mut u8, layout.size());
    // SAFETY: `ptr` comes from the global allocator with `Layout::array::<T>(cap)`, which is the
    // layout `Vec<T>` uses for capacity `cap`; all `cap` elements are initialised, since the
    // memory is zeroed and zero bits are a valid value of every `CpuElement` (a sealed set of
    // primitive numbers and bool).
    unsafe { Vec::from_raw_parts(ptr, cap, cap) }
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
        let mut v = take::<f32>(n);
        assert_eq!(v.len(), n);
        v.iter_mut().for_each(|x| *x = 7.0);
        give(v);
        let w = take_zeroed::<f32>(n - 5);
        assert_eq!(w.len(), n - 5);
        assert!(w.iter().all(|&x| x == 0.0));
        give(w);
        let u = take::<f32>(n + 3);
        assert_eq!(u.len(), n + 3);
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
