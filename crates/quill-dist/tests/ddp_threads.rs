//! `DistributedDataParallel` on the in-process thread group: N ranks x batch B/N reach the same
//! parameters as one rank x batch B (the gradient of the mean loss over the union of the rank
//! batches is the mean of the rank gradients), from rank-skewed initialisations (so the
//! broadcast from rank 0 is exercised); so do N ranks accumulating k micro-batches of B/(N k)
//! each (all but the last under `no_sync`, which runs no all-reduce); buckets leave while
//! backward still runs; a model of different size on one rank is a typed error.

#[path = "../src/bin/quill-dist-check/toy.rs"]
mod toy;

use quill::nn::{Linear, Module};
use quill::tensor::Tensor;
use quill::DType;
use quill_dist::{
    Communicator, DdpOptions, DistError, DistributedDataParallel, Local, ReduceOp, ThreadGroup,
};
use std::rc::Rc;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn run_group(
    world: usize,
    batch: usize,
    steps: usize,
    opts: DdpOptions,
    accum: usize,
) -> Vec<Vec<Vec<f32>>> {
    let comms = ThreadGroup::ranks(world).unwrap();
    std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .into_iter()
            .map(|c| {
                s.spawn(move || toy::train(Arc::new(c), batch, steps, true, opts, accum).unwrap())
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn assert_close(a: &[Vec<f32>], b: &[Vec<f32>], what: &str) {
    assert_eq!(a.len(), b.len());
    let mut moved = 0.0;
    for (pa, pb) in a.iter().zip(b) {
        for (x, y) in pa.iter().zip(pb) {
            assert!(
                (x - y).abs() <= 1e-4 * (1.0 + x.abs()),
                "{what}: {x} vs {y}"
            );
            moved += x.abs();
        }
    }
    assert!(moved > 1.0, "{what}: nothing to compare");
}

#[test]
fn n_ranks_of_b_over_n_equal_one_rank_of_b() {
    let steps = 12; // three epochs of 500 samples: reshuffles and short last batches included
    let single = toy::train(Arc::new(Local), 128, steps, false, DdpOptions::default(), 1).unwrap();
    for (world, bucket) in [(2, 40), (4, 1 << 18), (2, 1)] {
        let opts = DdpOptions {
            bucket_elems: bucket,
            ..DdpOptions::default()
        };
        let ranks = run_group(world, 128, steps, opts, 1);
        for (r, p) in ranks.iter().enumerate() {
            assert_close(
                &single,
                p,
                &format!("world {world} bucket {bucket} rank {r}"),
            );
        }
        // Every rank holds bit-identical parameters.
        for p in &ranks[1..] {
            assert_eq!(p, &ranks[0]);
        }
    }
}

/// Gradient accumulation: N ranks x k micro-batches reach the parameters of 1 rank with the whole
/// global batch and no accumulation. Within 1e-4 relative, not bit-exact: the step's gradient is
/// summed from k x N micro-batch means (each weighted by its share) where the single run takes
/// one mean over the batch, so the float additions happen in another order (observed
/// differences are around 1e-7). `toy::train` itself fails if a backward under `no_sync` ran an
/// all-reduce or the synchronised one ran other than one per bucket.
#[test]
fn n_ranks_accumulating_k_micro_batches_equal_one_rank_of_the_whole_batch() {
    let steps = 12;
    // (world, accum, global batch, bucket): 2 x 4 x 16 (each rank's short last batch of 58 is 4
    // micro-batches, the last of 10); 2 x 3 x 16 (the short batch of 10 is a single
    // micro-batch); 1 x 2 x 64 (accumulation without ranks); 4 x 2 x 16, one bucket per tensor.
    for (world, accum, batch, bucket) in [
        (2, 4, 128, 40),
        (2, 3, 96, 1 << 18),
        (1, 2, 128, 40),
        (4, 2, 128, 1),
    ] {
        let single = toy::train(
            Arc::new(Local),
            batch,
            steps,
            false,
            DdpOptions::default(),
            1,
        )
        .unwrap();
        let opts = DdpOptions {
            bucket_elems: bucket,
            ..DdpOptions::default()
        };
        let ranks = run_group(world, batch, steps, opts, accum);
        for (r, p) in ranks.iter().enumerate() {
            assert_close(
                &single,
                p,
                &format!("world {world} accum {accum} batch {batch} rank {r}"),
            );
        }
        for p in &ranks[1..] {
            assert_eq!(p, &ranks[0]);
        }
    }
}

/// `no_sync` in detail, on one rank whose all-reduces are announced on a channel: two backward
/// passes under it announce nothing and leave each gradient the local sum, the third (synced)
/// one reduces every bucket once and leaves the sum of all three; the guard restores the mode
/// when dropped, also when nested; a second backward without `no_sync` and without a sync in
/// between is the error it always was, naming `no_sync`.
#[test]
fn no_sync_accumulates_locally_and_the_next_backward_reduces_the_sum() {
    let (tx, rx): (Sender<usize>, Receiver<usize>) = channel();
    let model = Linear::new(3, 2, true, 4).unwrap();
    let opts = DdpOptions {
        bucket_elems: 1,
        ..DdpOptions::default()
    };
    let ddp =
        DistributedDataParallel::new(model, Arc::new(Announcing(Mutex::new(tx))), opts).unwrap();
    assert_eq!(ddp.bucket_count(), 2);
    let x = Tensor::randn(&[5, 3], 9, DType::F32).unwrap();
    let loss = || ddp.forward(&x).unwrap().sum(None, false).unwrap();
    // The gradient of one pass, from a plain backward on the same module.
    loss().backward().unwrap();
    let one: Vec<Vec<f32>> = ddp
        .parameters()
        .iter()
        .map(|p| p.grad().unwrap().to_vec::<f32>().unwrap())
        .collect();
    // A synced backward hands each bucket to the communication thread as soon as it is
    // complete (so some may be announced already); after the sync both were, once each.
    ddp.finish_gradient_sync().unwrap();
    assert_eq!(rx.try_iter().count(), 2);
    for p in ddp.parameters() {
        p.zero_grad();
    }
    {
        let _g = ddp.no_sync();
        assert!(!ddp.syncs_gradients());
        {
            let _inner = ddp.no_sync();
        }
        assert!(!ddp.syncs_gradients(), "a nested guard restores no_sync");
        ddp.backward(&loss()).unwrap();
        ddp.backward(&loss()).unwrap();
    }
    assert!(ddp.syncs_gradients());
    assert_eq!(rx.try_iter().count(), 0, "no all-reduce under no_sync");
    ddp.backward(&loss()).unwrap();
    assert_eq!(rx.try_iter().count(), 2, "one all-reduce per bucket");
    for (p, g1) in ddp.parameters().iter().zip(&one) {
        let g = p.grad().unwrap().to_vec::<f32>().unwrap();
        for (a, b) in g.iter().zip(g1) {
            assert!(
                (a - 3.0 * b).abs() <= 1e-5 * (1.0 + b.abs()),
                "{a} vs 3 x {b}"
            );
        }
    }
    // Two synchronised passes without a sync between them: an error that says what to do.
    loss().backward().unwrap();
    let e = loss().backward().unwrap_err().to_string();
    assert!(e.contains("no_sync"), "{e}");
}

/// Local, except that each all-reduce is announced on a channel first.
struct Announcing(Mutex<Sender<usize>>);

impl Communicator for Announcing {
    fn rank(&self) -> usize {
        0
    }
    fn world_size(&self) -> usize {
        1
    }
    fn backend(&self) -> &'static str {
        "announcing"
    }
    fn timeout(&self) -> Duration {
        Duration::from_secs(10)
    }
    fn all_reduce_vec(&self, buf: Vec<f32>, op: ReduceOp) -> quill_dist::Result<Vec<f32>> {
        self.0.lock().unwrap().send(buf.len()).unwrap();
        Local.all_reduce_vec(buf, op)
    }
    fn broadcast_vec(&self, buf: Vec<f32>, root: usize) -> quill_dist::Result<Vec<f32>> {
        Local.broadcast_vec(buf, root)
    }
    fn all_gather_vec(&self, buf: Vec<f32>) -> quill_dist::Result<Vec<f32>> {
        Local.all_gather_vec(buf)
    }
    fn barrier(&self) -> quill_dist::Result<()> {
        Ok(())
    }
}

#[test]
fn the_last_layers_bucket_is_reduced_while_backward_still_runs() {
    let (tx, rx): (Sender<usize>, Receiver<usize>) = channel();
    let l1 = Linear::new(4, 5, true, 1).unwrap();
    let l2 = Linear::new(5, 3, true, 2).unwrap();
    let model = quill::nn::Sequential::new().add(l1).add(l2);
    let first = model.parameters()[0].clone(); // the first layer's weight: its gradient comes last
    let opts = DdpOptions {
        bucket_elems: 1,
        ..DdpOptions::default()
    };
    let ddp =
        DistributedDataParallel::new(model, Arc::new(Announcing(Mutex::new(tx))), opts).unwrap();
    assert_eq!(ddp.bucket_count(), 4);
    let seen = Rc::new(std::cell::RefCell::new(Vec::new()));
    let (seen2, rx) = (seen.clone(), Rc::new(rx));
    // Runs inside backward, when the first layer's weight gradient is ready: by then the buckets
    // of the second layer must already be on the wire.
    first.register_post_accumulate_grad_hook(Rc::new(move |_p: &Tensor| {
        let n = rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|e| quill::Error::invalid("test", e.to_string()))?;
        seen2.borrow_mut().push(n);
        Ok(())
    }));
    let x = Tensor::randn(&[6, 4], 3, DType::F32).unwrap();
    let loss = ddp.forward(&x).unwrap().sum(None, false).unwrap();
    ddp.backward(&loss).unwrap();
    // The second layer's bias (3) was the first bucket launched.
    assert_eq!(seen.borrow().as_slice(), &[3]);
    for p in ddp.parameters() {
        assert!(p.grad().is_some());
    }
}

#[test]
fn ranks_with_different_models_get_a_typed_error() {
    let comms = ThreadGroup::ranks(2).unwrap();
    let errs: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = comms
            .into_iter()
            .map(|c| {
                s.spawn(move || {
                    let width = 3 + c.rank();
                    let m = Linear::new(2, width, true, 0).unwrap();
                    DistributedDataParallel::new(m, Arc::new(c), DdpOptions::default()).err()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for e in errs {
        assert!(matches!(e, Some(DistError::SizeMismatch { .. })), "{e:?}");
    }
}
