//! `quill train --task lm`: a language model (embedding -> LSTM / GRU / RNN / Transformer ->
//! linear) on a text corpus (default data/kjv, character tokens), trained with truncated
//! backpropagation through time. The same progress bar, CSV, curves and atomic checkpoints as
//! the image job; quality is reported as perplexity against the unigram baseline.
//!
//! The corpus is `batchify`'d into `--batch-size` parallel streams (columns), each carrying its
//! own recurrent state from one `--bptt` window to the next; a step is one window of every
//! stream. Those columns are what gets split:
//! - `--grad-accum K`: the step's streams are cut into K blocks of `batch / K` columns, each a
//!   micro-batch with its own carried state; each micro-batch's mean loss is scaled by 1 / K (all
//!   hold the same number of tokens), so the summed gradient is the whole batch's up to float
//!   rounding (the model has no dropout or batch statistics), and the optimizer steps once.
//! - `--distributed` over N ranks: rank r owns the contiguous block of `batch / N` streams
//!   starting at column `r * batch / N` (with K, its K micro-batches are the consecutive blocks of
//!   `batch / (N K)` inside it), so the ranks' data is disjoint and together they train exactly
//!   the single-process batch; `DistributedDataParallel` averages the gradients (its `no_sync`
//!   for all but a step's last micro-batch), so every rank steps with the gradient of the global
//!   batch's mean loss. The evaluation streams are split across the ranks in the same way and the
//!   summed loss, correct guesses and token counts travel exactly (`sum_f64_over_ranks`). Rank 0
//!   alone prints, samples text, and writes the CSV, the plot and the checkpoint; every rank
//!   reads the checkpoint on `--resume` (any number of ranks).

use super::distributed::{batch_split, check_batch, d, sum_f64_over_ranks};
use super::metrics::{self, Row};
use super::options::Options;
use super::plot;
use super::{accum_note, build_optimizer, checkpoint, finish_epoch, memory, q, total_steps};
use crate::report;
use indicatif::ProgressBar;
use quill::data::{batchify, get_batch, unigram_perplexity, Corpus, Tokenizer};
use quill::nn::functional::{cross_entropy, Reduction};
use quill::nn::models::{parameter_count, LanguageModel, SeqKind, SeqState};
use quill::nn::Module;
use quill::optim::{apply_schedule, clip_grad_norm, CosineLr, LrSchedule};
use quill::tensor::{no_grad, Tensor};
use quill::{s, NDArray};
use quill_dist::{Communicator, DdpOptions, DistributedDataParallel};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// Streams the evaluation splits are cut into (needle's word_language_model uses 10).
const EVAL_BATCH: usize = 10;

/// The sequence model a `--model` name stands for.
fn kind(o: &Options) -> Result<SeqKind, String> {
    quill::infer::seq_kind(&o.model)
        .map_err(|_| format!("--model {} is not a sequence model", o.model))
}

fn meta_of(o: &Options, epoch: usize, vocab: usize) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("task".to_string(), "lm".to_string()),
        ("epoch".to_string(), epoch.to_string()),
        ("model".to_string(), o.model.clone()),
        ("optimizer".to_string(), o.optimizer.clone()),
        ("seed".to_string(), o.seed.to_string()),
        ("batch_size".to_string(), o.batch_size.to_string()),
        ("tokens".to_string(), o.tokens.clone()),
        ("vocab".to_string(), vocab.to_string()),
        ("bptt".to_string(), o.bptt.to_string()),
    ])
}

/// `meta` plus what rebuilds the model and its tokenizer from the checkpoint alone (`quill
/// generate`): the sizes and the vocabulary in id order, each token as hex UTF-8, space
/// separated. Kept out of `meta_of`, which a resume compares, so older checkpoints still resume.
fn with_config(
    mut meta: BTreeMap<String, String>,
    o: &Options,
    dict: &quill::data::Dictionary,
) -> BTreeMap<String, String> {
    let hex = |w: &str| w.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    let words: Vec<String> = (0..dict.len())
        .filter_map(|i| dict.word(i).map(hex))
        .collect();
    meta.insert("embedding".into(), o.embedding.to_string());
    meta.insert("hidden".into(), o.hidden.to_string());
    meta.insert("layers".into(), o.layers.to_string());
    meta.insert("vocabulary".into(), words.join(" "));
    meta
}

/// A short sample of the model's text after an epoch (`quill generate` does more), on one line:
/// line ends show as " | ".
fn print_sample(
    model: &LanguageModel,
    dict: &quill::data::Dictionary,
    o: &Options,
) -> Result<(), String> {
    let words: Vec<String> = (0..dict.len())
        .filter_map(|i| dict.word(i).map(str::to_string))
        .collect();
    let sampler = quill::infer::Sampler {
        model,
        words: &words,
        chars: o.tokens == "char",
        bptt: o.bptt,
    };
    let draw = quill::infer::Draw {
        tokens: if o.tokens == "char" { 100 } else { 20 },
        temperature: 0.8,
        top_k: 40,
        seed: o.seed,
    };
    if report::mode() == report::Mode::Quiet {
        return Ok(());
    }
    model.eval();
    let mut text = String::new();
    let r = sampler.sample("", &draw, |s| {
        text.push_str(if s == "\n" { " | " } else { s });
        Ok(())
    });
    model.train();
    q(r)?;
    report::progress(
        "sample",
        || format!("  sample: {}", text.trim()),
        serde_json::json!({"text": text.trim()}),
    );
    Ok(())
}

/// Summed loss, correct next-token guesses and tokens over one pass of `batches` in eval mode,
/// carrying the state across windows as training does.
fn evaluate(
    model: &LanguageModel,
    batches: &NDArray,
    bptt: usize,
) -> Result<(f64, usize, usize), String> {
    let _g = no_grad();
    model.eval();
    let (mut loss, mut correct, mut n) = (0.0, 0usize, 0usize);
    let mut state: Option<SeqState> = None;
    let mut i = 0;
    while i + 1 < batches.shape()[0] {
        let (x, y) = q(get_batch(batches, i, bptt))?;
        let (logits, s) = q(model.forward_with(&x, state.as_ref()))?;
        state = Some(s);
        loss += q(q(cross_entropy(&logits, &y, 0.0, Reduction::Sum))?.item())?;
        correct += super::count_correct(&logits, &y)?;
        n += y.numel();
        i += bptt;
    }
    model.train();
    Ok((loss, correct, n))
}

/// The model being trained: alone, or wrapped for data-parallel training (with whether it has
/// buffers to broadcast before each forward).
enum Trainer {
    Alone(LanguageModel),
    Ddp(DistributedDataParallel<LanguageModel>, bool),
}

impl Trainer {
    fn model(&self) -> &LanguageModel {
        match self {
            Trainer::Alone(m) => m,
            Trainer::Ddp(ddp, _) => ddp.module(),
        }
    }

    /// What `DistributedDataParallel`'s own forward does first (the model is called through
    /// `forward_with`, which carries the state): rank 0's buffers, if the model has any.
    fn before_forward(&self) -> Result<(), String> {
        match self {
            Trainer::Ddp(ddp, true) => d(ddp.broadcast_buffers()),
            _ => Ok(()),
        }
    }

    /// The backward pass of one micro-batch's loss; `sync` on the step's last one, whose
    /// backward averages the accumulated gradients across the ranks (the others run under
    /// `no_sync`).
    fn backward(&self, loss: &Tensor, sync: bool) -> Result<(), String> {
        match self {
            Trainer::Alone(_) => q(loss.backward()),
            Trainer::Ddp(ddp, _) if sync => d(ddp.backward(loss)),
            Trainer::Ddp(ddp, _) => {
                let _local = ddp.no_sync();
                d(ddp.backward(loss))
            }
        }
    }
}

/// Columns `from..to` of a (rows, streams) token array, compacted (the array itself when that is
/// all of it); `None` when the range is empty.
fn columns(a: &NDArray, from: usize, to: usize) -> Result<Option<NDArray>, String> {
    if from >= to {
        return Ok(None);
    }
    if from == 0 && to == a.shape()[1] {
        return Ok(Some(a.clone()));
    }
    Ok(Some(q(
        q(a.slice(&s![.., from as isize..to as isize]))?.compact()
    )?))
}

/// This rank's share of an evaluation split batchified into `EVAL_BATCH` streams: streams
/// `rank * EVAL_BATCH / world .. (rank + 1) * EVAL_BATCH / world` (none on some ranks when there
/// are more ranks than streams), on `dev`.
fn eval_share(
    tokens: &[usize],
    rank: usize,
    world: usize,
    dev: quill::Device,
) -> Result<Option<NDArray>, String> {
    let all = q(batchify(tokens, EVAL_BATCH))?;
    let part = columns(
        &all,
        rank * EVAL_BATCH / world,
        (rank + 1) * EVAL_BATCH / world,
    )?;
    part.map(|a| q(a.to_device(dev))).transpose()
}

/// `evaluate` over this rank's share (nothing when it has none).
fn evaluate_share(
    model: &LanguageModel,
    share: Option<&NDArray>,
    bptt: usize,
) -> Result<(f64, usize, usize), String> {
    share.map_or(Ok((0.0, 0, 0)), |b| evaluate(model, b, bptt))
}

/// Trains the language model: in this process alone (`comm` = `None`), or as one rank of
/// `comm`'s group (`quill train --distributed`; see the module doc for the split).
pub fn run(o: Options, comm: Option<Arc<dyn Communicator>>) -> Result<(), String> {
    let t0 = Instant::now();
    // On the thread that runs the model, for the whole run (evaluation and samples included).
    let _autocast = o.precision.guard()?;
    let (rank, world) = comm.as_ref().map_or((0, 1), |c| (c.rank(), c.world_size()));
    let lead = rank == 0;
    check_batch(&o, world)?;
    let accum = o.grad_accum;
    // Streams per micro-batch on each rank.
    let streams = o.batch_size / (world * accum);
    // The smallest vocabulary first: a model too large for memory whatever the corpus is
    // refused before the corpus is read; the real vocabulary is checked once it is known.
    memory::check_lm(&o, None)?;
    let tokenizer = q(Tokenizer::parse(&o.tokens))?;
    let corpus = q(Corpus::load(&o.data, tokenizer, o.limit))?;
    let vocab = corpus.dictionary.len();
    memory::check_lm(&o, Some(vocab))?;
    let eval_split = if corpus.valid.is_empty() {
        &corpus.test
    } else {
        &corpus.valid
    };
    let baseline = q(unigram_perplexity(&corpus.train, &corpus.test, vocab))?;
    // Training needs at least two token rows per stream: inputs and the targets one step on.
    if corpus.train.len() < 2 * o.batch_size {
        return Err(format!(
            "--data {}: the training split has {} tokens{}, fewer than the 2 per stream that --batch-size {} needs",
            o.data.display(),
            corpus.train.len(),
            o.limit.map_or(String::new(), |n| format!(" (with --limit {n})")),
            o.batch_size
        ));
    }
    if eval_split.len() < 2 * EVAL_BATCH || corpus.test.len() < 2 * EVAL_BATCH {
        return Err(format!(
            "--data {}: the validation or test split has fewer than the {} tokens evaluation needs",
            o.data.display(),
            2 * EVAL_BATCH
        ));
    }
    // The token ids live where the model does, so every window (inputs and targets) is a
    // view there: no transfer per step, and the accuracy compares arrays on one device. The
    // whole batch is batchified as one process would, then this rank keeps its columns: one
    // block of `streams` per micro-batch.
    let all_streams = q(batchify(&corpus.train, o.batch_size))?;
    let rows = all_streams.shape()[0];
    let train: Vec<NDArray> = (0..accum)
        .map(|j| {
            let from = (rank * accum + j) * streams;
            let block = columns(&all_streams, from, from + streams)?
                .ok_or("--batch-size leaves a rank without streams")?;
            q(block.to_device(o.device))
        })
        .collect::<Result<_, String>>()?;
    drop(all_streams);
    let valid = eval_share(eval_split, rank, world, o.device)?;
    let test = eval_share(&corpus.test, rank, world, o.device)?;
    let model = q(LanguageModel::new(
        vocab,
        o.embedding,
        o.hidden,
        o.layers,
        kind(&o)?,
        o.bptt,
        o.seed,
    ))?;
    q(model.to_device(o.device))?;
    let params = model.parameters();
    let mut opt = build_optimizer(&o, params.clone())?;
    let steps = (rows - 1).div_ceil(o.bptt);
    let schedule = match o.schedule.as_str() {
        "cosine" => Some(q(CosineLr::new(o.lr(), total_steps(&o, steps)?, 0.0))?),
        _ => None,
    };
    if lead {
        std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    }
    let (csv, png) = (o.out.join("metrics.csv"), o.out.join("curves.png"));
    let mut rows_done = Vec::new();
    let mut start = 0;
    if o.resume {
        // Every rank restores model and optimizer state (the file must be readable by all);
        // rank 0 alone makes the CSV agree with the checkpoint.
        let r = checkpoint::resume(&o, &model, opt.as_mut(), &meta_of(&o, 0, vocab))?;
        start = r.epoch;
        rows_done = metrics::reconcile(&csv, start, r.history, lead)?;
        if lead {
            super::report_resumed(&o, start);
        }
    }
    let trainer = match &comm {
        None => Trainer::Alone(model),
        Some(c) => {
            let buffers = !model.named_buffers().is_empty();
            let ddp = d(DistributedDataParallel::new(
                model,
                c.clone(),
                DdpOptions::default(),
            ))?;
            Trainer::Ddp(ddp, buffers)
        }
    };
    let model = trainer.model();
    // Sums over the ranks (the values themselves in one process).
    let sum = |v: &[f64]| match &comm {
        Some(c) => sum_f64_over_ranks(c.as_ref(), v),
        None => Ok(v.to_vec()),
    };
    let split = match &comm {
        Some(c) => format!(
            " ({} streams, over {})",
            batch_split(&o, world),
            c.backend()
        ),
        None => accum_note(&o),
    };
    let rank_suffix = match &comm {
        Some(_) => format!(" ({world} ranks)"),
        None => String::new(),
    };
    let n_params = parameter_count(model);
    if lead {
        let mut setup = serde_json::json!({
            "task": "lm", "model": o.model, "parameters": n_params, "layers": o.layers,
            "hidden": o.hidden, "embedding": o.embedding, "data": report::path(&o.data),
            "train_tokens": corpus.train.len(), "tokens": o.tokens, "vocabulary": vocab,
            "verified": corpus.verified, "batch_size": o.batch_size, "bptt": o.bptt,
            "grad_accum": accum, "micro_batch": streams, "steps_per_epoch": steps,
            "ranks": world,
            "optimizer": o.optimizer, "lr": o.lr(), "epochs": o.epochs,
            "unigram_perplexity": baseline, "threads": rayon::current_num_threads(),
            "precision": o.precision.name(),
        });
        if let (Some(c), serde_json::Value::Object(m)) = (&comm, &mut setup) {
            m.insert("backend".into(), c.backend().into());
        }
        report::progress(
            "setup",
            || {
                format!(
            "training a {} language model ({} parameters, {} layers, hidden {}, embedding {}) on {} \
             ({} {} tokens, vocabulary {vocab}{}), batch {} x bptt {}{split}, {} lr {}, {}, {} threads{}; \
             unigram test perplexity {baseline:.2}; data loaded in {:.1} s",
            o.model,
            n_params,
            o.layers,
            o.hidden,
            o.embedding,
            o.data.display(),
            corpus.train.len(),
            o.tokens,
            if corpus.verified {
                ", sha256 verified"
            } else {
                ""
            },
            o.batch_size,
            o.bptt,
            o.optimizer,
            o.lr(),
            o.precision.describe(),
            rayon::current_num_threads(),
            if comm.is_some() { " per rank" } else { "" },
            t0.elapsed().as_secs_f64()
        )
            },
            setup,
        );
    }
    for epoch in start + 1..=o.epochs {
        let bar = if lead {
            report::bar(steps as u64, format!("epoch {epoch}/{}", o.epochs))
        } else {
            ProgressBar::hidden()
        };
        let t = Instant::now();
        let (mut loss_sum, mut correct, mut seen) = (0.0, 0usize, 0usize);
        // One carried state per micro-batch (its own block of streams).
        let mut states: Vec<Option<SeqState>> = (0..accum).map(|_| None).collect();
        for (k, i) in (0..rows - 1).step_by(o.bptt).enumerate() {
            if let Some(sc) = &schedule {
                apply_schedule(opt.as_mut(), sc as &dyn LrSchedule, (epoch - 1) * steps + k);
            }
            opt.zero_grad();
            for (j, (block, state)) in train.iter().zip(states.iter_mut()).enumerate() {
                let (x, y) = q(get_batch(block, i, o.bptt))?;
                // Truncated BPTT: the state carries values, not the graph, across windows.
                let carried = state.as_ref().map(SeqState::detach);
                trainer.before_forward()?;
                let (logits, s) = q(model.forward_with(&x, carried.as_ref()))?;
                *state = Some(s);
                let loss = q(cross_entropy(&logits, &y, 0.0, Reduction::Mean))?;
                if accum == 1 {
                    trainer.backward(&loss, true)?;
                } else {
                    // Every micro-batch holds the same number of tokens: each weighs 1 / K.
                    let share = q(loss.mul_scalar(1.0 / accum as f64))?;
                    trainer.backward(&share, j + 1 == accum)?;
                }
                let n = y.numel();
                loss_sum += q(loss.item())? * n as f64;
                correct += super::count_correct(&logits, &y)?;
                seen += n;
            }
            if o.clip > 0.0 {
                q(clip_grad_norm(&params, o.clip))?;
            }
            q(opt.step())?;
            bar.inc(1);
            bar.set_message(format!(
                "loss {:.3} ppl {:.2} acc {:.1}% {:.0} tokens/s",
                loss_sum / seen as f64,
                (loss_sum / seen as f64).exp(),
                100.0 * correct as f64 / seen as f64,
                seen as f64 / t.elapsed().as_secs_f64()
            ));
        }
        bar.finish_and_clear();
        let secs = t.elapsed().as_secs_f64();
        let (vl, vc, vn) = evaluate_share(model, valid.as_ref(), o.bptt)?;
        let s = sum(&[
            loss_sum,
            correct as f64,
            seen as f64,
            vl,
            vc as f64,
            vn as f64,
        ])?;
        if !lead {
            continue;
        }
        let row = Row {
            epoch,
            train_loss: s[0] / s[2].max(1.0),
            train_acc: s[1] / s[2].max(1.0),
            test_loss: s[3] / s[5].max(1.0),
            test_acc: s[4] / s[5].max(1.0),
            seconds: secs,
            samples_per_s: s[2] / secs,
        };
        report::progress(
            "epoch",
            || {
                format!(
            "epoch {epoch}/{}: train loss {:.4} ppl {:.2} | valid loss {:.4} ppl {:.2} acc {:.2}% | {:.1} s, {:.0} tokens/s{rank_suffix}",
            o.epochs,
            row.train_loss,
            row.train_loss.exp(),
            row.test_loss,
            row.test_loss.exp(),
            100.0 * row.test_acc,
            secs,
            row.samples_per_s
        )
            },
            row.json(),
        );
        rows_done.push(row);
        print_sample(model, &corpus.dictionary, &o)?;
        let title = format!(
            "{} language model on {} ({} tokens){rank_suffix}",
            o.model,
            o.data.display(),
            o.tokens
        );
        let labels = plot::Labels {
            title: &title,
            held_out: if corpus.valid.is_empty() {
                "test"
            } else {
                "valid"
            },
            loss: "cross-entropy (nats / token)",
            accuracy: "next-token accuracy (%)",
        };
        finish_epoch(
            &o,
            model,
            opt.as_ref(),
            &with_config(meta_of(&o, epoch, vocab), &o, &corpus.dictionary),
            &rows_done,
            &labels,
        )?;
    }
    let (tl, _, tn) = evaluate_share(model, test.as_ref(), o.bptt)?;
    let s = sum(&[tl, tn as f64])?;
    if let Some(c) = &comm {
        // Nobody leaves (and finalises MPI) while rank 0 still writes.
        d(c.barrier())?;
    }
    if !lead {
        return Ok(());
    }
    let ppl = (s[0] / s[1].max(1.0)).exp();
    report::result(
        "result",
        || {
            format!(
        "done: test perplexity {ppl:.2} against the unigram baseline's {baseline:.2} ({:.1}x lower); \
         {} and {} written, checkpoint {}",
        baseline / ppl,
        csv.display(),
        png.display(),
        o.checkpoint_path().display()
    )
        },
        serde_json::json!({
            "test_perplexity": ppl, "unigram_perplexity": baseline, "metrics": report::path(&csv),
            "curves": report::path(&png), "checkpoint": report::path(&o.checkpoint_path()),
        }),
    );
    super::report_host_round_trips(o.device);
    Ok(())
}
