//! The options of `quill train`, parsed by hand (a dozen flags do not need a parser crate);
//! every bad value names the flag and what it accepts.

use std::path::PathBuf;

pub const USAGE: &str = "usage: quill [train] [options]
  --model mlp|cnn          model (default mlp: needle's MLPResNet, hidden 512, 3 blocks;
                           cnn: 2 conv blocks, slow on CPU today: ~2.5 min per epoch)
  --epochs N               epochs (default 8)
  --batch-size N           batch size (default 128)
  --lr X                   learning rate (default 0.001 for adam/adamw, 0.05 for sgd)
  --optimizer adam|adamw|sgd   optimizer (default adam; sgd uses momentum 0.9, nesterov)
  --schedule cosine|none   learning-rate schedule over all steps (default cosine, to 0)
  --weight-decay X         weight decay (default 0.0001)
  --seed N                 seed for init, shuffling and dropout (default 0)
  --data DIR               dataset directory with the four IDX .gz files (default data/mnist;
                           data/fashion-mnist works too)
  --threads N              worker threads (default: all cores)
  --device cpu|cuda|cuda:N where the model trains (default cpu; cuda needs a build with
                           `--features cuda` and an NVIDIA GPU)
  --out DIR                where metrics.csv, curves.png and the checkpoint go (default runs)
  --checkpoint PATH        checkpoint file (default OUT/checkpoint.safetensors)
  --resume                 continue from the checkpoint
  --limit N                use only the first N train and test samples (quick runs)";

#[derive(Clone, Debug)]
pub struct Options {
    pub model: String,
    pub epochs: usize,
    pub batch_size: usize,
    pub lr: Option<f64>,
    pub optimizer: String,
    pub schedule: String,
    pub weight_decay: f64,
    pub seed: u64,
    pub data: PathBuf,
    pub threads: Option<usize>,
    pub device: quill::Device,
    pub out: PathBuf,
    pub checkpoint: Option<PathBuf>,
    pub resume: bool,
    pub limit: Option<usize>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            model: "mlp".into(),
            epochs: 8,
            batch_size: 128,
            lr: None,
            optimizer: "adam".into(),
            schedule: "cosine".into(),
            weight_decay: 1e-4,
            seed: 0,
            data: "data/mnist".into(),
            threads: None,
            device: quill::Device::Cpu,
            out: "runs".into(),
            checkpoint: None,
            resume: false,
            limit: None,
        }
    }
}

fn value<T: std::str::FromStr>(flag: &str, v: Option<&String>, what: &str) -> Result<T, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value ({what})"))?;
    v.parse()
        .map_err(|_| format!("{flag}: '{v}' is not {what}"))
}

impl Options {
    pub fn parse(args: &[String]) -> Result<Options, String> {
        let mut o = Options::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--model" => {
                    o.model = value(a, it.next(), "mlp or cnn")?;
                    if o.model != "mlp" && o.model != "cnn" {
                        return Err(format!("--model: '{}' is not mlp or cnn", o.model));
                    }
                }
                "--epochs" => o.epochs = value(a, it.next(), "a whole number")?,
                "--batch-size" => {
                    o.batch_size = value(a, it.next(), "a whole number")?;
                    if o.batch_size == 0 {
                        return Err("--batch-size must be at least 1".into());
                    }
                }
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
                "--weight-decay" => o.weight_decay = value(a, it.next(), "a number")?,
                "--seed" => o.seed = value(a, it.next(), "a whole number")?,
                "--data" => o.data = value(a, it.next(), "a directory")?,
                "--threads" => {
                    let n: usize = value(a, it.next(), "a whole number")?;
                    if n == 0 {
                        return Err("--threads must be at least 1".into());
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
                "--limit" => o.limit = Some(value(a, it.next(), "a whole number")?),
                other => return Err(format!("unknown option '{other}'")),
            }
        }
        Ok(o)
    }

    pub fn lr(&self) -> f64 {
        self.lr
            .unwrap_or(if self.optimizer == "sgd" { 0.05 } else { 1e-3 })
    }

    pub fn checkpoint_path(&self) -> PathBuf {
        self.checkpoint
            .clone()
            .unwrap_or_else(|| self.out.join("checkpoint.safetensors"))
    }
}
