//! `quill generate`: text from a language model trained by `quill train --task lm`, rebuilt
//! from its checkpoint alone and sampled by `quill::infer::TextModel`, printed as it comes.

use quill::infer::{Draw, TextModel};
use std::io::Write;
use std::path::PathBuf;

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

/// Runs `quill generate` with `args` (after the word `generate`).
pub fn run(args: &[String]) -> Result<(), String> {
    let a = parse(args)?;
    let err = |e: quill::Error| e.to_string();
    let sampler = TextModel::load(&a.checkpoint).map_err(err)?;
    let d = Draw {
        tokens: a.tokens,
        temperature: a.temperature,
        top_k: a.top_k,
        seed: a.seed,
    };
    if crate::report::mode() == crate::report::Mode::Json {
        let text = sampler.generate(&a.prompt, &d).map_err(err)?;
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
    sampler
        .sample(&a.prompt, &d, |s| {
            out.write_all(s.as_bytes())
                .and_then(|_| out.flush())
                .map_err(|e| quill::Error::invalid("generate", format!("stdout: {e}")))
        })
        .map_err(err)?;
    writeln!(out).map_err(io)
}
