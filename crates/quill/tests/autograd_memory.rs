//! A 1,000-step training loop whose live heap stays flat: the graph and the arrays its ops
//! saved die with each step's loss. Alone in its binary, so the allocation counter sees only it.

use quill::tensor::Tensor;
use quill::{DType, NDArray};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// Counts the bytes live on the heap, to see whether a loop leaks.
struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call forwards to `System` unchanged; the counter is only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

#[test]
fn training_loop_memory_stays_flat() {
    // 1,000 steps of forward, backward and an SGD update: live heap bytes after step 100 and
    // after step 1,000 must match (the graph and its saved arrays die with each loss).
    quill::set_buffer_pool(false);
    let w = Tensor::from_array(NDArray::randn(&[16, 8], 5, DType::F32).unwrap(), true).unwrap();
    let b = Tensor::from_array(NDArray::zeros(&[8], DType::F32).unwrap(), true).unwrap();
    let x = Tensor::new(NDArray::randn(&[32, 16], 6, DType::F32).unwrap());
    let mut live_at_100 = 0;
    for step in 1..=1000 {
        let loss = x
            .matmul(&w)
            .unwrap()
            .add(&b)
            .unwrap()
            .relu()
            .unwrap()
            .square()
            .unwrap()
            .mean(None, false)
            .unwrap();
        loss.backward().unwrap();
        for p in [&w, &b] {
            let g = p.grad().unwrap();
            p.array()
                .sub_assign(&g.array().mul_scalar(0.01).unwrap())
                .unwrap();
            p.zero_grad();
        }
        if step == 100 {
            live_at_100 = LIVE.load(Ordering::Relaxed);
        }
    }
    let live_end = LIVE.load(Ordering::Relaxed);
    // Each step's graph holds over 4 KiB, so 900 leaked steps would show as megabytes.
    assert!(
        (live_end - live_at_100).abs() < 64 * 1024,
        "live bytes: {live_at_100} -> {live_end}"
    );
}
