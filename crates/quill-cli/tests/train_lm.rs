//! The language-model job end to end through the `quill` binary on a slice of the KJV corpus:
//! perplexity ends below the unigram baseline, a resumed run reproduces an uninterrupted one,
//! the Transformer variant trains, and bad options name the fix.

mod common;

use common::quill;
use std::path::Path;

fn tmp(name: &str) -> String {
    let d = std::env::temp_dir().join(format!("quill-lm-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d.to_string_lossy().into_owned()
}

fn run(out: &str, extra: &[&str]) -> String {
    let mut args = common::SMALL_LM.to_vec();
    args.extend_from_slice(&["--out", out]);
    args.extend_from_slice(extra);
    let o = quill(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The two numbers of "test perplexity P against the unigram baseline's B".
fn perplexities(out: &str) -> (f64, f64) {
    let line = out
        .lines()
        .find(|l| l.starts_with("done: test perplexity"))
        .expect(out);
    let nums: Vec<f64> = line
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|w| w.trim_matches('.').parse().ok())
        .collect();
    (nums[0], nums[1])
}

fn csv(dir: &str) -> Vec<String> {
    let s = std::fs::read_to_string(Path::new(dir).join("metrics.csv")).unwrap();
    s.lines()
        .map(|l| l.split(',').take(5).collect::<Vec<_>>().join(","))
        .collect()
}

#[test]
fn lstm_beats_the_unigram_baseline_and_resumes_exactly() {
    let (a, b) = (tmp("a"), tmp("b"));
    let full = run(&a, &["--epochs", "2"]);
    let (ppl, unigram) = perplexities(&full);
    assert!(ppl < 0.8 * unigram, "{full}");
    run(&b, &["--epochs", "1"]);
    let resumed = run(&b, &["--epochs", "2", "--resume"]);
    assert!(resumed.contains("resumed"), "{resumed}");
    assert_eq!(
        csv(&a),
        csv(&b),
        "a resumed run must match the uninterrupted one"
    );
    assert!(Path::new(&a).join("curves.png").exists());
    assert!(Path::new(&a).join("checkpoint.safetensors").exists());
    // Another tokenisation cannot resume this checkpoint.
    let mut args = common::SMALL_LM.to_vec();
    args.extend_from_slice(&["--out", &b, "--epochs", "3", "--resume", "--tokens", "word"]);
    let o = quill(&args);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("tokens"));
}

#[test]
fn the_transformer_and_gru_variants_train() {
    for model in ["transformer", "gru"] {
        let out = run(&tmp(model), &["--epochs", "1", "--model", model]);
        let (ppl, unigram) = perplexities(&out);
        assert!(ppl < unigram, "{model}: {out}");
    }
}

#[test]
fn bad_lm_options_say_what_is_accepted() {
    let o = quill(&["--task", "lm", "--model", "cnn"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("lstm, gru, rnn, transformer"), "{e}");
    let o = quill(&["--task", "lm", "--data", "/nonexistent", "--epochs", "1"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("train.txt"));
    let o = quill(&["--task", "music"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("mnist or lm"));
}
