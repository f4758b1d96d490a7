//! The language model's memory, estimated from the flags before anything is built: parameters,
//! their gradients and the optimizer's state (f32), checked against the memory available, so
//! that `--hidden 1000000` is an error naming the flags at once instead of a long allocation
//! that fails (or is killed) later. The estimate leaves out activations, so it is a floor.

use super::options::Options;

/// What is assumed available where `/proc/meminfo` cannot be read (not Linux).
const FALLBACK_AVAILABLE: f64 = (64u64 << 30) as f64;

/// The parameter count of `--task lm`'s model (quill's `LanguageModel`), to within a few
/// per cent: embedding, body (per layer: gates x (input + hidden + 2 biases) x hidden for the
/// recurrent kinds; attention, feed-forward and positional embedding for the Transformer) and
/// the output layer.
// f64, not integers: flags near usize::MAX would overflow even u128 when multiplied out, and
// an estimate needs no exactness.
pub fn lm_parameters(o: &Options, vocab: usize) -> f64 {
    let (v, e, h, l) = (
        vocab as f64,
        o.embedding as f64,
        o.hidden as f64,
        o.layers as f64,
    );
    let recurrent =
        |gates: f64| gates * h * (e + h + 2.0) + (l - 1.0).max(0.0) * gates * h * (2.0 * h + 2.0);
    let (body, width) = match o.model.as_str() {
        "transformer" => (
            l * (4.0 * e * e + 2.0 * e * h + h + 5.0 * e) + o.bptt as f64 * e,
            e,
        ),
        "gru" => (recurrent(3.0), h),
        "rnn" => (recurrent(1.0), h),
        _ => (recurrent(4.0), h),
    };
    v * e + body + width * v + v
}

/// Bytes of f32 weights, gradients and optimizer state for `params` parameters.
fn training_bytes(o: &Options, params: f64) -> f64 {
    let states = if o.optimizer == "sgd" { 1.0 } else { 2.0 };
    params * 4.0 * (2.0 + states)
}

/// The memory available for a new allocation: `MemAvailable` on Linux, else a fixed cap.
fn available() -> (f64, &'static str) {
    let from_proc = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024.0)
    });
    match from_proc {
        Some(b) => (b, "MemAvailable in /proc/meminfo"),
        None => (
            FALLBACK_AVAILABLE,
            "the 64 GiB assumed where /proc/meminfo is unreadable",
        ),
    }
}

fn gb(b: f64) -> String {
    format!("{:.1} GB", b / 1e9)
}

/// An error naming the size flags when the model would not fit in memory; `vocab` is `None`
/// before the corpus is read (the smallest vocabulary is assumed then).
pub fn check_lm(o: &Options, vocab: Option<usize>) -> Result<(), String> {
    let (vocab_said, vocab) = match vocab {
        Some(v) => (format!("vocabulary {v}"), v),
        None => ("whatever the vocabulary".to_string(), 1),
    };
    let params = lm_parameters(o, vocab);
    let need = training_bytes(o, params);
    let (have, source) = available();
    if need <= have {
        return Ok(());
    }
    let bptt = if o.model == "transformer" {
        format!(" --bptt {}", o.bptt)
    } else {
        String::new()
    };
    Err(format!(
        "--model {} with --hidden {} --embedding {} --layers {}{bptt} ({vocab_said}) has about {params:.3e} parameters: {} with gradients and {} state, over the {} available ({source}); choose smaller --hidden, --embedding or --layers",
        o.model,
        o.hidden,
        o.embedding,
        o.layers,
        gb(need),
        o.optimizer,
        gb(have)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use quill::nn::models::{parameter_count, LanguageModel, SeqKind};

    #[test]
    fn the_estimate_matches_the_built_model() {
        for (model, kind) in [
            ("lstm", SeqKind::Lstm),
            ("gru", SeqKind::Gru),
            ("rnn", SeqKind::RnnTanh),
            ("transformer", SeqKind::Transformer),
        ] {
            let o = Options {
                model: model.into(),
                embedding: 32,
                hidden: 48,
                layers: 2,
                bptt: 16,
                ..Options::default()
            };
            let built = LanguageModel::new(70, 32, 48, 2, kind, 16, 0).unwrap();
            let real = parameter_count(&built) as f64;
            let est = lm_parameters(&o, 70);
            assert!(
                (est - real).abs() <= 0.05 * real,
                "{model}: estimated {est}, built {real}"
            );
        }
    }

    #[test]
    fn a_huge_model_is_refused_naming_the_flags() {
        let o = Options {
            model: "lstm".into(),
            hidden: 1_000_000,
            ..Options::default()
        };
        let e = check_lm(&o, Some(80)).unwrap_err();
        assert!(
            e.contains("--hidden 1000000") && e.contains("available"),
            "{e}"
        );
        assert!(e.contains("vocabulary 80"), "{e}");
        assert!(check_lm(&o, None)
            .unwrap_err()
            .contains("whatever the vocabulary"));
        assert!(check_lm(&Options::default(), Some(80)).is_ok());
    }
}
