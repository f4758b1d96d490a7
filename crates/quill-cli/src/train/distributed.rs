//! `quill train --distributed`: the MNIST job trained by every rank of an MPI job
//! (`mpirun -np N quill train --distributed ...`) through quill-dist's
//! `DistributedDataParallel` (the language-model job's distributed form is in `lm.rs`, which
//! shares `run`). Each rank trains on its `DistributedSampler` shard with batch
//! `--batch-size / N`, so the global batch, the steps per epoch and the learning-rate schedule are
//! those of the single-process run; the test set is split across the ranks and the metrics summed.
//! With `--grad-accum K` each rank's batch is K micro-batches of `--batch-size / (N K)`, the first
//! K - 1 backward passes under `no_sync`, the last one all-reducing the accumulated gradients.
//! Rank 0 alone prints, draws the progress bar, and writes the CSV, the plot and the (atomic)
//! checkpoint; every rank reads the checkpoint on `--resume`, which therefore works with any
//! number of ranks. A collective that waits past `QUILL_DIST_TIMEOUT` seconds (default 60) ends
//! the whole job with a message naming the operation and the rank.

use super::checkpoint::resume;
use super::metrics::{self, Row};
use super::options::Options;
use super::{
    build_model, build_optimizer, evaluate, finish_epoch, limit, meta_of, mnist_labels, q,
    report_epoch, total_steps,
};
use crate::report;
use indicatif::ProgressBar;
use quill::data::{DataLoader, Dataset, Mnist, Normalize};
use quill::nn::{models, Module};
use quill::optim::{CosineLr, LrSchedule};
use quill_dist::{
    Communicator, DdpOptions, DistributedDataParallel, DistributedSampler, ReduceOp, Shard,
};
use std::sync::Arc;
use std::time::Instant;

#[cfg(not(feature = "mpi"))]
pub fn run(_o: Options) -> Result<(), String> {
    Err("--distributed needs MPI: build with `cargo build --release -p quill-cli --features mpi` \
         (scripts/install-mpi.sh installs Open MPI) and launch with `mpirun -np N quill train --distributed`"
        .into())
}

#[cfg(feature = "mpi")]
pub fn run(mut o: Options) -> Result<(), String> {
    let mpi: Arc<dyn Communicator> = Arc::new(quill_dist::Mpi::init().map_err(|e| e.to_string())?);
    let comm = match communicator(&mut o, mpi.clone()) {
        Ok(c) => c,
        Err(e) => {
            let msg = format!("rank {} of {}: {e}", mpi.rank(), mpi.world_size());
            mpi.abort(1, &msg)
        }
    };
    let c = comm.clone();
    let job = move || match o.task {
        super::options::Task::Lm => super::lm::run(o, Some(c.clone())),
        super::options::Task::Mnist => train(o, c.clone()),
    };
    match quill::in_pool(job) {
        Ok(()) => Ok(()),
        Err(e) => {
            let msg = format!("rank {} of {}: {e}", comm.rank(), comm.world_size());
            comm.abort(1, &msg)
        }
    }
}

/// The communicator `--dist-backend` names, on top of MPI.
#[cfg(feature = "mpi")]
fn communicator(
    o: &mut Options,
    mpi: Arc<dyn Communicator>,
) -> Result<Arc<dyn Communicator>, String> {
    match o.dist_backend.as_str() {
        "nccl" => nccl(o, mpi),
        _ => Ok(mpi),
    }
}

/// NCCL on the rank's node-local GPU (bootstrapped over MPI); the model follows it there when
/// `--device` is a GPU.
#[cfg(all(feature = "mpi", feature = "nccl"))]
fn nccl(o: &mut Options, mpi: Arc<dyn Communicator>) -> Result<Arc<dyn Communicator>, String> {
    let gpu = quill_dist::Nccl::local_device();
    if matches!(o.device, quill::Device::Cuda(_)) {
        o.device = quill::Device::Cuda(gpu);
    }
    Ok(Arc::new(d(quill_dist::Nccl::from_communicator(mpi, gpu))?))
}

#[cfg(all(feature = "mpi", not(feature = "nccl")))]
fn nccl(_o: &mut Options, _mpi: Arc<dyn Communicator>) -> Result<Arc<dyn Communicator>, String> {
    Err("--dist-backend nccl needs a build with `--features nccl`".into())
}

/// A quill-dist error as the CLI's error string.
pub(super) fn d<T>(r: quill_dist::Result<T>) -> Result<T, String> {
    r.map_err(|e| e.to_string())
}

/// Sums `values` over the ranks exactly in f64 (each travels as two f32, its value and the
/// remainder, and every rank adds them up in rank order), so the totals are those one process
/// would have summed, up to the order of the f64 additions.
pub(super) fn sum_f64_over_ranks(
    comm: &dyn Communicator,
    values: &[f64],
) -> Result<Vec<f64>, String> {
    if comm.world_size() == 1 {
        return Ok(values.to_vec());
    }
    let split: Vec<f32> = values
        .iter()
        .flat_map(|&x| {
            let hi = x as f32;
            [hi, (x - f64::from(hi)) as f32]
        })
        .collect();
    let all = d(comm.all_gather(&split))?;
    let mut sums = vec![0.0f64; values.len()];
    for rank in all.chunks(split.len().max(1)) {
        for (s, pair) in sums.iter_mut().zip(rank.chunks(2)) {
            *s += f64::from(pair[0]) + f64::from(pair[1]);
        }
    }
    Ok(sums)
}

/// The batch split, as the setup line says it: "BATCH = N ranks x B", or with `--grad-accum K`
/// "BATCH = N ranks x K micro-batches x B/K".
pub(super) fn batch_split(o: &Options, world: usize) -> String {
    let local = o.batch_size / world;
    match o.grad_accum {
        1 => format!("{} = {world} ranks x {local}", o.batch_size),
        k => format!(
            "{} = {world} ranks x {k} micro-batches x {}",
            o.batch_size,
            local / k
        ),
    }
}

/// Sums `values` over the ranks.
fn sum_over_ranks(comm: &dyn Communicator, values: &[f64]) -> Result<Vec<f64>, String> {
    let mut v: Vec<f32> = values.iter().map(|&x| x as f32).collect();
    d(comm.all_reduce(&mut v, ReduceOp::Sum))?;
    Ok(v.into_iter().map(f64::from).collect())
}

/// Fails unless `--batch-size` splits into `world` ranks times `--grad-accum` micro-batches.
pub(super) fn check_batch(o: &Options, world: usize) -> Result<(), String> {
    if !o.batch_size.is_multiple_of(world * o.grad_accum) {
        let accum = match o.grad_accum {
            1 => String::new(),
            k => format!(" times --grad-accum {k}"),
        };
        return Err(format!(
            "--batch-size {} is not a multiple of the {world} ranks{accum} (each rank takes batch / ranks{})",
            o.batch_size,
            if o.grad_accum == 1 { "" } else { ", in micro-batches of batch / (ranks x grad-accum)" }
        ));
    }
    Ok(())
}

/// The MNIST job on `comm`'s ranks (see the module doc).
pub fn train(o: Options, comm: Arc<dyn Communicator>) -> Result<(), String> {
    let t0 = Instant::now();
    // On the thread that runs the model, for the whole run (evaluation included).
    let _autocast = o.precision.guard()?;
    let (rank, world) = (comm.rank(), comm.world_size());
    let lead = rank == 0;
    check_batch(&o, world)?;
    let local_batch = o.batch_size / world;
    let micro_batch = local_batch / o.grad_accum;
    let norm = || Normalize::new(&[super::MNIST_MEAN as f32], &[super::MNIST_STD as f32]);
    let train_ds: Arc<dyn Dataset> = Arc::new(limit(
        q(q(Mnist::load(&o.data, true))?.into_dataset())?,
        o.limit,
    )?);
    let test_ds: Arc<dyn Dataset> = Arc::new(limit(
        q(q(Mnist::load(&o.data, false))?.into_dataset())?,
        o.limit,
    )?);
    // The test set split across ranks without padding, so the summed counts are exact.
    let test_idx: Vec<usize> = (rank..test_ds.len()).step_by(world).collect();
    let test_loader = q(DataLoader::new(
        d(Shard::new(test_ds.clone(), test_idx))?,
        1000,
    ))?
    .transform(q(norm())?);
    let sampler = d(DistributedSampler::new(train_ds.len(), world, rank))?.seed(o.seed);
    // The same count as steps_per_epoch(loader, accum) of each epoch's loader below.
    let steps_per_epoch = sampler
        .num_samples()
        .div_ceil(micro_batch)
        .div_ceil(o.grad_accum);

    let model = build_model(&o)?;
    q(model.to_device(o.device))?;
    let mut opt = build_optimizer(&o, model.parameters())?;
    let (csv, png) = (o.out.join("metrics.csv"), o.out.join("curves.png"));
    let schedule = match o.schedule.as_str() {
        "cosine" => Some(q(CosineLr::new(
            o.lr(),
            total_steps(&o, steps_per_epoch)?,
            0.0,
        ))?),
        _ => None,
    };
    let mut rows = Vec::new();
    let mut start = 0;
    if o.resume {
        // Every rank restores model and optimizer state (the file must be readable by all).
        let r = resume(&o, &model, opt.as_mut(), &meta_of(&o, 0))?;
        start = r.epoch;
        // Rank 0 alone makes the CSV agree with the checkpoint; the others only need the rows.
        if lead {
            std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
        }
        rows = metrics::reconcile(&csv, start, r.history, lead)?;
    }
    let ddp = d(DistributedDataParallel::new(
        model,
        comm.clone(),
        DdpOptions::default(),
    ))?;
    if lead {
        std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
        if o.resume {
            super::report_resumed(&o, start);
        }
        let params = models::parameter_count(ddp.module());
        report::progress(
            "setup",
            || {
                format!(
                "training {} ({params} parameters) on {} ({} train / {} test samples) with {}, lr {}, batch {} over {}, {}, {} threads per rank; data loaded in {:.1} s",
                o.model,
                o.data.display(),
                train_ds.len(),
                test_ds.len(),
                o.optimizer,
                o.lr(),
                batch_split(&o, world),
                comm.backend(),
                o.precision.describe(),
                rayon::current_num_threads(),
                t0.elapsed().as_secs_f64()
            )
            },
            serde_json::json!({
                "task": "mnist", "model": o.model, "parameters": params, "data": report::path(&o.data),
                "train_samples": train_ds.len(), "test_samples": test_ds.len(),
                "optimizer": o.optimizer, "lr": o.lr(), "batch_size": o.batch_size,
                "grad_accum": o.grad_accum, "micro_batch": micro_batch,
                "steps_per_epoch": steps_per_epoch, "ranks": world, "backend": comm.backend().to_string(), "epochs": o.epochs,
                "threads": rayon::current_num_threads(),
            }),
        );
    }
    let backward = |l: &quill::tensor::Tensor, sync: bool| {
        if sync {
            d(ddp.backward(l))
        } else {
            let _local = ddp.no_sync();
            d(ddp.backward(l))
        }
    };
    for epoch in start + 1..=o.epochs {
        let shard = d(Shard::new(
            train_ds.clone(),
            sampler.indices(epoch as u64 - 1),
        ))?;
        let loader = q(DataLoader::new(shard, micro_batch))?
            .seed(o.seed)
            .transform(q(norm())?);
        debug_assert_eq!(
            super::steps_per_epoch(&loader, o.grad_accum),
            steps_per_epoch
        );
        let bar = if lead {
            report::bar(loader.len() as u64, format!("epoch {epoch}/{}", o.epochs))
        } else {
            ProgressBar::hidden()
        };
        let t = Instant::now();
        let (loss_sum, correct, seen) = super::train_epoch_with(
            &ddp,
            opt.as_mut(),
            &loader,
            epoch,
            schedule.as_ref().map(|s| s as &dyn LrSchedule),
            &bar,
            o.grad_accum,
            &backward,
        )?;
        bar.finish_and_clear();
        let secs = t.elapsed().as_secs_f64();
        let (test_loss, test_acc) = evaluate(&ddp, &test_loader)?;
        let n_test = test_loader.dataset().len() as f64;
        let s = sum_over_ranks(
            comm.as_ref(),
            &[
                loss_sum,
                correct as f64,
                seen as f64,
                test_loss * n_test,
                test_acc * n_test,
                n_test,
            ],
        )?;
        let row = Row {
            epoch,
            train_loss: s[0] / s[2].max(1.0),
            train_acc: s[1] / s[2].max(1.0),
            test_loss: s[3] / s[5].max(1.0),
            test_acc: s[4] / s[5].max(1.0),
            seconds: secs,
            samples_per_s: s[2] / secs,
        };
        if !lead {
            continue;
        }
        let suffix = format!(" ({world} ranks)");
        report_epoch(&o, row, &mut rows, &suffix);
        let title = format!("{} on {}{suffix}", o.model, o.data.display());
        finish_epoch(
            &o,
            ddp.module(),
            opt.as_ref(),
            &meta_of(&o, epoch),
            &rows,
            &mnist_labels(&title),
        )?;
    }
    // Nobody leaves (and finalises MPI) while rank 0 still writes.
    d(comm.barrier())?;
    if lead {
        if let Some(last) = rows.last() {
            report::result(
                "result",
                || {
                    format!(
                    "done: test accuracy {:.2}% after {} epochs on {world} ranks; {} and {} written, checkpoint {}",
                    100.0 * last.test_acc,
                    last.epoch,
                    csv.display(),
                    png.display(),
                    o.checkpoint_path().display()
                )
                },
                serde_json::json!({
                    "test_accuracy": last.test_acc, "test_loss": last.test_loss,
                    "epochs": last.epoch, "ranks": world, "metrics": report::path(&csv), "curves": report::path(&png),
                    "checkpoint": report::path(&o.checkpoint_path()),
                }),
            );
        }
    }
    Ok(())
}
