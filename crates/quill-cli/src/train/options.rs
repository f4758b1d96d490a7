//! The options of `quill train`, parsed by hand (a dozen flags do not need a parser crate);
//! every bad value names the flag and what it accepts.

use super::precision::Precision;
use std::path::PathBuf;

pub const USAGE: &str = "usage: quill [train] [options]
  --task mnist|lm          the job (default mnist: image classification; lm: a language
                           model on a text corpus, default data/kjv, reported in perplexity)
  --model NAME             mnist: mlp|cnn (default mlp: needle's MLPResNet, hidden 512,
                           3 blocks; cnn: 2 conv-BN-ReLU-pool blocks, 207k weights);
                           lm: lstm|gru|rnn|transformer (default lstm)
  --epochs N               epochs, 1 to 1000000 (default 8; lm: 2)
  --batch-size N           batch size (default 128; lm: 32 parallel streams)
  --grad-accum N           accumulate gradients over N micro-batches of BATCH/N (with
                           --distributed, BATCH/(ranks*N) per rank) before each optimizer
                           step, so the step's batch stays --batch-size (default 1)
  --lr X                   learning rate (default 0.001 for adam/adamw, 0.05 for sgd;
                           lm: 0.002 / 1.0)
  --optimizer adam|adamw|sgd   optimizer (default adam; sgd uses momentum 0.9, nesterov)
  --schedule cosine|none   learning-rate schedule over all steps (default cosine, to 0)
  --precision f32|bf16     arithmetic (default f32; bf16: mixed precision through autocast:
                           matmul and attention in bf16 with f32 accumulation; conv, norms,
                           softmax and losses in f32; f32 weights and optimizer state)
  --weight-decay X         weight decay (default 0.0001)
  --seed N                 seed for init, shuffling and dropout (default 0)
  --data DIR               dataset directory with the four IDX .gz files (default data/mnist;
                           data/fashion-mnist works too)
  --threads N              worker threads (default: all cores)
  --device cpu|cuda|cuda:N where the model trains (default cpu; cuda needs a build with
                           `--features cuda` and an NVIDIA GPU)
  --out DIR                where metrics.csv, curves.png and the checkpoint go (default runs)
  --checkpoint PATH        checkpoint file (default OUT/checkpoint.safetensors)
  --resume                 continue from the checkpoint (its dtypes, shapes, checksums and
                           metadata are checked; metrics.csv is rebuilt from it if a crash
                           left the CSV behind or ahead)
  --allow-nonfinite        with --resume, accept a checkpoint holding NaN or infinite values
  --distributed            data-parallel training over MPI: launch with
                           `mpirun -np N quill train --distributed ...` (needs a build with
                           `--features mpi`); each rank trains on its shard with batch
                           BATCH/N, so the global batch stays --batch-size; rank 0 prints,
                           writes the CSV, plots and checkpoints (both tasks; lm: each rank
                           trains its own BATCH/N of the parallel streams)
  --dist-backend mpi|nccl  how gradients travel with --distributed (default mpi; nccl needs a
                           build with `--features nccl`, one GPU per rank, and bootstraps over
                           MPI; with --device cuda each rank takes its node-local GPU)
  --limit N                use only the first N train and test samples (lm: lines of each
                           split) (quick runs)
 language-model options (--task lm):
  --tokens char|word       tokenisation (default char)
  --bptt N                 tokens per truncated-backprop window (default 64)
  --embedding N            embedding size (default 128)
  --hidden N               hidden size of the sequence model (default 256)
  --layers N               layers of the sequence model (default 2)
  --clip X                 clip the gradient norm to X, 0 = off (default 1)";

/// The most epochs a run may ask for (and a checkpoint may record): far above any real run,
/// low enough that epochs times steps never overflows.
pub const MAX_EPOCHS: usize = 1_000_000;

/// The most worker threads `--threads` may ask for.
const MAX_THREADS: usize = 4096;

/// Which job `quill train` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Task {
    Mnist,
    Lm,
}

#[derive(Clone, Debug)]
pub struct Options {
    pub task: Task,
    pub model: String,
    pub epochs: usize,
    pub batch_size: usize,
    /// `--grad-accum`: micro-batches per optimizer step (1: no accumulation).
    pub grad_accum: usize,
    pub lr: Option<f64>,
    pub optimizer: String,
    pub schedule: String,
    /// `--precision`: f32, or bf16 autocast.
    pub precision: Precision,
    pub weight_decay: f64,
    pub seed: u64,
    pub data: PathBuf,
    pub threads: Option<usize>,
    pub device: quill::Device,
    pub out: PathBuf,
    pub checkpoint: Option<PathBuf>,
    pub resume: bool,
    /// `--allow-nonfinite`: resume from a checkpoint holding NaN or infinite values.
    pub allow_nonfinite: bool,
    pub limit: Option<usize>,
    pub distributed: bool,
    /// `--dist-backend`: "mpi" or "nccl".
    pub dist_backend: String,
    pub tokens: String,
    pub bptt: usize,
    pub embedding: usize,
    pub hidden: usize,
    pub layers: usize,
    pub clip: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            task: Task::Mnist,
            model: "mlp".into(),
            epochs: 8,
            batch_size: 128,
            grad_accum: 1,
            lr: None,
            optimizer: "adam".into(),
            schedule: "cosine".into(),
            precision: Precision::F32,
            weight_decay: 1e-4,
            seed: 0,
            data: "data/mnist".into(),
            threads: None,
            device: quill::Device::Cpu,
            out: "runs".into(),
            checkpoint: None,
            resume: false,
            allow_nonfinite: false,
            limit: None,
            distributed: false,
            dist_backend: "mpi".into(),
            tokens: "char".into(),
            bptt: 64,
            embedding: 128,
            hidden: 256,
            layers: 2,
            clip: 1.0,
        }
    }
}

/// A whole number of at least 1.
fn positive(flag: &str, v: Option<&String>) -> Result<usize, String> {
    let n: usize = value(flag, v, "a whole number")?;
    if n == 0 {
        return Err(format!("{flag} must be at least 1"));
    }
    Ok(n)
}

fn value<T: std::str::FromStr>(flag: &str, v: Option<&String>, what: &str) -> Result<T, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value ({what})"))?;
    v.parse()
        .map_err(|_| format!("{flag}: '{v}' is not {what}"))
}

impl Options {
    pub fn parse(args: &[String]) -> Result<Options, String> {
        let mut o = Options::default();
        let (mut model, mut data, mut batch, mut epochs) = (None, None, None, None);
        let mut backend_given = false;
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--task" => {
                    o.task = match value::<String>(a, it.next(), "mnist or lm")?.as_str() {
                        "mnist" => Task::Mnist,
                        "lm" => Task::Lm,
                        other => return Err(format!("--task: '{other}' is not mnist or lm")),
                    }
                }
                "--model" => model = Some(value::<String>(a, it.next(), "a model name")?),
                "--tokens" => {
                    o.tokens = value(a, it.next(), "char or word")?;
                    if o.tokens != "char" && o.tokens != "word" {
                        return Err(format!("--tokens: '{}' is not char or word", o.tokens));
                    }
                }
                "--bptt" => o.bptt = positive(a, it.next())?,
                "--embedding" => o.embedding = positive(a, it.next())?,
                "--hidden" => o.hidden = positive(a, it.next())?,
                "--layers" => o.layers = positive(a, it.next())?,
                "--clip" => {
                    o.clip = value(a, it.next(), "a number")?;
                    if !(o.clip >= 0.0 && o.clip.is_finite()) {
                        return Err(format!(
                            "--clip must be 0 (off) or positive, got {}",
                            o.clip
                        ));
                    }
                }
                "--epochs" => {
                    let n = positive(a, it.next())?;
                    if n > MAX_EPOCHS {
                        return Err(format!("--epochs {n} is over the {MAX_EPOCHS} allowed"));
                    }
                    epochs = Some(n);
                }
                "--batch-size" => batch = Some(positive(a, it.next())?),
                "--grad-accum" => o.grad_accum = positive(a, it.next())?,
                "--lr" => {
                    let lr: f64 = value(a, it.next(), "a number")?;
                    if !(lr > 0.0 && lr.is_finite()) {
                        return Err(format!("--lr must be a positive number, got {lr}"));
                    }
                    o.lr = Some(lr);
                }
                "--optimizer" => {
                    o.optimizer = value(a, it.next(), "adam, adamw or sgd")?;
                    if !["adam", "adamw", "sgd"].contains(&o.optimizer.as_str()) {
                        return Err(format!(
                            "--optimizer: '{}' is not adam, adamw or sgd",
                            o.optimizer
                        ));
                    }
                }
                "--schedule" => {
                    o.schedule = value(a, it.next(), "cosine or none")?;
                    if o.schedule != "cosine" && o.schedule != "none" {
                        return Err(format!(
                            "--schedule: '{}' is not cosine or none",
                            o.schedule
                        ));
                    }
                }
                "--precision" => {
                    let v: String = value(a, it.next(), "f32 or bf16")?;
                    o.precision = Precision::parse(a, &v)?;
                }
                "--weight-decay" => {
                    o.weight_decay = value(a, it.next(), "a number")?;
                    if !(o.weight_decay >= 0.0 && o.weight_decay.is_finite()) {
                        return Err(format!(
                            "--weight-decay must be 0 or a positive number, got {}",
                            o.weight_decay
                        ));
                    }
                }
                "--seed" => o.seed = value(a, it.next(), "a whole number")?,
                "--data" => data = Some(value(a, it.next(), "a directory")?),
                "--threads" => {
                    let n = positive(a, it.next())?;
                    if n > MAX_THREADS {
                        return Err(format!("--threads {n} is over the {MAX_THREADS} allowed"));
                    }
                    o.threads = Some(n);
                }
                "--device" => {
                    let d: String = value(a, it.next(), "cpu, cuda or cuda:N")?;
                    o.device = quill::Device::parse(&d)
                        .ok_or_else(|| format!("--device: '{d}' is not cpu, cuda or cuda:N"))?;
                }
                "--out" => o.out = value(a, it.next(), "a directory")?,
                "--checkpoint" => o.checkpoint = Some(value(a, it.next(), "a file path")?),
                "--resume" => o.resume = true,
                "--allow-nonfinite" => o.allow_nonfinite = true,
                "--distributed" => o.distributed = true,
                "--dist-backend" => {
                    let b: String = value(a, it.next(), "mpi or nccl")?;
                    if b != "mpi" && b != "nccl" {
                        return Err(format!("--dist-backend: '{b}' is not mpi or nccl"));
                    }
                    o.dist_backend = b;
                    backend_given = true;
                }
                "--limit" => o.limit = Some(positive(a, it.next())?),
                other => return Err(format!("unknown option '{other}'")),
            }
        }
        if backend_given && !o.distributed {
            return Err(format!(
                "--dist-backend {} only applies with --distributed",
                o.dist_backend
            ));
        }
        if o.allow_nonfinite && !o.resume {
            return Err("--allow-nonfinite only applies with --resume".into());
        }
        // Per-task defaults: (models, model, data, batch size, epochs).
        type Defaults = (
            &'static [&'static str],
            &'static str,
            &'static str,
            usize,
            usize,
        );
        let (models, default_model, default_data, default_batch, default_epochs): Defaults =
            match o.task {
                Task::Mnist => (&["mlp", "cnn"], "mlp", "data/mnist", 128, 8),
                Task::Lm => (
                    &["lstm", "gru", "rnn", "transformer"],
                    "lstm",
                    "data/kjv",
                    32,
                    2,
                ),
            };
        o.epochs = epochs.unwrap_or(default_epochs);
        o.model = model.unwrap_or_else(|| default_model.into());
        if !models.contains(&o.model.as_str()) {
            return Err(format!(
                "--model: '{}' is not one of {} for --task {}",
                o.model,
                models.join(", "),
                if o.task == Task::Lm { "lm" } else { "mnist" }
            ));
        }
        o.data = data.unwrap_or_else(|| default_data.into());
        o.batch_size = batch.unwrap_or(default_batch);
        if !o.batch_size.is_multiple_of(o.grad_accum) {
            return Err(format!(
                "--batch-size {} is not a multiple of --grad-accum {} (each step is {} \
                 micro-batches of batch / {})",
                o.batch_size, o.grad_accum, o.grad_accum, o.grad_accum
            ));
        }
        Ok(o)
    }

    pub fn lr(&self) -> f64 {
        self.lr
            .unwrap_or(match (self.task, self.optimizer.as_str()) {
                (Task::Lm, "sgd") => 1.0,
                (Task::Lm, _) => 2e-3,
                (_, "sgd") => 0.05,
                _ => 1e-3,
            })
    }

    pub fn checkpoint_path(&self) -> PathBuf {
        self.checkpoint
            .clone()
            .unwrap_or_else(|| self.out.join("checkpoint.safetensors"))
    }
}
