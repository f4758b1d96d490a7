//! `quill train` (the default command): trains a model on MNIST-format data (or, with
//! `--task lm`, a language model: `lm.rs`) with a progress bar per epoch, a summary line per
//! epoch, `metrics.csv`, `curves.png` and a checksummed checkpoint after every epoch, all
//! written atomically; `--resume` continues a run exactly. Before anything is built, outputs
//! that would overwrite an input or each other are refused (`paths.rs`).

mod checkpoint;
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
mod distributed;
pub(crate) mod lm;
mod memory;
mod metrics;
mod options;
mod paths;
pub(crate) mod plot;
pub(crate) mod precision;

pub use options::USAGE;

use crate::report;
use indicatif::ProgressBar;
use metrics::Row;
use options::{Options, Task};
use quill::data::{DataLoader, Dataset, Mnist, Normalize, TensorDataset};
use quill::nn::functional::{cross_entropy, Reduction};
use quill::nn::{models, Module, Sequential};
use quill::optim::{apply_schedule, Adam, AdamW, CosineLr, LrSchedule, Optimizer, Sgd};
use quill::tensor::{no_grad, Tensor};
use quill::{s, NDArray};
use std::collections::BTreeMap;
use std::time::Instant;

/// The image job's input normalisation (MNIST's pixel mean and standard deviation on [0, 1]),
/// recorded in every checkpoint so `evaluate` and `predict` apply the same.
pub(crate) use quill::infer::{MNIST_MEAN, MNIST_STD};

/// A quill error as the CLI's error string.
pub(crate) fn q<T>(r: quill::Result<T>) -> Result<T, String> {
    r.map_err(|e| e.to_string())
}

fn build_model(o: &Options) -> Result<Sequential, String> {
    quill::infer::image_model(&o.model, o.seed)
        .map_err(|_| format!("--model {} is not available", o.model))
}

fn build_optimizer(o: &Options, params: Vec<Tensor>) -> Result<Box<dyn Optimizer>, String> {
    let lr = o.lr();
    Ok(match o.optimizer.as_str() {
        "sgd" => {
            let sgd = q(Sgd::new(params, lr))?;
            let sgd = q(q(sgd.momentum(0.9))?.nesterov(true))?;
            Box::new(q(sgd.weight_decay(o.weight_decay))?)
        }
        "adamw" => Box::new(q(q(AdamW::new(params, lr))?.weight_decay(o.weight_decay))?),
        _ => Box::new(q(q(Adam::new(params, lr))?.weight_decay(o.weight_decay))?),
    })
}

/// Mean loss and accuracy of `model` over `loader`'s epoch 0 (no shuffling, eval mode).
fn evaluate(model: &dyn Module, loader: &DataLoader) -> Result<(f64, f64), String> {
    let _g = no_grad();
    let dev = device_of(model);
    model.eval();
    let (mut loss, mut correct, mut n) = (0.0, 0usize, 0usize);
    for batch in loader.epoch(0) {
        let (x, y) = q(batch)?;
        let (x, y) = (q(x.to_device(dev))?, q(y.to_device(dev))?);
        let logits = q(model.forward(&Tensor::new(x)))?;
        let l = q(cross_entropy(&logits, &y, 0.0, Reduction::Sum))?;
        loss += q(l.item())?;
        correct += count_correct(&logits, &y)?;
        n += y.numel();
    }
    model.train();
    Ok((loss / n.max(1) as f64, correct as f64 / n.max(1) as f64))
}

/// Where the model's parameters live (batches go there).
fn device_of(model: &dyn Module) -> quill::Device {
    model
        .parameters()
        .first()
        .map_or(quill::Device::Cpu, |p| p.device())
}

fn count_correct(logits: &Tensor, y: &NDArray) -> Result<usize, String> {
    let pred = q(logits.array().argmax(Some(1), false))?;
    let hits = q(q(pred.eq(y))?.sum(None, false))?;
    Ok(q(hits.item::<i64>())? as usize)
}

fn meta_of(o: &Options, epoch: usize) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("epoch".to_string(), epoch.to_string()),
        ("model".to_string(), o.model.clone()),
        ("optimizer".to_string(), o.optimizer.clone()),
        ("seed".to_string(), o.seed.to_string()),
        ("batch_size".to_string(), o.batch_size.to_string()),
        ("input_shape".to_string(), "1,28,28".to_string()),
        ("classes".to_string(), "10".to_string()),
        ("normalize_mean".to_string(), MNIST_MEAN.to_string()),
        ("normalize_std".to_string(), MNIST_STD.to_string()),
    ])
}

/// The first `n` samples of `ds` (all when `None`).
fn limit(ds: TensorDataset, n: Option<usize>) -> Result<TensorDataset, String> {
    let Some(n) = n else { return Ok(ds) };
    let n = n.min(ds.inputs().shape()[0]) as isize;
    q(TensorDataset::new(
        q(ds.inputs().slice(&s![..n]))?,
        q(ds.targets().slice(&s![..n]))?,
    ))
}

/// One epoch of training; returns (summed loss, correct predictions, samples).
pub fn train_epoch(
    model: &dyn Module,
    opt: &mut dyn Optimizer,
    loader: &DataLoader,
    epoch: usize,
    schedule: Option<&dyn LrSchedule>,
    bar: &ProgressBar,
) -> Result<(f64, usize, usize), String> {
    train_epoch_with(model, opt, loader, epoch, schedule, bar, 1, &|l, _| {
        q(l.backward())
    })
}

/// Optimizer steps in an epoch of `loader` whose batches are micro-batches, `accum` per step.
pub(crate) fn steps_per_epoch(loader: &DataLoader, accum: usize) -> usize {
    loader.len().div_ceil(accum)
}

/// `train_epoch` with the backward pass given (data-parallel training averages the gradients
/// across ranks in it) and gradient accumulation: `loader`'s batches are micro-batches, `accum`
/// of them (fewer at the end of an epoch) make one optimizer step. Each micro-batch's mean loss
/// is weighted by its share of the step's samples before `backward(loss, sync)`, so the summed
/// gradient is that of the step's mean loss (the batch of `accum` micro-batches, up to float
/// rounding, for a model without batch statistics or dropout); `sync` is true for the step's
/// last micro-batch only (the one whose backward may communicate).
#[allow(clippy::too_many_arguments)]
pub(crate) fn train_epoch_with(
    model: &dyn Module,
    opt: &mut dyn Optimizer,
    loader: &DataLoader,
    epoch: usize,
    schedule: Option<&dyn LrSchedule>,
    bar: &ProgressBar,
    accum: usize,
    backward: &dyn Fn(&Tensor, bool) -> Result<(), String>,
) -> Result<(f64, usize, usize), String> {
    let t = Instant::now();
    let (mut loss_sum, mut correct, mut seen) = (0.0, 0usize, 0usize);
    model.train();
    let accum = accum.max(1);
    let first_step = (epoch - 1) * steps_per_epoch(loader, accum);
    let (micro_batches, samples) = (loader.len(), loader.dataset().len());
    let step_samples = loader.batch_size() * accum;
    let dev = device_of(model);
    for (i, batch) in loader.epoch(epoch as u64 - 1).enumerate() {
        let (step, j) = (i / accum, i % accum);
        let last = j + 1 == accum || i + 1 == micro_batches;
        if j == 0 {
            if let Some(sc) = schedule {
                apply_schedule(opt, sc, first_step + step);
            }
            opt.zero_grad();
        }
        let (x, y) = q(batch)?;
        let (x, y) = (q(x.to_device(dev))?, q(y.to_device(dev))?);
        let logits = q(model.forward(&Tensor::new(x)))?;
        let loss = q(cross_entropy(&logits, &y, 0.0, Reduction::Mean))?;
        let n = y.numel();
        if accum == 1 {
            backward(&loss, true)?;
        } else {
            // This step's samples: a whole step, or what the epoch has left.
            let in_step = step_samples.min(samples - step * step_samples);
            backward(&q(loss.mul_scalar(n as f64 / in_step as f64))?, last)?;
        }
        if last {
            q(opt.step())?;
        }
        loss_sum += q(loss.item())? * n as f64;
        correct += count_correct(&logits, &y)?;
        seen += n;
        bar.inc(1);
        bar.set_message(format!(
            "loss {:.4} acc {:.2}% {:.0} samples/s",
            loss_sum / seen as f64,
            100.0 * correct as f64 / seen as f64,
            seen as f64 / t.elapsed().as_secs_f64()
        ));
    }
    Ok((loss_sum, correct, seen))
}

/// The training set loader, model and optimizer the main job uses with default options and
/// `--model model` ("mlp" or "cnn"), for `bench`.
pub fn default_setup(model: &str) -> Result<(Sequential, Box<dyn Optimizer>, DataLoader), String> {
    let o = Options {
        model: model.into(),
        ..Options::default()
    };
    let train = q(Mnist::load(&o.data, true))?;
    let loader = q(DataLoader::new(q(train.into_dataset())?, o.batch_size))?
        .shuffle(true)
        .seed(o.seed)
        .transform(q(Normalize::new(
            &[MNIST_MEAN as f32],
            &[MNIST_STD as f32],
        ))?);
    let model = build_model(&o)?;
    let opt = build_optimizer(&o, model.parameters())?;
    Ok((model, opt, loader))
}

pub fn run(args: &[String]) -> Result<(), String> {
    let o = Options::parse(args).map_err(|e| format!("{e}\n{USAGE}"))?;
    if let Some(t) = o.threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build_global()
            .map_err(|e| format!("--threads: {e}"))?;
    }
    paths::check(&o)?;
    // A checkpoint directory that cannot be made fails now, not after the first epoch.
    if let Some(dir) = o
        .checkpoint_path()
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("--checkpoint: cannot create {}: {e}", dir.display()))?;
    }
    if o.distributed {
        return distributed::run(o);
    }
    match o.task {
        Task::Lm => quill::in_pool(move || lm::run(o, None)),
        Task::Mnist => quill::in_pool(move || train(o)),
    }
}

/// Says that a run resumed from its checkpoint after epoch `start`.
pub(super) fn report_resumed(o: &Options, start: usize) {
    report::progress(
        "resumed",
        || {
            format!(
                "resumed from {} after epoch {start}",
                o.checkpoint_path().display()
            )
        },
        serde_json::json!({"checkpoint": report::path(&o.checkpoint_path()), "epoch": start}),
    );
}

/// Prints one finished epoch and appends it to `rows`; `suffix` follows the numbers (e.g.
/// " (2 ranks)").
pub(super) fn report_epoch(o: &Options, row: Row, rows: &mut Vec<Row>, suffix: &str) {
    report::progress(
        "epoch",
        || {
            format!(
            "epoch {}/{}: train loss {:.4} acc {:.2}% | test loss {:.4} acc {:.2}% | {:.1} s, {:.0} samples/s{suffix}",
            row.epoch,
            o.epochs,
            row.train_loss,
            100.0 * row.train_acc,
            row.test_loss,
            100.0 * row.test_acc,
            row.seconds,
            row.samples_per_s
        )
        },
        row.json(),
    );
    rows.push(row);
}

/// " accumulated over N micro-batches" after the batch size when `--grad-accum` N is above 1,
/// else nothing.
pub(super) fn accum_note(o: &Options) -> String {
    match o.grad_accum {
        1 => String::new(),
        n => format!(" accumulated over {n} micro-batches"),
    }
}

/// The plot's labels for the image job.
fn mnist_labels(title: &str) -> plot::Labels<'_> {
    plot::Labels {
        title,
        held_out: "test",
        loss: "cross-entropy loss",
        accuracy: "accuracy (%)",
    }
}

/// After an epoch: the checkpoint (with `rows` as its history), then `metrics.csv` and the
/// plots, each atomically. The checkpoint goes first so that a crash in between leaves the CSV
/// behind the checkpoint, never ahead, and `--resume` rebuilds it from the history.
pub(super) fn finish_epoch(
    o: &Options,
    model: &dyn Module,
    opt: &dyn Optimizer,
    meta: &BTreeMap<String, String>,
    rows: &[Row],
    labels: &plot::Labels,
) -> Result<(), String> {
    checkpoint::save(o, model, opt, meta, rows)?;
    metrics::write_csv(&o.out.join("metrics.csv"), rows)?;
    plot::write(&o.out.join("curves.png"), rows, labels)
}

/// `epochs * steps_per_epoch`, the schedule's length, or an error naming `--epochs`.
pub(super) fn total_steps(o: &Options, steps_per_epoch: usize) -> Result<usize, String> {
    o.epochs.checked_mul(steps_per_epoch).ok_or_else(|| {
        format!(
            "--epochs {} times {steps_per_epoch} steps per epoch overflows",
            o.epochs
        )
    })
}

fn train(o: Options) -> Result<(), String> {
    let t0 = Instant::now();
    // On the thread that runs the model, for the whole run (evaluation included).
    let _autocast = o.precision.guard()?;
    let norm = || Normalize::new(&[MNIST_MEAN as f32], &[MNIST_STD as f32]);
    let train = q(Mnist::load(&o.data, true))?;
    let test = q(Mnist::load(&o.data, false))?;
    let train_ds = limit(q(train.into_dataset())?, o.limit)?;
    let test_ds = limit(q(test.into_dataset())?, o.limit)?;
    for (split, n) in [("training", train_ds.len()), ("test", test_ds.len())] {
        if n == 0 {
            return Err(format!(
                "--data {}: the {split} split has no samples",
                o.data.display()
            ));
        }
    }
    // With --grad-accum N the loader yields micro-batches of batch / N; the shuffled order is the
    // same whatever the batch size, so N consecutive micro-batches make up one --batch-size batch.
    let loader = q(DataLoader::new(train_ds, o.batch_size / o.grad_accum))?
        .shuffle(true)
        .seed(o.seed)
        .transform(q(norm())?);
    let test_loader = q(DataLoader::new(test_ds, 1000))?.transform(q(norm())?);
    let model = build_model(&o)?;
    q(model.to_device(o.device))?;
    let mut opt = build_optimizer(&o, model.parameters())?;
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    let (csv, png) = (o.out.join("metrics.csv"), o.out.join("curves.png"));
    // Cosine decay from the base rate to 0 over every step of the run.
    let schedule = match o.schedule.as_str() {
        "cosine" => Some(q(CosineLr::new(
            o.lr(),
            total_steps(&o, steps_per_epoch(&loader, o.grad_accum))?,
            0.0,
        ))?),
        _ => None,
    };
    let mut rows = Vec::new();
    let mut start = 0;
    if o.resume {
        let r = checkpoint::resume(&o, &model, opt.as_mut(), &meta_of(&o, 0))?;
        start = r.epoch;
        rows = metrics::reconcile(&csv, start, r.history, true)?;
        report_resumed(&o, start);
    }
    let params = models::parameter_count(&model);
    let (n_train, n_test) = (loader.dataset().len(), test_loader.dataset().len());
    report::progress(
        "setup",
        || {
            format!(
            "training {} ({params} parameters) on {} ({n_train} train / {n_test} test samples) with {}, lr {}, batch {}{}, {}, {} threads; data loaded in {:.1} s",
            o.model,
            o.data.display(),
            o.optimizer,
            o.lr(),
            o.batch_size,
            accum_note(&o),
            o.precision.describe(),
            rayon::current_num_threads(),
            t0.elapsed().as_secs_f64()
        )
        },
        serde_json::json!({
            "task": "mnist", "model": o.model, "parameters": params, "data": report::path(&o.data),
            "train_samples": n_train, "test_samples": n_test, "optimizer": o.optimizer,
            "lr": o.lr(), "batch_size": o.batch_size, "grad_accum": o.grad_accum,
            "micro_batch": loader.batch_size(),
            "steps_per_epoch": steps_per_epoch(&loader, o.grad_accum), "epochs": o.epochs,
            "threads": rayon::current_num_threads(), "precision": o.precision.name(),
        }),
    );
    for epoch in start + 1..=o.epochs {
        let bar = report::bar(loader.len() as u64, format!("epoch {epoch}/{}", o.epochs));
        let t = Instant::now();
        let (loss_sum, correct, seen) = train_epoch_with(
            &model,
            opt.as_mut(),
            &loader,
            epoch,
            schedule.as_ref().map(|s| s as &dyn LrSchedule),
            &bar,
            o.grad_accum,
            &|l, _| q(l.backward()),
        )?;
        bar.finish_and_clear();
        let secs = t.elapsed().as_secs_f64();
        let (test_loss, test_acc) = evaluate(&model, &test_loader)?;
        let row = Row {
            epoch,
            train_loss: loss_sum / seen.max(1) as f64,
            train_acc: correct as f64 / seen.max(1) as f64,
            test_loss,
            test_acc,
            seconds: secs,
            samples_per_s: seen as f64 / secs,
        };
        report_epoch(&o, row, &mut rows, "");
        let title = format!("{} on {}", o.model, o.data.display());
        finish_epoch(
            &o,
            &model,
            opt.as_ref(),
            &meta_of(&o, epoch),
            &rows,
            &mnist_labels(&title),
        )?;
    }
    if let Some(last) = rows.last() {
        report::result(
            "result",
            || {
                format!(
                    "done: test accuracy {:.2}% after {} epochs; {} and {} written, checkpoint {}",
                    100.0 * last.test_acc,
                    last.epoch,
                    csv.display(),
                    png.display(),
                    o.checkpoint_path().display()
                )
            },
            serde_json::json!({
                "test_accuracy": last.test_acc, "test_loss": last.test_loss,
                "epochs": last.epoch, "metrics": report::path(&csv), "curves": report::path(&png),
                "checkpoint": report::path(&o.checkpoint_path()),
            }),
        );
    }
    report_host_round_trips(o.device);
    Ok(())
}

/// On a GPU, the ops that ran on the host because the backend had no kernel for them, and how
/// often (`quill::host_round_trips`): what the next GPU work must drive to zero.
pub(crate) fn report_host_round_trips(device: quill::Device) {
    if device == quill::Device::Cpu {
        return;
    }
    let trips = quill::host_round_trips();
    let total: u64 = trips.iter().map(|(_, n)| n).sum();
    let list: Vec<String> = trips.iter().map(|(op, n)| format!("{op} {n}")).collect();
    let by_op: serde_json::Map<String, serde_json::Value> = trips
        .iter()
        .map(|(op, n)| (op.to_string(), (*n).into()))
        .collect();
    report::progress(
        "host_round_trips",
        || match total {
            0 => format!("host round trips: none (every op ran on {device})"),
            _ => format!(
                "host round trips: {total} (ops without a {device} kernel, run on host copies: {})",
                list.join(", ")
            ),
        },
        serde_json::json!({"device": device.to_string(), "total": total, "ops": by_op}),
    );
}
