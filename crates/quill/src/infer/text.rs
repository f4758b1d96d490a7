//! Sampling text from a language model of `quill train --task lm`. The prompt is read through
//! the model, then each next token is drawn from the softmax of the last logits divided by the
//! temperature, kept to the `top_k` most likely, with a seeded generator. A recurrent model
//! carries its state token by token; the Transformer, which has none, re-reads the last `bptt`
//! tokens each step.

use super::{at, meta, model_state};
use crate::nn::models::{LanguageModel, SeqKind, SeqState};
use crate::nn::Module;
use crate::tensor::no_grad;
use crate::{DType, Error, NDArray, Result};
use std::collections::HashMap;
use std::path::Path;

const OP: &str = "generate";

/// The sequence model a checkpoint's `model` names: `lstm`, `gru`, `rnn` (tanh) or
/// `transformer`.
pub fn seq_kind(model: &str) -> Result<SeqKind> {
    Ok(match model {
        "lstm" => SeqKind::Lstm,
        "gru" => SeqKind::Gru,
        "rnn" => SeqKind::RnnTanh,
        "transformer" => SeqKind::Transformer,
        other => {
            return Err(Error::invalid(
                "language model",
                format!("'{other}' is not a sequence model (lstm, gru, rnn or transformer)"),
            ))
        }
    })
}

/// How to draw: `tokens` of them, from `logits / temperature` kept to the `top_k` largest (all
/// when 0), with the generator seeded by `seed`.
#[derive(Clone, Copy, Debug)]
pub struct Draw {
    /// How many tokens to draw after the prompt.
    pub tokens: usize,
    /// Divides the logits: above 0, lower is more conservative.
    pub temperature: f64,
    /// Draw from this many most likely tokens; 0 for all.
    pub top_k: usize,
    /// The generator's seed: the same seed gives the same text.
    pub seed: u64,
}

impl Draw {
    /// A draw of `tokens` with temperature 0.8, top-k 40 and seed 0 (the CLI's defaults).
    pub fn new(tokens: usize) -> Self {
        Draw {
            tokens,
            temperature: 0.8,
            top_k: 40,
            seed: 0,
        }
    }

    fn check(&self) -> Result<()> {
        if !(self.temperature > 0.0 && self.temperature.is_finite()) {
            return Err(Error::invalid(
                OP,
                format!(
                    "temperature must be a finite number above 0, got {}",
                    self.temperature
                ),
            ));
        }
        Ok(())
    }
}

/// A language model with its tokenizer: the model (in eval mode), its vocabulary in id order,
/// whether tokens are characters (else words, `<eos>` ending a line) and the Transformer's
/// window.
pub struct TextModel {
    model: LanguageModel,
    words: Vec<String>,
    chars: bool,
    bptt: usize,
}

impl TextModel {
    /// Wraps a model and its vocabulary (`words[i]` is token `i`; `chars` when each token is a
    /// character, with `"\n"` among them; else words with `"<eos>"`).
    pub fn new(model: LanguageModel, words: Vec<String>, chars: bool, bptt: usize) -> Self {
        TextModel {
            model,
            words,
            chars,
            bptt,
        }
    }

    /// Rebuilds the model and tokenizer from a checkpoint of `quill train --task lm` alone.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let ck = crate::io::load_checkpoint(path)?;
        let m = &ck.metadata;
        let job = "`quill train --task lm`";
        let get = |key: &str| meta(OP, path, m, key, job);
        if get("task")? != "lm" {
            return Err(at(
                OP,
                path,
                format!(
                    "a checkpoint of task '{}', not a language model (`quill train --task lm`)",
                    get("task")?
                ),
            ));
        }
        let size = |key: &str| -> Result<usize> {
            get(key)?
                .parse::<usize>()
                .map_err(|_| at(OP, path, format!("metadata '{key}' is not a whole number")))
        };
        let words = get("vocabulary")?
            .split(' ')
            .map(|h| unhex(h).ok_or_else(|| at(OP, path, "metadata 'vocabulary' is malformed")))
            .collect::<Result<Vec<String>>>()?;
        if words.len() != size("vocab")? {
            return Err(at(
                OP,
                path,
                format!(
                    "the vocabulary lists {} tokens, the model has {}",
                    words.len(),
                    size("vocab")?
                ),
            ));
        }
        let bptt = size("bptt")?;
        let kind = seq_kind(get("model")?).map_err(|e| at(OP, path, e))?;
        let model = LanguageModel::new(
            words.len(),
            size("embedding")?,
            size("hidden")?,
            size("layers")?,
            kind,
            bptt,
            0,
        )
        .map_err(|e| at(OP, path, e))?;
        model
            .load_state_dict(&model_state(&ck.tensors))
            .map_err(|e| at(OP, path, e))?;
        model.eval();
        let chars = get("tokens")? == "char";
        Ok(TextModel::new(model, words, chars, bptt))
    }

    /// The vocabulary in id order.
    pub fn vocabulary(&self) -> &[String] {
        &self.words
    }

    /// True when each token is one character (else one word).
    pub fn is_char_level(&self) -> bool {
        self.chars
    }

    /// The model.
    pub fn model(&self) -> &LanguageModel {
        &self.model
    }

    /// A sampler over this model and tokenizer.
    pub fn sampler(&self) -> Sampler<'_> {
        Sampler {
            model: &self.model,
            words: &self.words,
            chars: self.chars,
            bptt: self.bptt,
        }
    }

    /// [`Sampler::sample`] of this model.
    pub fn sample(
        &self,
        prompt: &str,
        d: &Draw,
        emit: impl FnMut(&str) -> Result<()>,
    ) -> Result<()> {
        self.sampler().sample(prompt, d, emit)
    }

    /// [`Sampler::generate`] of this model.
    pub fn generate(&self, prompt: &str, d: &Draw) -> Result<String> {
        self.sampler().generate(prompt, d)
    }
}

/// Sampling from a borrowed model and vocabulary (a training job samples the model it is
/// training); [`TextModel::sampler`] makes one from a loaded checkpoint.
pub struct Sampler<'a> {
    /// The language model; sample in eval mode.
    pub model: &'a LanguageModel,
    /// The vocabulary in id order.
    pub words: &'a [String],
    /// True when tokens are characters (with `"\n"`), else words (with `"<eos>"`).
    pub chars: bool,
    /// The Transformer's window, in tokens.
    pub bptt: usize,
}

impl Sampler<'_> {
    /// Reads `prompt` (tokenised as in training, after a line start), then hands each drawn
    /// token's text to `emit` as it comes (a line end as `"\n"`, words with a space before).
    /// `emit`'s error stops the sampling and is returned. The model should be in eval mode.
    pub fn sample(
        &self,
        prompt: &str,
        d: &Draw,
        mut emit: impl FnMut(&str) -> Result<()>,
    ) -> Result<()> {
        d.check()?;
        let _g = no_grad();
        let mut context = self.encode(prompt)?;
        let sep = if self.chars { "" } else { " " };
        let (mut logits, mut state) = self.step(&context, None)?;
        let mut rng = Rng(d.seed);
        // A word follows a space, except at the start of a line.
        let mut line_start = prompt.trim().is_empty();
        for _ in 0..d.tokens {
            let t = draw(&logits, d.temperature, d.top_k, &mut rng);
            let word = &self.words[t];
            if word == "<eos>" || word == "\n" {
                emit("\n")?;
                line_start = true;
            } else {
                if !line_start && !sep.is_empty() {
                    emit(sep)?;
                }
                emit(word)?;
                line_start = false;
            }
            context.push(t);
            (logits, state) = if self.model.is_stateless() {
                let from = context.len().saturating_sub(self.bptt);
                self.step(&context[from..], None)?
            } else {
                self.step(&[t], Some(&state))?
            };
        }
        Ok(())
    }

    /// The prompt followed by `d.tokens` drawn tokens, as one string.
    pub fn generate(&self, prompt: &str, d: &Draw) -> Result<String> {
        let mut text = prompt.to_string();
        self.sample(prompt, d, |s| {
            text.push_str(s);
            Ok(())
        })?;
        Ok(text)
    }

    /// The prompt's token ids after a line start; a token the vocabulary lacks is an error
    /// naming it.
    fn encode(&self, prompt: &str) -> Result<Vec<usize>> {
        let ids: HashMap<&str, usize> = self
            .words
            .iter()
            .enumerate()
            .map(|(i, w)| (w.as_str(), i))
            .collect();
        let start = if self.chars { "\n" } else { "<eos>" };
        let mut out = vec![*ids.get(start).ok_or_else(|| {
            Error::invalid(OP, format!("the vocabulary has no {start:?} to start from"))
        })?];
        let toks: Vec<String> = if self.chars {
            prompt.chars().map(String::from).collect()
        } else {
            prompt.split_whitespace().map(String::from).collect()
        };
        for t in &toks {
            out.push(*ids.get(t.as_str()).ok_or_else(|| {
                Error::invalid(
                    OP,
                    format!("the prompt's token {t:?} is not in the model's vocabulary"),
                )
            })?);
        }
        Ok(out)
    }

    /// The last row of the model's logits for `ids` (seq, 1), and the state after them.
    fn step(&self, ids: &[usize], state: Option<&SeqState>) -> Result<(Vec<f64>, SeqState)> {
        let x = NDArray::from_vec(ids.iter().map(|&i| i as i64).collect(), &[ids.len(), 1])?;
        let (logits, s) = self.model.forward_with(&x, state)?;
        let v = self.words.len();
        let all = logits.array().astype(DType::F64)?.to_vec::<f64>()?;
        Ok((all[all.len() - v..].to_vec(), s))
    }
}

fn unhex(h: &str) -> Option<String> {
    if !h.len().is_multiple_of(2) {
        return None;
    }
    let bytes = (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

/// SplitMix64: a small seeded generator, enough for drawing tokens reproducibly.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A token drawn from `logits / temperature`, restricted to the `top_k` largest (all when 0).
fn draw(logits: &[f64], temperature: f64, top_k: usize, rng: &mut Rng) -> usize {
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    if top_k > 0 {
        order.truncate(top_k);
    }
    let top = logits[order[0]];
    let weights: Vec<f64> = order
        .iter()
        .map(|&i| ((logits[i] - top) / temperature).exp())
        .collect();
    let mut u = rng.next_f64() * weights.iter().sum::<f64>();
    for (k, w) in weights.iter().enumerate() {
        u -= w;
        if u <= 0.0 {
            return order[k];
        }
    }
    order[order.len() - 1]
}
