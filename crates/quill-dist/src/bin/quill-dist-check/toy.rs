//! A tiny training run shared by the MPI check binary and the thread-group tests: an MLP
//! (8 -> 16 -> 3) on 500 synthetic samples, SGD with momentum, `global_batch / world` samples per
//! rank per step from a `DistributedSampler`, optionally accumulated over `accum` micro-batches
//! (all but the last under `no_sync`). Returns the parameters after `steps` steps, so runs with
//! different world sizes and accumulation can be compared; fails if a backward under `no_sync`
//! ran an all-reduce or a synchronised one ran other than one per bucket.

use quill::data::{Dataset, TensorDataset};
use quill::nn::functional::{cross_entropy, Reduction};
use quill::nn::{Linear, Module, ReLU, Sequential};
use quill::optim::{Optimizer, Sgd};
use quill::tensor::Tensor;
use quill::{DType, NDArray};
use quill_dist::{
    Communicator, DdpOptions, DistributedDataParallel, DistributedSampler, ReduceOp, Result,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Samples in the synthetic dataset (not a multiple of 128, so the last batch is short).
pub const SAMPLES: usize = 500;

/// Another communicator with a count of the all-reduces run through it: the evidence that
/// backward passes under `no_sync` communicate nothing.
pub struct Counting {
    inner: Arc<dyn Communicator>,
    all_reduces: AtomicUsize,
}

impl Counting {
    /// Wraps `inner`, counting from 0.
    pub fn new(inner: Arc<dyn Communicator>) -> Counting {
        Counting {
            inner,
            all_reduces: AtomicUsize::new(0),
        }
    }

    /// All-reduces started so far.
    pub fn all_reduces(&self) -> usize {
        self.all_reduces.load(Ordering::SeqCst)
    }
}

impl Communicator for Counting {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn world_size(&self) -> usize {
        self.inner.world_size()
    }
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn timeout(&self) -> Duration {
        self.inner.timeout()
    }
    fn all_reduce_vec(&self, buf: Vec<f32>, op: ReduceOp) -> Result<Vec<f32>> {
        self.all_reduces.fetch_add(1, Ordering::SeqCst);
        self.inner.all_reduce_vec(buf, op)
    }
    fn broadcast_vec(&self, buf: Vec<f32>, root: usize) -> Result<Vec<f32>> {
        self.inner.broadcast_vec(buf, root)
    }
    fn all_gather_vec(&self, buf: Vec<f32>) -> Result<Vec<f32>> {
        self.inner.all_gather_vec(buf)
    }
    fn barrier(&self) -> Result<()> {
        self.inner.barrier()
    }
    fn abort(&self, code: i32, msg: &str) -> ! {
        self.inner.abort(code, msg)
    }
}

fn data(seed: u64) -> std::result::Result<(NDArray, NDArray), String> {
    let x = NDArray::randn(&[SAMPLES, 8], seed, DType::F32).map_err(|e| e.to_string())?;
    let v = x.to_vec::<f32>().map_err(|e| e.to_string())?;
    let y: Vec<i64> = v
        .chunks(8)
        .map(|r| i64::from(r[0] + r[1] > 0.0) + i64::from(r[2] > 0.5))
        .collect();
    Ok((
        x,
        NDArray::from_vec(y, &[SAMPLES]).map_err(|e| e.to_string())?,
    ))
}

/// Trains on `comm`'s group and returns every parameter's values. With `skew_init`, each rank
/// initialises differently, so equal results show the broadcast from rank 0 worked. Each rank's
/// step batch of `global_batch / world` is cut into micro-batches of
/// `global_batch / (world * accum)` (the last one of a short batch shorter, and fewer of them),
/// each micro-batch's mean loss weighted by its share of the step batch, every micro-batch but
/// the last under `no_sync`.
pub fn train(
    comm: Arc<dyn Communicator>,
    global_batch: usize,
    steps: usize,
    skew_init: bool,
    opts: DdpOptions,
    accum: usize,
) -> std::result::Result<Vec<Vec<f32>>, String> {
    let e = |e: quill::Error| e.to_string();
    let (rank, world) = (comm.rank(), comm.world_size());
    if accum == 0 || !global_batch.is_multiple_of(world * accum) {
        return Err(format!(
            "batch {global_batch} is not a multiple of {world} ranks x {accum} micro-batches"
        ));
    }
    let local = global_batch / world;
    let micro = local / accum;
    let init = if skew_init { 100 * rank as u64 } else { 0 };
    let model = Sequential::new()
        .add(Linear::new(8, 16, true, 1 + init).map_err(e)?)
        .add(ReLU)
        .add(Linear::new(16, 3, true, 2 + init).map_err(e)?);
    let counting = Arc::new(Counting::new(comm));
    let ddp =
        DistributedDataParallel::new(model, counting.clone(), opts).map_err(|e| e.to_string())?;
    let buckets = ddp.bucket_count();
    let mut opt = Sgd::new(ddp.parameters(), 0.1)
        .and_then(|s| s.momentum(0.9))
        .map_err(e)?;
    let (x, y) = data(7)?;
    let ds = TensorDataset::new(x, y).map_err(e)?;
    let sampler = DistributedSampler::new(SAMPLES, world, rank)
        .map_err(|e| e.to_string())?
        .seed(11);
    let mut done = 0;
    'epochs: for epoch in 0.. {
        for chunk in sampler.indices(epoch).chunks(local) {
            if done == steps {
                break 'epochs;
            }
            opt.zero_grad();
            let pieces: Vec<&[usize]> = chunk.chunks(micro).collect();
            for (j, piece) in pieces.iter().enumerate() {
                let (xb, yb) = ds.get_batch(piece).map_err(e)?;
                let logits = ddp.forward(&Tensor::new(xb)).map_err(e)?;
                let loss = cross_entropy(&logits, &yb, 0.0, Reduction::Mean).map_err(e)?;
                let loss = if accum == 1 {
                    loss
                } else {
                    loss.mul_scalar(piece.len() as f64 / chunk.len() as f64)
                        .map_err(e)?
                };
                let last = j + 1 == pieces.len();
                let before = counting.all_reduces();
                if last {
                    ddp.backward(&loss).map_err(|e| e.to_string())?;
                } else {
                    let _g = ddp.no_sync();
                    if ddp.syncs_gradients() {
                        return Err("no_sync() did not turn the synchronisation off".into());
                    }
                    ddp.backward(&loss).map_err(|e| e.to_string())?;
                }
                let ran = counting.all_reduces() - before;
                let want = if last { buckets } else { 0 };
                if ran != want {
                    return Err(format!(
                        "step {done} micro-batch {j}: {ran} all-reduces, want {want} ({})",
                        if last {
                            "one per bucket"
                        } else {
                            "under no_sync"
                        }
                    ));
                }
            }
            opt.step().map_err(e)?;
            done += 1;
        }
    }
    if counting.all_reduces() != steps * buckets {
        return Err(format!(
            "{} all-reduces in {steps} steps of {buckets} buckets",
            counting.all_reduces()
        ));
    }
    ddp.parameters()
        .iter()
        .map(|p| p.to_vec::<f32>().map_err(e))
        .collect()
}
