//! The NCCL communicator (feature `nccl`). Without a GPU (or without libnccl) joining a group
//! must be a clean error, never a panic, on every rank; with one, every collective is checked
//! against a naive per-rank computation: a group of 1 on GPU 0 always, and a group of 2 ranks
//! (threads, bootstrapped over `ThreadGroup`) on GPUs 0 and 1 when there are two. The GPU tests
//! skip with a message on a machine without a GPU and fail instead under `REQUIRE_CUDA=1`.
#![cfg(feature = "nccl")]

use quill_dist::{Communicator, DistError, Local, Nccl, ReduceOp, ThreadGroup};
use std::sync::Arc;
use std::time::Duration;

/// True when the GPU tests can run; panics under `REQUIRE_CUDA=1` when they cannot.
fn gpu_or_skip(test: &str) -> bool {
    match Nccl::unavailable_reason() {
        None => true,
        Some(why) if std::env::var("REQUIRE_CUDA").as_deref() == Ok("1") => {
            panic!("{test}: REQUIRE_CUDA=1 but NCCL cannot run: {why}")
        }
        Some(why) => {
            eprintln!("{test}: skipped, NCCL cannot run here: {why}");
            false
        }
    }
}

fn input(r: usize, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7 + r * 3) % 19) as f32 * 0.25 - r as f32)
        .collect()
}

#[test]
fn without_nccl_joining_is_a_clean_error_on_every_rank() {
    if Nccl::unavailable_reason().is_none() {
        return;
    }
    let e = Nccl::from_communicator(Arc::new(Local), 0)
        .err()
        .expect("joined NCCL on a machine that cannot run it");
    let DistError::Backend { op, rank, msg } = &e else {
        panic!("{e:?}")
    };
    assert_eq!((*op, *rank), ("nccl init", 0));
    assert!(
        msg.contains("not found") || msg.contains("no CUDA GPU"),
        "{msg}"
    );
    // Two ranks: both fail, neither waits for the other.
    let comms = ThreadGroup::with_timeout(2, Duration::from_secs(20)).unwrap();
    let errs: Vec<DistError> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .into_iter()
            .map(|c| s.spawn(move || Nccl::from_communicator(Arc::new(c), 0).err().unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (r, e) in errs.iter().enumerate() {
        assert!(
            matches!(e, DistError::Backend { rank, .. } if *rank == r),
            "{e:?}"
        );
    }
}

/// Every collective of `c` against the naive result over `world` ranks.
fn check_collectives(c: &Nccl) {
    let (r, world) = (c.rank(), c.world_size());
    for n in [0, 1, 33, 100_000] {
        let mut s = input(r, n);
        c.all_reduce(&mut s, ReduceOp::Sum).unwrap();
        let m = c.all_reduce_vec(input(r, n), ReduceOp::Mean).unwrap();
        for i in 0..n {
            let want: f64 = (0..world).map(|q| f64::from(input(q, n)[i])).sum();
            assert!((f64::from(s[i]) - want).abs() < 1e-4, "sum n {n} [{i}]");
            let mean = want / world as f64;
            assert!((f64::from(m[i]) - mean).abs() < 1e-4, "mean n {n} [{i}]");
        }
        let mut b = input(r, n);
        c.broadcast(&mut b, world - 1).unwrap();
        assert_eq!(b, input(world - 1, n), "broadcast n {n}");
        let g = c.all_gather(&input(r, n)).unwrap();
        let want: Vec<f32> = (0..world).flat_map(|q| input(q, n)).collect();
        assert_eq!(g, want, "all_gather n {n}");
        c.barrier().unwrap();
    }
    assert!(matches!(
        c.broadcast(&mut [1.0], world),
        Err(DistError::BadRoot { .. })
    ));
    // Unequal lengths in a broadcast: a typed error on every rank, and the group still works.
    let mut odd = vec![0.0; 3 + r];
    let e = c.broadcast(&mut odd, 0);
    if world > 1 {
        assert!(matches!(e, Err(DistError::SizeMismatch { .. })), "{e:?}");
    }
    let mut one = [1.0f32];
    c.all_reduce(&mut one, ReduceOp::Sum).unwrap();
    assert_eq!(one[0], world as f32);
}

#[test]
fn one_rank_on_gpu_0_matches_the_naive_result() {
    if !gpu_or_skip("one_rank_on_gpu_0") {
        return;
    }
    let c = Nccl::from_communicator(Arc::new(Local), 0).unwrap();
    assert_eq!((c.rank(), c.world_size(), c.backend()), (0, 1, "nccl"));
    check_collectives(&c);
}

#[test]
fn two_ranks_on_two_gpus_match_the_naive_result() {
    if !gpu_or_skip("two_ranks_on_two_gpus") {
        return;
    }
    if Nccl::device_count() < 2 {
        eprintln!("two_ranks_on_two_gpus: skipped, one GPU (NCCL needs a GPU per rank)");
        return;
    }
    let comms = ThreadGroup::with_timeout(2, Duration::from_secs(60)).unwrap();
    std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .into_iter()
            .map(|c| {
                s.spawn(move || {
                    let r = c.rank();
                    let n = Nccl::with_timeout(Arc::new(c), r, Duration::from_secs(60)).unwrap();
                    check_collectives(&n);
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
    });
}
