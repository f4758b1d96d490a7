//! The global buffer pool seen through the public API (`buffer_pool_stats`, `set_buffer_pool`,
//! `empty_cache`): a compact of a large array whose output is dropped, then another compact of the
//! same size, counts a hit; recycled (dirty) buffers are fully overwritten by compact and astype
//! and cleared by `zeros`; small buffers bypass the pool; disabling the pool empties it and stops
//! reuse; `empty_cache` releases what it holds. The pool is process-global, so this file is its
//! own test binary with a single test: nothing else runs concurrently and the counts are exact.

use quill::{buffer_pool_stats, empty_cache, set_buffer_pool, DType, NDArray};
use quill_test_support::*;

#[test]
fn buffer_pool_reuses_dropped_buffers() {
    set_buffer_pool(true);
    empty_cache();
    let s0 = buffer_pool_stats();
    assert_eq!(s0.held_bytes, 0);

    let (r, c) = (512usize, 1024usize); // 2 MiB of f32
    let vals: Vec<f32> = (0..r * c).map(|i| i as f32).collect();
    let a = NDArray::from_vec(vals.clone(), &[r, c]).unwrap();
    let t = a.transpose(0, 1).unwrap();
    let want = gather(&vals, &offsets_of(&t));

    let c1 = t.compact().unwrap();
    let s1 = buffer_pool_stats();
    assert_eq!(s1.misses, s0.misses + 1, "first compact allocates fresh");
    assert_eq!(s1.hits, s0.hits);
    assert_eq!(c1.to_vec::<f32>().unwrap(), want);
    drop(c1);
    let s1b = buffer_pool_stats();
    assert!(
        s1b.held_bytes >= r * c * 4,
        "the dropped output is kept: {s1b:?}"
    );

    // Same size again: reuses the buffer.
    let c2 = t.compact().unwrap();
    let s2 = buffer_pool_stats();
    assert_eq!(
        s2.hits,
        s1.hits + 1,
        "second compact reuses: {s1:?} -> {s2:?}"
    );
    assert_eq!(s2.misses, s1.misses);
    assert!(s2.held_bytes < s1b.held_bytes);
    assert_eq!(
        c2.to_vec::<f32>().unwrap(),
        want,
        "recycled buffer fully overwritten"
    );

    // A dirty recycled buffer: zeros must clear it, full must fill all of it.
    c2.assign_scalar(9.0).unwrap();
    drop(c2);
    let z = NDArray::zeros(&[r * c], DType::F32).unwrap();
    let s3 = buffer_pool_stats();
    assert_eq!(s3.hits, s2.hits + 1);
    assert!(z.to_vec::<f32>().unwrap().iter().all(|&x| x == 0.0));
    drop(z);
    // A slightly smaller request falls in the same size class.
    let f = NDArray::full(&[r * c - 1000], -1.0, DType::F32).unwrap();
    let s4 = buffer_pool_stats();
    assert_eq!(s4.hits, s3.hits + 1);
    assert!(f.to_vec::<f32>().unwrap().iter().all(|&x| x == -1.0));
    drop(f);
    // astype into a recycled buffer overwrites every element.
    let ai = NDArray::from_vec((0..r * c).map(|i| i as i32).collect::<Vec<_>>(), &[r, c])
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    let h = ai.astype(DType::F32).unwrap();
    let s5 = buffer_pool_stats();
    assert_eq!(s5.hits, s4.hits + 1);
    assert_eq!(h.to_vec::<f32>().unwrap(), want);
    drop(h);

    // Small buffers never touch the pool.
    let small = NDArray::from_vec((0..1000).map(|i| i as f32).collect::<Vec<_>>(), &[10, 100])
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    let before = buffer_pool_stats();
    drop(small.compact());
    drop(small.compact());
    let after = buffer_pool_stats();
    assert_eq!((after.hits, after.misses), (before.hits, before.misses));

    // empty_cache releases everything; the next large compact allocates fresh.
    empty_cache();
    assert_eq!(buffer_pool_stats().held_bytes, 0);
    let s6 = buffer_pool_stats();
    let c3 = t.compact();
    let s7 = buffer_pool_stats();
    assert_eq!((s7.hits, s7.misses), (s6.hits, s6.misses + 1));
    drop(c3);

    // Disabled: the pool is emptied, nothing is kept or reused.
    set_buffer_pool(false);
    assert_eq!(buffer_pool_stats().held_bytes, 0);
    let s8 = buffer_pool_stats();
    for _ in 0..3 {
        let c = t.compact().unwrap();
        assert_eq!(c.to_vec::<f32>().unwrap(), want);
        drop(c);
    }
    let s9 = buffer_pool_stats();
    assert_eq!(s9.hits, s8.hits, "no reuse while disabled");
    assert_eq!(s9.held_bytes, 0);

    // Enabled again: reuse resumes.
    set_buffer_pool(true);
    drop(t.compact());
    let s10 = buffer_pool_stats();
    drop(t.compact());
    let s11 = buffer_pool_stats();
    assert_eq!(s11.hits, s10.hits + 1);
    empty_cache();
}
