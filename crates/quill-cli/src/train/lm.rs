//! `quill train --task lm`: a language model (embedding -> LSTM / GRU / RNN / Transformer ->
//! linear) on a text corpus (default data/kjv, character tokens), trained with truncated
//! backpropagation through time. The same progress bar, CSV, curves and atomic checkpoints as
//! the image job; quality is reported as perplexity against the unigram baseline.

use super::metrics::{self, Row};
use super::options::Options;
use super::plot;
use super::{build_optimizer, checkpoint, finish_epoch, memory, q, total_steps};
use crate::report;
use quill::data::{batchify, get_batch, unigram_perplexity, Corpus, Tokenizer};
use quill::nn::functional::{cross_entropy, Reduction};
use quill::nn::models::{parameter_count, LanguageModel, SeqKind, SeqState};
use quill::nn::Module;
use quill::optim::{apply_schedule, clip_grad_norm, CosineLr, LrSchedule};
use quill::tensor::no_grad;
use quill::NDArray;
use std::collections::BTreeMap;
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

pub fn run(o: Options) -> Result<(), String> {
    let t0 = Instant::now();
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
    // The token ids live where the model does, so every window (inputs and targets) is a
    // view there: no transfer per step, and the accuracy compares arrays on one device.
    let on_device =
        |tokens: &[usize], batch: usize| q(q(batchify(tokens, batch))?.to_device(o.device));
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
    let train = on_device(&corpus.train, o.batch_size)?;
    let valid = on_device(eval_split, EVAL_BATCH)?;
    let test = on_device(&corpus.test, EVAL_BATCH)?;
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
    let steps = (train.shape()[0] - 1).div_ceil(o.bptt);
    let schedule = match o.schedule.as_str() {
        "cosine" => Some(q(CosineLr::new(o.lr(), total_steps(&o, steps)?, 0.0))?),
        _ => None,
    };
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    let (csv, png) = (o.out.join("metrics.csv"), o.out.join("curves.png"));
    let mut rows = Vec::new();
    let mut start = 0;
    if o.resume {
        let r = checkpoint::resume(&o, &model, opt.as_mut(), &meta_of(&o, 0, vocab))?;
        start = r.epoch;
        rows = metrics::reconcile(&csv, start, r.history, true)?;
        super::report_resumed(&o, start);
    }
    let n_params = parameter_count(&model);
    let setup = serde_json::json!({
        "task": "lm", "model": o.model, "parameters": n_params, "layers": o.layers,
        "hidden": o.hidden, "embedding": o.embedding, "data": report::path(&o.data),
        "train_tokens": corpus.train.len(), "tokens": o.tokens, "vocabulary": vocab,
        "verified": corpus.verified, "batch_size": o.batch_size, "bptt": o.bptt,
        "optimizer": o.optimizer, "lr": o.lr(), "epochs": o.epochs,
        "unigram_perplexity": baseline, "threads": rayon::current_num_threads(),
    });
    report::progress(
        "setup",
        || {
            format!(
        "training a {} language model ({} parameters, {} layers, hidden {}, embedding {}) on {} \
         ({} {} tokens, vocabulary {vocab}{}), batch {} x bptt {}, {} lr {}, {} threads; \
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
        rayon::current_num_threads(),
        t0.elapsed().as_secs_f64()
    )
        },
        setup,
    );
    for epoch in start + 1..=o.epochs {
        let bar = report::bar(steps as u64, format!("epoch {epoch}/{}", o.epochs));
        let t = Instant::now();
        let (mut loss_sum, mut correct, mut seen) = (0.0, 0usize, 0usize);
        let mut state: Option<SeqState> = None;
        for (k, i) in (0..train.shape()[0] - 1).step_by(o.bptt).enumerate() {
            if let Some(sc) = &schedule {
                apply_schedule(opt.as_mut(), sc as &dyn LrSchedule, (epoch - 1) * steps + k);
            }
            let (x, y) = q(get_batch(&train, i, o.bptt))?;
            // Truncated BPTT: the state carries values, not the graph, across windows.
            let carried = state.as_ref().map(SeqState::detach);
            let (logits, s) = q(model.forward_with(&x, carried.as_ref()))?;
            state = Some(s);
            let loss = q(cross_entropy(&logits, &y, 0.0, Reduction::Mean))?;
            opt.zero_grad();
            q(loss.backward())?;
            if o.clip > 0.0 {
                q(clip_grad_norm(&params, o.clip))?;
            }
            q(opt.step())?;
            let n = y.numel();
            loss_sum += q(loss.item())? * n as f64;
            correct += super::count_correct(&logits, &y)?;
            seen += n;
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
        let (vl, vc, vn) = evaluate(&model, &valid, o.bptt)?;
        let row = Row {
            epoch,
            train_loss: loss_sum / seen.max(1) as f64,
            train_acc: correct as f64 / seen.max(1) as f64,
            test_loss: vl / vn.max(1) as f64,
            test_acc: vc as f64 / vn.max(1) as f64,
            seconds: secs,
            samples_per_s: seen as f64 / secs,
        };
        report::progress(
            "epoch",
            || {
                format!(
            "epoch {epoch}/{}: train loss {:.4} ppl {:.2} | valid loss {:.4} ppl {:.2} acc {:.2}% | {:.1} s, {:.0} tokens/s",
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
        rows.push(row);
        print_sample(&model, &corpus.dictionary, &o)?;
        let title = format!(
            "{} language model on {} ({} tokens)",
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
            &model,
            opt.as_ref(),
            &with_config(meta_of(&o, epoch, vocab), &o, &corpus.dictionary),
            &rows,
            &labels,
        )?;
    }
    let (tl, _, tn) = evaluate(&model, &test, o.bptt)?;
    let ppl = (tl / tn.max(1) as f64).exp();
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
