//! The fork-join of every parallel CPU kernel. Inside a rayon pool a region is a parallel
//! iterator. Called from a thread outside the pool (a program's main thread, where ops called
//! from Python and most products start), rayon would park the caller while the pool runs every
//! part, paying a wake-up on the way in and another on the way out, which on a small region
//! costs more than the split saves. Here the caller runs parts itself while pool threads, once
//! awake, claim the rest: whoever reaches a part first runs it, so a late helper costs nothing,
//! and the caller spins (briefly: at most one part) for parts in flight instead of sleeping. With
//! `QUILL_PIN_THREADS=1`, a helper woken onto the caller's core moves to another one first
//! (`placement.rs`). A panic in
//! a helper's part is caught and raised again on the caller, as rayon's iterators do.

use crate::placement;
use rayon::prelude::*;
use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

/// Part counter, the number of helpers inside `claim`, and the first helper's panic.
struct Shared {
    next: AtomicUsize,
    active: AtomicUsize,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

/// Runs `f(0)`, ..., `f(parts - 1)`, each once, on this thread and up to `threads - 1`
/// helpers. Which thread runs which part varies; callers make each part's result independent
/// of that. With `threads <= 1` (or one part) the parts run in order on this thread, which
/// quill-gemm's fusing kernel relies on (its loop nest, `gemm/nest.rs`).
pub fn for_each<F: Fn(usize) + Sync>(parts: usize, threads: usize, f: F) {
    if parts <= 1 || threads <= 1 {
        (0..parts).for_each(f);
        return;
    }
    if rayon::current_thread_index().is_some() {
        (0..parts).into_par_iter().for_each(&f);
        return;
    }
    let shared = Arc::new(Shared {
        next: AtomicUsize::new(0),
        active: AtomicUsize::new(0),
        panic: Mutex::new(None),
    });
    // Helpers step off this core only when asked to (`QUILL_PIN_THREADS=1`).
    let home = if placement::enabled() {
        placement::current_cpu()
    } else {
        None
    };
    let job: &(dyn Fn(usize) + Sync) = &f;
    // SAFETY: the erased lifetime is never outlived: a helper calls `job` only between raising
    // `active` and claiming a part below `parts`, and `Finish` (which runs on return and on
    // unwind, before `f` is dropped) first pushes `next` to `parts`, so no claim succeeds
    // after it, then waits for `active` to fall to zero. A claim that succeeded before the push
    // was preceded by its helper's raise of `active` (sequentially consistent order), so the
    // wait sees it.
    let job: &'static (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute(job) };
    for _ in 0..(threads - 1).min(parts - 1) {
        let s = Arc::clone(&shared);
        rayon::spawn(move || {
            if let Some(cpu) = home {
                placement::step_aside(cpu);
            }
            s.active.fetch_add(1, SeqCst);
            // Unwinding out of a `rayon::spawn` job would abort the process.
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| claim(&s, parts, job))) {
                let mut first = s.panic.lock().unwrap_or_else(|e| e.into_inner());
                first.get_or_insert(p);
            }
            s.active.fetch_sub(1, SeqCst);
        });
    }
    // A helper the scheduler queued on this core would otherwise wait out this thread's time
    // slice (milliseconds, longer than most regions) before it could step aside; yielding lets
    // it run now. With no such helper the yield returns at once.
    std::thread::yield_now();
    struct Finish<'a>(&'a Shared, usize);
    impl Drop for Finish<'_> {
        fn drop(&mut self) {
            self.0.next.fetch_max(self.1, SeqCst);
            let mut spins = 0u32;
            while self.0.active.load(SeqCst) != 0 {
                spins += 1;
                if spins < 1 << 16 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }
    let finish = Finish(&shared, parts);
    claim(&shared, parts, job);
    drop(finish);
    let caught = shared
        .panic
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(p) = caught {
        resume_unwind(p);
    }
}

/// `f(i, chunk)` for each `len`-long chunk `i` of `data` (the last may be shorter), through
/// [`for_each_item`].
pub fn for_each_chunk<T: Send, F: Fn(usize, &mut [T]) + Sync>(
    data: &mut [T],
    len: usize,
    threads: usize,
    f: F,
) {
    for_each_item(
        data.chunks_mut(len.max(1)).enumerate(),
        threads,
        |(i, c)| f(i, c),
    );
}

/// `f(item)` for each of `items` through [`for_each`]: each item is claimed once, so an item
/// holding `&mut` borrows (chunks of an output, say) is used by one thread only.
pub fn for_each_item<I, F>(items: I, threads: usize, f: F)
where
    I: IntoIterator<IntoIter: ExactSizeIterator, Item: Send>,
    F: Fn(I::Item) + Sync,
{
    let items = items.into_iter();
    if items.len() <= 1 || threads <= 1 {
        items.for_each(f);
        return;
    }
    // A lock per item hands it to whichever thread claims it; never contended.
    let slots: Vec<Mutex<Option<I::Item>>> = items.map(|i| Mutex::new(Some(i))).collect();
    for_each(slots.len(), threads, |i| {
        let item = slots[i].lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(item) = item {
            f(item)
        }
    });
}

/// `f(0)`, ..., `f(parts - 1)` through [`for_each`], collected in part order.
pub fn map<R: Send, F: Fn(usize) -> R + Sync>(parts: usize, threads: usize, f: F) -> Vec<R> {
    let mut out: Vec<Option<R>> = (0..parts).map(|_| None).collect();
    for_each_chunk(&mut out, 1, threads, |i, slot| slot[0] = Some(f(i)));
    // `for_each_chunk` ran every chunk once, so every slot is filled.
    out.into_iter().flatten().collect()
}

/// The threads a region may use: those of the rayon pool the caller is in, or of the global one.
pub fn threads() -> usize {
    rayon::current_num_threads()
}

/// Runs parts until none is left unclaimed.
fn claim(s: &Shared, parts: usize, job: &(dyn Fn(usize) + Sync)) {
    loop {
        let i = s.next.fetch_add(1, SeqCst);
        if i >= parts {
            return;
        }
        job(i);
    }
}

#[cfg(test)]
mod tests {
    use super::for_each;
    use std::panic::AssertUnwindSafe;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    /// Every part runs exactly once, from outside the pool (the claiming path) and from inside
    /// it (the parallel iterator), for part counts around the thread count.
    #[test]
    fn every_part_once() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        for parts in [0, 1, 2, 3, 7, 64] {
            for threads in [1, 2, 3, 8] {
                let hits: Vec<AtomicUsize> = (0..parts).map(|_| AtomicUsize::new(0)).collect();
                let work = |i: usize| {
                    // Uneven parts, so helpers and the caller interleave.
                    std::hint::black_box((0..(i % 5) * 1000).sum::<usize>());
                    hits[i].fetch_add(1, SeqCst);
                };
                for_each(parts, threads, work);
                pool.install(|| for_each(parts, threads, work));
                assert!(
                    hits.iter().all(|h| h.load(SeqCst) == 2),
                    "{parts} parts, {threads} threads"
                );
            }
        }
    }

    /// One thread runs the parts in order on the caller, inside a pool or not (the fusing
    /// GEMM kernel's first row block packs the panels the later ones read).
    #[test]
    fn one_thread_runs_parts_in_order() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        for threads in [0, 1] {
            let order = |inside: bool| {
                let seen = std::sync::Mutex::new(Vec::new());
                let run = || {
                    let me = std::thread::current().id();
                    for_each(6, threads, |i| {
                        assert_eq!(std::thread::current().id(), me);
                        seen.lock().unwrap().push(i);
                    })
                };
                if inside {
                    pool.install(run);
                } else {
                    run();
                }
                seen.into_inner().unwrap()
            };
            for inside in [false, true] {
                assert_eq!(
                    order(inside),
                    (0..6).collect::<Vec<_>>(),
                    "{threads} threads"
                );
            }
        }
    }

    /// Every chunk once, as the right slice of the data, the last one short.
    #[test]
    fn every_chunk_once() {
        for (n, len, threads) in [(0, 3, 2), (10, 3, 2), (9, 3, 3), (5, 8, 2), (7, 1, 4)] {
            let mut data = vec![0usize; n];
            super::for_each_chunk(&mut data, len, threads, |i, c| {
                assert!(!c.is_empty() && c.len() <= len);
                for (j, x) in c.iter_mut().enumerate() {
                    *x += i * len + j + 1;
                }
            });
            let want: Vec<usize> = (1..=n).collect();
            assert_eq!(data, want, "{n} values in chunks of {len}");
        }
    }

    /// `map` gives `f(i)` in part order, outside the pool and inside it; `for_each_item` hands
    /// every item (here owning a `&mut` chunk) to exactly one call.
    #[test]
    fn map_in_order_and_items_once() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        for parts in [0, 1, 2, 5, 33] {
            for threads in [1, 2, 4] {
                let f = |i: usize| {
                    std::hint::black_box((0..(i % 3) * 500).sum::<usize>());
                    i * i + 1
                };
                let want: Vec<usize> = (0..parts).map(f).collect();
                assert_eq!(super::map(parts, threads, f), want, "{parts} parts");
                let inside = pool.install(|| super::map(parts, threads, f));
                assert_eq!(inside, want, "{parts} parts in a pool");
                let mut data = vec![0usize; parts];
                let items: Vec<(usize, &mut usize)> = data.iter_mut().enumerate().collect();
                super::for_each_item(items, threads, |(i, x)| *x += f(i));
                assert_eq!(data, want, "{parts} items");
            }
        }
    }

    /// A panic on either side reaches the caller's `catch_unwind`, with its message, only
    /// after every started part is done with `f`'s borrows (the data they read is intact).
    /// A helper's panic would abort the process if it unwound out of its rayon job, so it is
    /// caught there and raised again on the caller. The other side's parts wait until the
    /// panicking side has run one, so that side always gets a part (8 parts, 1 helper).
    #[test]
    fn panic_reaches_the_caller_after_helpers() {
        use std::sync::atomic::AtomicBool;
        for helper_panics in [false, true] {
            let data = vec![1usize; 1000];
            let panicked = AtomicBool::new(false);
            let other_parts = AtomicUsize::new(0);
            let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
                for_each(8, 2, |_| {
                    if rayon::current_thread_index().is_some() == helper_panics {
                        panicked.store(true, SeqCst);
                        panic!("{}", if helper_panics { "helper" } else { "caller" });
                    }
                    while !panicked.load(SeqCst) {
                        std::thread::yield_now();
                    }
                    assert_eq!(data.iter().sum::<usize>(), 1000);
                    other_parts.fetch_add(1, SeqCst);
                })
            }));
            let msg = r.expect_err("the panic is raised on the caller");
            let want = if helper_panics { "helper" } else { "caller" };
            assert_eq!(msg.downcast_ref::<String>().map(String::as_str), Some(want));
            if helper_panics {
                // The helper stopped at its panic; the caller ran every other part.
                assert_eq!(other_parts.load(SeqCst), 7);
            }
        }
    }
}
