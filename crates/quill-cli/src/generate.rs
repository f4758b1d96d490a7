//! `quill generate`: text from a language model trained by `quill train --task lm`, rebuilt
//! from its checkpoint alone (the sizes and the vocabulary are in the checkpoint's metadata).
//! The prompt is read through the model, then each next token is drawn from the softmax of the
//! last logits divided by `--temperature`, kept to the `--top-k` most likely, with a seeded
//! generator, and printed as it comes. A recurrent model carries its state token by token; the
//! Transformer, which has none, re-reads the last `bptt` tokens each step.

use crate::train::lm::kind_of;
use quill::nn::models::{LanguageModel, SeqState};
use quill::nn::Module;
use quill::tensor::no_grad;
use quill::{DType, NDArray};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The command's options and their defaults.
pub const USAGE: &str = "usage: quill generate [--checkpoint PATH] [--prompt TEXT] [--tokens N] \
[--temperature T] [--top-k K] [--seed S]
  --checkpoint PATH  a checkpoint of `quill train --task lm` (default runs/checkpoint.safetensors)
  --prompt TEXT      the start of the text (default: the start of a line)
  --tokens N         how many tokens to generate (default 200)
  --temperature T    > 0; lower is more conservative (default 0.8)
  --top-k K          draw from the K most likely tokens; 0 for all (default 40)
  --seed S           the sampling generator's seed (default 0)";

struct Args {
    checkpoint: PathBuf,
    prompt: String,
    tokens: usize,
    temperature: f64,
    top_k: usize,
    seed: u64,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut a = Args {
        checkpoint: PathBuf::from("runs/checkpoint.safetensors"),
        prompt: String::new(),
        tokens: 200,
        temperature: 0.8,
        top_k: 40,
        seed: 0,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            return Err(USAGE.to_string());
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let num = |what: &str| format!("{flag}: {what}, got '{value}'");
        match flag.as_str() {
            "--checkpoint" => a.checkpoint = value.into(),
            "--prompt" => a.prompt = value.clone(),
            "--tokens" => a.tokens = value.parse().map_err(|_| num("a whole number"))?,
            "--temperature" => {
                a.temperature = value.parse().map_err(|_| num("a number"))?;
                if !(a.temperature > 0.0 && a.temperature.is_finite()) {
                    return Err(num("a finite number above 0"));
                }
            }
            "--top-k" => a.top_k = value.parse().map_err(|_| num("a whole number"))?,
            "--seed" => a.seed = value.parse().map_err(|_| num("a whole number"))?,
            other => return Err(format!("unknown option '{other}'\n{USAGE}")),
        }
    }
    Ok(a)
}

/// The model and tokenizer a checkpoint describes.
struct Loaded {
    model: LanguageModel,
    words: Vec<String>,
    chars: bool,
    bptt: usize,
}

/// What sampling needs: the model (in eval mode), its vocabulary in id order, whether tokens
/// are characters (else words, `<eos>` ending a line) and the Transformer's window.
pub(crate) struct Sampler<'a> {
    pub model: &'a LanguageModel,
    pub words: &'a [String],
    pub chars: bool,
    pub bptt: usize,
}

/// How to draw: `tokens` of them, from `logits / temperature` kept to the `top_k` largest (all
/// when 0), with the generator seeded by `seed`.
pub(crate) struct Draw {
    pub tokens: usize,
    pub temperature: f64,
    pub top_k: usize,
    pub seed: u64,
}

fn load(path: &Path) -> Result<Loaded, String> {
    let at = |msg: String| format!("{}: {msg}", path.display());
    let ck = quill::io::load_checkpoint(path).map_err(|e| e.to_string())?;
    let meta = &ck.metadata;
    let get = |key: &str| -> Result<&String, String> {
        meta.get(key).ok_or_else(|| {
            at(format!(
                "no '{key}' in its metadata: it is not a language-model checkpoint of this \
                 quill version (train one with `quill train --task lm`)"
            ))
        })
    };
    if get("task")? != "lm" {
        return Err(at(format!(
            "a checkpoint of task '{}', not a language model (`quill train --task lm`)",
            get("task")?
        )));
    }
    let size = |key: &str| -> Result<usize, String> {
        get(key)?
            .parse::<usize>()
            .map_err(|_| at(format!("metadata '{key}' is not a whole number")))
    };
    let words = get("vocabulary")?
        .split(' ')
        .map(|h| unhex(h).ok_or_else(|| at("metadata 'vocabulary' is malformed".into())))
        .collect::<Result<Vec<String>, String>>()?;
    if words.len() != size("vocab")? {
        return Err(at(format!(
            "the vocabulary lists {} tokens, the model has {}",
            words.len(),
            size("vocab")?
        )));
    }
    let bptt = size("bptt")?;
    let model = LanguageModel::new(
        words.len(),
        size("embedding")?,
        size("hidden")?,
        size("layers")?,
        kind_of(get("model")?)?,
        bptt,
        0,
    )
    .map_err(|e| at(e.to_string()))?;
    let state: Vec<(String, NDArray)> = ck
        .tensors
        .iter()
        .filter_map(|(n, a)| n.strip_prefix("model.").map(|s| (s.to_string(), a.clone())))
        .collect();
    model
        .load_state_dict(&state)
        .map_err(|e| at(e.to_string()))?;
    model.eval();
    Ok(Loaded {
        model,
        words,
        chars: get("tokens")? == "char",
        bptt,
    })
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

/// The prompt's token ids; a token the vocabulary lacks is an error naming it.
fn encode(l: &Sampler<'_>, prompt: &str) -> Result<Vec<usize>, String> {
    let ids: HashMap<&str, usize> = l
        .words
        .iter()
        .enumerate()
        .map(|(i, w)| (w.as_str(), i))
        .collect();
    let start = if l.chars { "\n" } else { "<eos>" };
    let mut out = vec![*ids
        .get(start)
        .ok_or_else(|| format!("the vocabulary has no {start:?} to start from"))?];
    let toks: Vec<String> = if l.chars {
        prompt.chars().map(String::from).collect()
    } else {
        prompt.split_whitespace().map(String::from).collect()
    };
    for t in &toks {
        out.push(
            *ids.get(t.as_str()).ok_or_else(|| {
                format!("the prompt's token {t:?} is not in the model's vocabulary")
            })?,
        );
    }
    Ok(out)
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

/// The last row of the model's logits for `ids` (seq, 1), and the state after them.
fn step(
    l: &Sampler<'_>,
    ids: &[usize],
    state: Option<&SeqState>,
) -> Result<(Vec<f64>, SeqState), String> {
    let x = NDArray::from_vec(ids.iter().map(|&i| i as i64).collect(), &[ids.len(), 1])
        .map_err(|e| e.to_string())?;
    let (logits, s) = l.model.forward_with(&x, state).map_err(|e| e.to_string())?;
    let v = l.words.len();
    let all = logits
        .array()
        .astype(DType::F64)
        .and_then(|a| a.to_vec::<f64>())
        .map_err(|e| e.to_string())?;
    Ok((all[all.len() - v..].to_vec(), s))
}

impl Sampler<'_> {
    /// Reads `prompt` (tokenised as in training, after a line start), then hands each drawn
    /// token's text to `emit` as it comes (a line end as `"\n"`, words with a space before).
    pub fn sample(
        &self,
        prompt: &str,
        d: &Draw,
        mut emit: impl FnMut(&str) -> Result<(), String>,
    ) -> Result<(), String> {
        let _g = no_grad();
        let mut context = encode(self, prompt)?;
        let sep = if self.chars { "" } else { " " };
        let (mut logits, mut state) = step(self, &context, None)?;
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
                if !line_start {
                    emit(sep)?;
                }
                emit(word)?;
                line_start = false;
            }
            context.push(t);
            (logits, state) = if self.model.is_stateless() {
                let from = context.len().saturating_sub(self.bptt);
                step(self, &context[from..], None)?
            } else {
                step(self, &[t], Some(&state))?
            };
        }
        Ok(())
    }
}

/// Runs `quill generate` with `args` (after the word `generate`).
pub fn run(args: &[String]) -> Result<(), String> {
    let a = parse(args)?;
    let l = load(&a.checkpoint)?;
    let sampler = Sampler {
        model: &l.model,
        words: &l.words,
        chars: l.chars,
        bptt: l.bptt,
    };
    let d = Draw {
        tokens: a.tokens,
        temperature: a.temperature,
        top_k: a.top_k,
        seed: a.seed,
    };
    if crate::report::mode() == crate::report::Mode::Json {
        let mut text = a.prompt.clone();
        sampler.sample(&a.prompt, &d, |s| {
            text.push_str(s);
            Ok(())
        })?;
        crate::report::result(
            "result",
            String::new,
            serde_json::json!({
                "prompt": a.prompt, "text": text, "tokens": a.tokens,
                "temperature": a.temperature, "top_k": a.top_k, "seed": a.seed,
                "checkpoint": crate::report::path(&a.checkpoint),
            }),
        );
        return Ok(());
    }
    // Plain and quiet alike: the text is the result, streamed as it is drawn.
    let out = std::io::stdout();
    let mut out = out.lock();
    let io = |e: std::io::Error| e.to_string();
    write!(out, "{}", a.prompt).map_err(io)?;
    sampler.sample(&a.prompt, &d, |s| {
        out.write_all(s.as_bytes())
            .and_then(|_| out.flush())
            .map_err(io)
    })?;
    writeln!(out).map_err(io)
}
