//! The thread-group communicator (and `Local`) against naive per-rank computations: every
//! collective, bad roots, unequal lengths, mismatched collectives, a rank that never arrives
//! (timeout) and a rank that leaves (fast failure).

use quill_dist::{Communicator, DistError, Local, ReduceOp, ThreadComm, ThreadGroup};
use std::time::{Duration, Instant};

fn input(r: usize, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 5 + r * 3) % 17) as f32 * 0.5 - r as f32)
        .collect()
}

/// Runs `f` on every rank of a fresh group of `world`, each on its own thread.
fn on_ranks<T: Send>(
    world: usize,
    timeout: Duration,
    f: impl Fn(ThreadComm) -> T + Sync,
) -> Vec<T> {
    let comms = ThreadGroup::with_timeout(world, timeout).unwrap();
    std::thread::scope(|s| {
        let hs: Vec<_> = comms.into_iter().map(|c| s.spawn(|| f(c))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn every_collective_matches_the_naive_result() {
    for world in [1, 2, 3, 4] {
        for n in [0, 1, 33] {
            let got = on_ranks(world, Duration::from_secs(20), |c| {
                let r = c.rank();
                let mut s = input(r, n);
                c.all_reduce(&mut s, ReduceOp::Sum).unwrap();
                let m = c.all_reduce_vec(input(r, n), ReduceOp::Mean).unwrap();
                let mut b = input(r, n);
                c.broadcast(&mut b, world - 1).unwrap();
                let g = c.all_gather(&input(r, n)).unwrap();
                c.barrier().unwrap();
                (s, m, b, g)
            });
            for (s, m, b, g) in got {
                for i in 0..n {
                    let want: f64 = (0..world).map(|r| input(r, n)[i] as f64).sum();
                    assert!((s[i] as f64 - want).abs() < 1e-5, "sum {world} {n} {i}");
                    assert!((m[i] as f64 - want / world as f64).abs() < 1e-5, "mean");
                    assert_eq!(b[i], input(world - 1, n)[i], "broadcast");
                }
                let want: Vec<f32> = (0..world).flat_map(|r| input(r, n)).collect();
                assert_eq!(g, want, "all_gather");
            }
        }
    }
}

#[test]
fn local_is_the_identity_and_checks_the_root() {
    let c = Local;
    let mut x = input(0, 9);
    c.all_reduce(&mut x, ReduceOp::Mean).unwrap();
    assert_eq!(x, input(0, 9));
    assert!(matches!(
        c.broadcast(&mut x, 1),
        Err(DistError::BadRoot {
            root: 1,
            world: 1,
            ..
        })
    ));
    assert_eq!(c.all_gather(&x).unwrap(), x);
}

#[test]
fn bad_inputs_are_typed_errors_on_every_rank() {
    let got = on_ranks(3, Duration::from_secs(20), |c| {
        let bad_root = c.broadcast(&mut [1.0], 3);
        let unequal = c.all_reduce_vec(vec![0.0; 2 + c.rank()], ReduceOp::Sum);
        // Rank 2 calls a different collective.
        let mixed = if c.rank() == 2 {
            c.barrier().map(|_| Vec::new())
        } else {
            c.all_gather_vec(vec![1.0])
        };
        (bad_root, unequal, mixed)
    });
    for (r, (bad_root, unequal, mixed)) in got.into_iter().enumerate() {
        assert!(matches!(
            bad_root,
            Err(DistError::BadRoot {
                root: 3,
                world: 3,
                ..
            })
        ));
        match unequal {
            Err(DistError::SizeMismatch {
                rank, elems, all, ..
            }) => {
                assert_eq!((rank, elems, all), (r, 2 + r, vec![2, 3, 4]));
                let msg = format!(
                    "{}",
                    DistError::SizeMismatch {
                        op: "all_reduce",
                        rank,
                        elems,
                        all: vec![2, 3, 4]
                    }
                );
                assert!(
                    msg.contains("all_reduce") && msg.contains("[2, 3, 4]"),
                    "{msg}"
                );
            }
            other => panic!("rank {r}: want SizeMismatch, got {other:?}"),
        }
        assert!(
            matches!(mixed, Err(DistError::Mismatched { .. })),
            "{mixed:?}"
        );
    }
}

#[test]
fn a_rank_that_never_arrives_times_out_and_one_that_leaves_fails_the_others_fast() {
    let t0 = Instant::now();
    let got = on_ranks(2, Duration::from_millis(300), |c| {
        if c.rank() == 1 {
            std::thread::sleep(Duration::from_millis(1500));
            return None;
        }
        Some(c.all_reduce(&mut [1.0], ReduceOp::Sum))
    });
    match &got[0] {
        Some(Err(DistError::Timeout {
            op: "all_reduce",
            rank: 0,
            world: 2,
            elems: 1,
            ..
        })) => {}
        other => panic!("want a Timeout, got {other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(5));

    let t0 = Instant::now();
    let got = on_ranks(2, Duration::from_secs(60), |c| {
        if c.rank() == 1 {
            drop(c);
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
        Some(c.barrier())
    });
    assert!(
        matches!(&got[0], Some(Err(DistError::Backend { .. }))),
        "{:?}",
        got[0]
    );
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "the leaver was not noticed"
    );
}
