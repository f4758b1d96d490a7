//! A tiny training run shared by the MPI check binary and the thread-group tests: an MLP
//! (8 -> 16 -> 3) on 500 synthetic samples, SGD with momentum, `global_batch / world` samples per
//! rank per step from a `DistributedSampler`. Returns the parameters after `steps` steps, so
//! runs with different world sizes can be compared.

use quill::data::{Dataset, TensorDataset};
use quill::nn::functional::{cross_entropy, Reduction};
use quill::nn::{Linear, Module, ReLU, Sequential};
use quill::optim::{Optimizer, Sgd};
use quill::tensor::Tensor;
use quill::{DType, NDArray};
use quill_dist::{Communicator, DdpOptions, DistributedDataParallel, DistributedSampler};
use std::sync::Arc;

/// Samples in the synthetic dataset (not a multiple of 128, so the last batch is short).
pub const SAMPLES: usize = 500;

fn data(seed: u64) -> Result<(NDArray, NDArray), String> {
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
/// initialises differently, so equal results show the broadcast from rank 0 worked.
pub fn train(
    comm: Arc<dyn Communicator>,
    global_batch: usize,
    steps: usize,
    skew_init: bool,
    opts: DdpOptions,
) -> Result<Vec<Vec<f32>>, String> {
    let e = |e: quill::Error| e.to_string();
    let (rank, world) = (comm.rank(), comm.world_size());
    if !global_batch.is_multiple_of(world) {
        return Err(format!(
            "batch {global_batch} is not a multiple of {world} ranks"
        ));
    }
    let local = global_batch / world;
    let init = if skew_init { 100 * rank as u64 } else { 0 };
    let model = Sequential::new()
        .add(Linear::new(8, 16, true, 1 + init).map_err(e)?)
        .add(ReLU)
        .add(Linear::new(16, 3, true, 2 + init).map_err(e)?);
    let ddp = DistributedDataParallel::new(model, comm, opts).map_err(|e| e.to_string())?;
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
            let (xb, yb) = ds.get_batch(chunk).map_err(e)?;
            let logits = ddp.forward(&Tensor::new(xb)).map_err(e)?;
            let loss = cross_entropy(&logits, &yb, 0.0, Reduction::Mean).map_err(e)?;
            opt.zero_grad();
            ddp.backward(&loss).map_err(|e| e.to_string())?;
            opt.step().map_err(e)?;
            done += 1;
        }
    }
    ddp.parameters()
        .iter()
        .map(|p| p.to_vec::<f32>().map_err(e))
        .collect()
}
