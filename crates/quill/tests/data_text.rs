//! Text corpora: Dictionary, tokenisation, Corpus loading with checksums, batchify / get_batch
//! against naive index arithmetic, the unigram baseline, and the committed KJV corpus.

use flate2::{write::GzEncoder, Compression};
use quill::data::{batchify, get_batch, unigram_perplexity, Corpus, Dictionary, Tokenizer};
use std::io::Write;
use std::path::{Path, PathBuf};

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("quill-text-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn dictionary_hands_out_ids_in_first_seen_order() {
    let mut d = Dictionary::new();
    assert!(d.is_empty());
    assert_eq!(d.add_word("b"), 0);
    assert_eq!(d.add_word("a"), 1);
    assert_eq!(d.add_word("b"), 0);
    assert_eq!(d.len(), 2);
    assert_eq!(d.get("a"), Some(1));
    assert_eq!(d.get("zz"), None);
    assert_eq!(d.word(0), Some("b"));
    assert_eq!(d.word(2), None);
}

#[test]
fn corpus_tokenises_words_and_chars_across_splits() {
    let dir = temp_dir("corpus");
    std::fs::write(dir.join("train.txt"), "the cat\nthe  dog sat\n").unwrap();
    std::fs::write(dir.join("test.txt.gz"), gz("a cat\n".as_bytes())).unwrap();
    let c = Corpus::load(&dir, Tokenizer::Words, None).unwrap();
    let w = |s: &str| c.dictionary.get(s).unwrap();
    assert_eq!(
        c.train,
        vec![
            w("the"),
            w("cat"),
            w("<eos>"),
            w("the"),
            w("dog"),
            w("sat"),
            w("<eos>")
        ]
    );
    assert_eq!(c.test, vec![w("a"), w("cat"), w("<eos>")]);
    assert!(c.valid.is_empty());
    assert!(!c.verified, "no SHA256SUMS here");
    let one = Corpus::load(&dir, Tokenizer::Words, Some(1)).unwrap();
    assert_eq!(one.train.len(), 3);

    let ch = Corpus::load(&dir, Tokenizer::Chars, None).unwrap();
    let text = "the cat\nthe  dog sat\n";
    let decoded: String = ch
        .train
        .iter()
        .map(|&i| ch.dictionary.word(i).unwrap())
        .collect();
    assert_eq!(decoded, text);
}

#[test]
fn corpus_checks_sha256_and_reports_missing_files() {
    let dir = temp_dir("sums");
    let e = Corpus::load(&dir, Tokenizer::Words, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("train.txt"), "{e}");
    std::fs::write(dir.join("train.txt"), "x y\n").unwrap();
    std::fs::write(dir.join("test.txt"), "y\n").unwrap();
    let sum = quill::data::sha256_hex(b"x y\n");
    std::fs::write(dir.join("SHA256SUMS"), format!("{sum}  train.txt\n")).unwrap();
    let c = Corpus::load(&dir, Tokenizer::Words, None).unwrap();
    assert!(!c.verified, "test.txt is not listed");
    std::fs::write(dir.join("train.txt"), "x z\n").unwrap();
    let e = Corpus::load(&dir, Tokenizer::Words, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sha256 mismatch") && e.contains("train.txt"),
        "{e}"
    );
    std::fs::write(dir.join("train.txt"), [0xffu8, 0xfe, b'\n']).unwrap();
    std::fs::remove_file(dir.join("SHA256SUMS")).unwrap();
    let e = Corpus::load(&dir, Tokenizer::Words, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("UTF-8"), "{e}");
}

#[test]
fn batchify_and_get_batch_match_index_arithmetic() {
    let data: Vec<usize> = (0..103).map(|i| (i * 7) % 31).collect();
    for bs in [1, 4, 10] {
        let b = batchify(&data, bs).unwrap();
        let n = data.len() / bs;
        assert_eq!(b.shape(), &[n, bs]);
        let v: Vec<i64> = b.to_vec().unwrap();
        for r in 0..n {
            for j in 0..bs {
                assert_eq!(v[r * bs + j], data[j * n + r] as i64, "bs {bs} [{r}, {j}]");
            }
        }
        for bptt in [1, 5, 35] {
            let mut i = 0;
            while i + 1 < n {
                let (x, y) = get_batch(&b, i, bptt).unwrap();
                let s = bptt.min(n - 1 - i);
                assert_eq!(x.shape(), &[s, bs]);
                assert_eq!(y.shape(), &[s * bs]);
                let (xv, yv): (Vec<i64>, Vec<i64>) = (x.to_vec().unwrap(), y.to_vec().unwrap());
                for t in 0..s {
                    for j in 0..bs {
                        assert_eq!(xv[t * bs + j], v[(i + t) * bs + j]);
                        assert_eq!(yv[t * bs + j], v[(i + t + 1) * bs + j]);
                    }
                }
                i += bptt;
            }
        }
    }
    assert!(batchify(&data, 0).is_err());
    assert!(batchify(&data[..3], 4).is_err());
    let b = batchify(&data, 4).unwrap();
    assert!(get_batch(&b, b.shape()[0] - 1, 5).is_err());
    assert!(get_batch(&b, 0, 0).is_err());
}

#[test]
fn unigram_perplexity_is_the_vocab_for_uniform_counts_and_lower_when_skewed() {
    // Equal counts: add-one smoothing keeps the distribution uniform, perplexity = vocab.
    let train: Vec<usize> = (0..50).map(|i| i % 5).collect();
    let p = unigram_perplexity(&train, &[0, 1, 2, 3, 4], 5).unwrap();
    assert!((p - 5.0).abs() < 1e-12, "{p}");
    // A direct sum of logs for a skewed case.
    let train = [0, 0, 0, 1];
    let test = [0, 1, 2];
    let probs = [4.0 / 7.0, 2.0 / 7.0, 1.0 / 7.0];
    let want = (-(probs.iter().map(|p: &f64| p.ln()).sum::<f64>()) / 3.0).exp();
    let got = unigram_perplexity(&train, &test, 3).unwrap();
    assert!((got - want).abs() < 1e-12);
    assert!(unigram_perplexity(&train, &[], 3).is_err());
    assert!(unigram_perplexity(&train, &[3], 3).is_err());
}

#[test]
fn the_committed_kjv_corpus_loads_verified() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/kjv");
    let c = Corpus::load(&dir, Tokenizer::Chars, None).unwrap();
    assert!(c.verified);
    assert!(c.train.len() > 3_000_000 && !c.valid.is_empty() && !c.test.is_empty());
    assert!(c.dictionary.len() < 100, "{} chars", c.dictionary.len());
    let first: String = c.train[..26]
        .iter()
        .map(|&i| c.dictionary.word(i).unwrap())
        .collect();
    assert_eq!(first, "In the beginning God creat");
}
