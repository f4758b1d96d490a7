//! `quill generate` end to end through the `quill` binary: a small language model trained on a
//! slice of the KJV corpus is rebuilt from its checkpoint alone and sampled (LSTM, with its
//! state carried token by token, and the stateless Transformer); the same seed gives the same
//! text, every character comes from the corpus's vocabulary, bad input names the problem, and
//! the training job prints a sample after each epoch.

mod common;

use common::{assert_refused, quill, scratch};
use std::collections::BTreeMap;

/// Trains one epoch of a small `model` and returns its checkpoint's path.
fn trained(model: &str) -> String {
    let out = scratch("gen", model).to_string_lossy().into_owned();
    let mut args = common::SMALL_LM.to_vec();
    args.extend_from_slice(&["--epochs", "1", "--model", model, "--out", &out]);
    let o = quill(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The job shows a sample of its text after the epoch, on one line.
    let stdout = String::from_utf8_lossy(&o.stdout);
    let sample = stdout
        .lines()
        .find(|l| l.starts_with("  sample: "))
        .expect(&stdout);
    assert!(sample.len() > "  sample: ".len() + 20, "{sample}");
    format!("{out}/checkpoint.safetensors")
}

fn generate(ck: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["generate", "--checkpoint", ck];
    args.extend_from_slice(extra);
    quill(&args)
}

fn text(o: &std::process::Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn samples_are_seeded_and_drawn_from_the_vocabulary() {
    for model in ["lstm", "transformer"] {
        let ck = trained(model);
        let args = ["--prompt", "In the", "--tokens", "120", "--seed", "3"];
        let a = text(&generate(&ck, &args));
        assert_eq!(
            a,
            text(&generate(&ck, &args)),
            "{model}: same seed, same text"
        );
        let other = text(&generate(
            &ck,
            &["--prompt", "In the", "--tokens", "120", "--seed", "4"],
        ));
        assert_ne!(a, other, "{model}: another seed, other text");
        assert!(a.starts_with("In the"), "{model}: {a:?}");
        // 120 characters after the prompt (a char model), then the final newline.
        assert_eq!(
            a.chars().count(),
            "In the".len() + 120 + 1,
            "{model}: {a:?}"
        );
        // The vocabulary is the training slice's characters (read here from the checkpoint).
        let ck_meta = quill::io::load_checkpoint(std::path::Path::new(&ck))
            .unwrap()
            .metadata;
        let vocab: Vec<String> = ck_meta["vocabulary"]
            .split(' ')
            .map(|h| {
                let bytes: Vec<u8> = (0..h.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                    .collect();
                String::from_utf8(bytes).unwrap()
            })
            .collect();
        for c in a.chars() {
            assert!(
                vocab.contains(&c.to_string()),
                "{model}: {c:?} not in {vocab:?}"
            );
        }
        // Greedy-ish and wide sampling both run.
        text(&generate(&ck, &["--tokens", "20", "--top-k", "1"]));
        text(&generate(
            &ck,
            &["--tokens", "20", "--top-k", "0", "--temperature", "2.5"],
        ));
    }
}

#[test]
fn bad_input_names_the_problem() {
    let ck = trained("gru");
    assert_refused(
        &generate(&ck, &["--prompt", "In the \u{2603}"]),
        &["not in the model's vocabulary"],
    );
    assert_refused(&generate(&ck, &["--temperature", "0"]), &["above 0"]);
    assert_refused(&generate(&ck, &["--tokens", "many"]), &["whole number"]);
    assert_refused(
        &generate("/nonexistent/checkpoint.safetensors", &[]),
        &["nonexistent"],
    );
    // A checkpoint of another task is refused by name.
    let path = scratch("gen", "image").join("image.safetensors");
    let meta = BTreeMap::from([("task".to_string(), "mnist".to_string())]);
    let w = quill::NDArray::zeros(&[2, 2], quill::DType::F32).unwrap();
    quill::io::save_checkpoint(&path, &[("model.w".to_string(), w)], &meta).unwrap();
    assert_refused(
        &generate(path.to_str().unwrap(), &[]),
        &["not a language model"],
    );
    let o = quill(&["generate", "--help"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("--top-k"));
}
