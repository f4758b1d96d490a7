//! Lesson 6: a character language model on the King James Bible that trains and then writes.
//! The text is cut into (seq_len, batch) windows (needle's `batchify` / `get_batch`), an
//! Embedding -> LSTM -> Linear model predicts each next character, and truncated
//! backpropagation carries the LSTM's state from one window to the next (detached). Sampling
//! feeds one character at a time with the state, picking from softmax(logits / temperature).
//!
//! `cargo run --release --example char_lm [-- STEPS]` (default 300 steps: about 20 s on two
//! cores; the words come out English-like, the sense does not)

use quill::data::{batchify, get_batch, Corpus, Tokenizer};
use quill::nn::functional::{cross_entropy, Reduction};
use quill::nn::models::{LanguageModel, SeqKind, SeqState};
use quill::nn::Module;
use quill::optim::{clip_grad_norm, Adam, Optimizer};
use quill::tensor::no_grad;
use quill::{DType, NDArray, Result};
use rand::{Rng, SeedableRng};

fn main() -> Result<()> {
    let steps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let corpus = Corpus::load("data/kjv", Tokenizer::Chars, Some(20_000))?;
    let vocab = corpus.dictionary.len();
    let (seq_len, batch) = (64, 32);
    let data = batchify(&corpus.train, batch)?; // (n, 32): 32 parallel streams of text
    let model = LanguageModel::new(vocab, 64, 256, 1, SeqKind::Lstm, seq_len, 0)?;
    let mut opt = Adam::new(model.parameters(), 3e-3)?;

    let mut state: Option<SeqState> = None;
    let mut i = 0;
    for step in 0..steps {
        if i + 1 >= data.shape()[0] {
            (i, state) = (0, None); // back to the start of the streams
        }
        let (x, y) = get_batch(&data, i, seq_len)?;
        i += x.shape()[0];
        let (logits, next) = model.forward_with(&x, state.as_ref())?;
        state = Some(next.detach()); // truncated BPTT: keep the values, cut the graph
        let loss = cross_entropy(&logits, &y, 0.0, Reduction::Mean)?;
        opt.zero_grad();
        loss.backward()?;
        clip_grad_norm(&model.parameters(), 0.25)?;
        opt.step()?;
        if step % 50 == 0 || step + 1 == steps {
            println!("step {step:4}  loss {:.3}", loss.array().item::<f32>()?);
        }
    }

    // Sampling: prime with a prompt, then one character at a time.
    let _eval = no_grad();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let prompt = "And God said";
    let ids: Vec<i64> = prompt
        .chars()
        .map(|c| corpus.dictionary.get(&c.to_string()).unwrap_or(0) as i64)
        .collect();
    let (mut logits, mut state) =
        model.forward_with(&NDArray::from_vec(ids.clone(), &[ids.len(), 1])?, None)?;
    let mut text = String::from(prompt);
    for _ in 0..200 {
        let last = logits.array().slice(&quill::s![-1])?; // the last position's logits
        let z = last.astype(DType::F64)?.mul_scalar(1.0 / 0.8)?; // temperature 0.8
        let p = z.sub(&z.logsumexp(None, false)?)?.exp()?.to_vec::<f64>()?; // softmax
        let (mut u, mut next) = (rng.random::<f64>(), 0);
        while next + 1 < p.len() && u > p[next] {
            u -= p[next];
            next += 1;
        }
        text.push_str(corpus.dictionary.word(next).unwrap_or("?"));
        (logits, state) = model.forward_with(
            &NDArray::from_vec(vec![next as i64], &[1, 1])?,
            Some(&state),
        )?;
    }
    println!("---\n{text}");
    Ok(())
}
