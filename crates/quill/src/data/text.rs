//! Text corpora for language models, with needle's names: a `Dictionary` (token <-> id), a
//! `Corpus` (train / valid / test splits tokenised by word or by character), `batchify` (a token
//! stream cut into `batch_size` parallel columns) and `get_batch` (a `bptt`-long window of
//! inputs and the next-token targets), plus the unigram perplexity a model must beat.

use super::file_error;
use super::idx::{check_sha256_file, Checksum};
use crate::NDArray;
use flate2::read::MultiGzDecoder;
use quill_core::{Error, Result, SliceArg};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

const OP: &str = "Corpus::load";
/// needle's end-of-line token for word-level corpora.
pub const EOS: &str = "<eos>";

/// A vocabulary: ids are handed out in first-seen order.
#[derive(Clone, Debug, Default)]
pub struct Dictionary {
    word2idx: HashMap<String, usize>,
    idx2word: Vec<String>,
}

impl Dictionary {
    /// An empty vocabulary; the first word added gets id 0.
    pub fn new() -> Dictionary {
        Dictionary::default()
    }

    /// The id of `word`, added with the next free id when new.
    pub fn add_word(&mut self, word: &str) -> usize {
        if let Some(&i) = self.word2idx.get(word) {
            return i;
        }
        let i = self.idx2word.len();
        self.word2idx.insert(word.to_string(), i);
        self.idx2word.push(word.to_string());
        i
    }

    /// The id of `word`, if it is in the vocabulary.
    pub fn get(&self, word: &str) -> Option<usize> {
        self.word2idx.get(word).copied()
    }

    /// The token with id `i`.
    pub fn word(&self, i: usize) -> Option<&str> {
        self.idx2word.get(i).map(String::as_str)
    }

    /// Number of distinct tokens, which is also the next free id (the vocabulary size a model's
    /// embedding and output layer need).
    pub fn len(&self) -> usize {
        self.idx2word.len()
    }

    /// Whether no token has been added yet.
    pub fn is_empty(&self) -> bool {
        self.idx2word.is_empty()
    }
}

/// How a line becomes tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tokenizer {
    /// Whitespace-separated words, then `<eos>` (needle's and PyTorch's word_language_model).
    Words,
    /// Every character (Unicode scalar), then `'\n'`.
    Chars,
}

impl Tokenizer {
    /// `"word"` or `"char"`.
    pub fn parse(s: &str) -> Result<Tokenizer> {
        match s {
            "word" | "words" => Ok(Tokenizer::Words),
            "char" | "chars" => Ok(Tokenizer::Chars),
            other => Err(Error::invalid(
                "Tokenizer::parse",
                format!("unknown tokenizer {other:?}; use \"word\" or \"char\""),
            )),
        }
    }
}

/// A tokenised corpus: one dictionary shared by the splits.
#[derive(Clone, Debug)]
pub struct Corpus {
    /// Every token seen in any split, so ids in all three splits index one vocabulary.
    pub dictionary: Dictionary,
    /// Token ids of `train.txt`, in reading order (feed to [`batchify`]).
    pub train: Vec<usize>,
    /// Empty when the directory has no `valid.txt`.
    pub valid: Vec<usize>,
    /// Token ids of `test.txt`, in reading order.
    pub test: Vec<usize>,
    /// True when `SHA256SUMS` listed every file read and all digests matched.
    pub verified: bool,
}

impl Corpus {
    /// Reads `train.txt`, `valid.txt` (optional) and `test.txt` from `dir` (each may be `.gz`,
    /// tried first, and is checked against `SHA256SUMS` when listed there), at most `max_lines`
    /// lines of each. As needle, every split adds its unseen tokens to the dictionary.
    pub fn load(
        dir: impl AsRef<Path>,
        tokenizer: Tokenizer,
        max_lines: Option<usize>,
    ) -> Result<Corpus> {
        let dir = dir.as_ref();
        let mut dictionary = Dictionary::new();
        let mut verified = true;
        let mut split = |name: &str, required: bool| -> Result<Vec<usize>> {
            let Some(path) = find(dir, name, required)? else {
                return Ok(Vec::new());
            };
            let (ids, checksum) = read_split(&path, tokenizer, max_lines, &mut dictionary)?;
            verified &= checksum == Checksum::Verified;
            Ok(ids)
        };
        let train = split("train.txt", true)?;
        let valid = split("valid.txt", false)?;
        let test = split("test.txt", true)?;
        Ok(Corpus {
            dictionary,
            train,
            valid,
            test,
            verified,
        })
    }
}

/// The ids of `text`'s first `max_lines` lines, adding new tokens to `dict`.
pub fn tokenize(
    text: &str,
    tokenizer: Tokenizer,
    max_lines: Option<usize>,
    dict: &mut Dictionary,
) -> Vec<usize> {
    let mut ids = Vec::new();
    for line in text.lines().take(max_lines.unwrap_or(usize::MAX)) {
        tokenize_line(line, tokenizer, dict, &mut ids);
    }
    ids
}

fn tokenize_line(line: &str, tokenizer: Tokenizer, dict: &mut Dictionary, ids: &mut Vec<usize>) {
    let mut buf = [0u8; 4];
    match tokenizer {
        Tokenizer::Words => {
            ids.extend(line.split_whitespace().map(|w| dict.add_word(w)));
            ids.push(dict.add_word(EOS));
        }
        Tokenizer::Chars => {
            ids.extend(line.chars().map(|c| dict.add_word(c.encode_utf8(&mut buf))));
            ids.push(dict.add_word("\n"));
        }
    }
}

/// The ids of the first `max_lines` lines of the file at `path` (raw or gzip), adding new
/// tokens to `dict`: needle's `Corpus.tokenize`, one file at a time (checked against a
/// `SHA256SUMS` beside it when that lists the file).
pub fn tokenize_file(
    path: impl AsRef<Path>,
    tokenizer: Tokenizer,
    max_lines: Option<usize>,
    dict: &mut Dictionary,
) -> Result<Vec<usize>> {
    read_split(path.as_ref(), tokenizer, max_lines, dict).map(|(ids, _)| ids)
}

/// The ids of the first `max_lines` lines of the file at `path` (raw or gzip, told apart by
/// the gzip magic), read a line at a time through the decoder so that a line limit stops the
/// reading early: a large compressed corpus is never inflated whole. A file `SHA256SUMS`
/// lists is hashed in full first (a chunk at a time), since a digest covers the whole file.
fn read_split(
    path: &Path,
    tokenizer: Tokenizer,
    max_lines: Option<usize>,
    dict: &mut Dictionary,
) -> Result<(Vec<usize>, Checksum)> {
    let checksum = check_sha256_file(OP, path)?;
    let cannot = |e: std::io::Error| file_error(OP, path, format!("cannot read: {e}"));
    let mut file = File::open(path).map_err(cannot)?;
    let mut magic = [0u8; 2];
    let got = read_up_to(&mut file, &mut magic).map_err(cannot)?;
    file.seek(SeekFrom::Start(0)).map_err(cannot)?;
    let mut reader: Box<dyn BufRead> = if got == 2 && magic == [0x1f, 0x8b] {
        Box::new(BufReader::new(MultiGzDecoder::new(file)))
    } else {
        Box::new(BufReader::new(file))
    };
    let mut ids = Vec::new();
    let mut line = Vec::new();
    for n in 0..max_lines.unwrap_or(usize::MAX) {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| file_error(OP, path, format!("cannot read line {}: {e}", n + 1)))?;
        if read == 0 {
            break;
        }
        // `str::lines` semantics: the newline and a carriage return before it are not text.
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        let text = std::str::from_utf8(&line)
            .map_err(|e| file_error(OP, path, format!("line {} is not UTF-8 text: {e}", n + 1)))?;
        tokenize_line(text, tokenizer, dict, &mut ids);
    }
    Ok((ids, checksum))
}

/// Reads until `buf` is full or the file ends; the number of bytes read.
fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// `dir/name(.gz)`; `None` for a missing optional file, an error for a required one.
fn find(dir: &Path, name: &str, required: bool) -> Result<Option<PathBuf>> {
    match super::find_maybe_gz(dir, name) {
        None if required => {
            let raw = dir.join(name);
            Err(file_error(
                OP,
                &raw,
                format!("not found (nor {}.gz)", raw.display()),
            ))
        }
        found => Ok(found),
    }
}

/// needle's `batchify`: the first `n * batch_size` tokens as an i64 array (n, batch_size) whose
/// column j is the j-th consecutive run of n tokens, `n = len / batch_size` (the rest dropped).
pub fn batchify(data: &[usize], batch_size: usize) -> Result<NDArray> {
    const OP: &str = "batchify";
    if batch_size == 0 {
        return Err(Error::invalid(OP, "batch_size must be at least 1"));
    }
    let n = data.len() / batch_size;
    if n == 0 {
        return Err(Error::invalid(
            OP,
            format!(
                "{} tokens cannot fill one row of batch_size {batch_size}",
                data.len()
            ),
        ));
    }
    let ids: Vec<i64> = data[..n * batch_size].iter().map(|&t| t as i64).collect();
    NDArray::from_vec(ids, &[batch_size, n])?
        .transpose(0, 1)?
        .compact()
}

/// needle's `get_batch`: rows `i .. i + s` of `batches` as the input (s, batch_size) and rows
/// `i + 1 .. i + 1 + s` flattened as the target (s * batch_size), `s = min(bptt, rows - 1 - i)`.
pub fn get_batch(batches: &NDArray, i: usize, bptt: usize) -> Result<(NDArray, NDArray)> {
    const OP: &str = "get_batch";
    if batches.ndim() != 2 {
        return Err(Error::invalid(
            OP,
            format!(
                "batches must be (rows, batch_size) as batchify makes them, got shape {:?}",
                batches.shape()
            ),
        ));
    }
    let rows = batches.shape()[0];
    if bptt == 0 || i + 1 >= rows {
        return Err(Error::invalid(
            OP,
            format!("no window at row {i} with bptt {bptt}: batches has {rows} rows (need i + 1 < rows, bptt >= 1)"),
        ));
    }
    let s = bptt.min(rows - 1 - i);
    let range = |a: usize, b: usize| SliceArg::Range {
        start: Some(a as isize),
        stop: Some(b as isize),
        step: 1,
    };
    let data = batches.slice(&[range(i, i + s)])?;
    let target = batches.slice(&[range(i + 1, i + 1 + s)])?.reshape(&[-1])?;
    Ok((data, target))
}

/// The perplexity on `test` of the add-one-smoothed unigram model estimated on `train` over a
/// vocabulary of `vocab` tokens: the baseline a language model has to beat.
pub fn unigram_perplexity(train: &[usize], test: &[usize], vocab: usize) -> Result<f64> {
    const OP: &str = "unigram_perplexity";
    if test.is_empty() || vocab == 0 {
        return Err(Error::invalid(
            OP,
            "needs a non-empty test set and vocabulary",
        ));
    }
    let mut counts = vec![0usize; vocab];
    for &t in train.iter().chain(test) {
        if t >= vocab {
            return Err(Error::invalid(
                OP,
                format!("token id {t} is outside the vocabulary of {vocab}"),
            ));
        }
    }
    for &t in train {
        counts[t] += 1;
    }
    let total = (train.len() + vocab) as f64;
    let nll: f64 = test
        .iter()
        .map(|&t| -((counts[t] + 1) as f64 / total).ln())
        .sum();
    Ok((nll / test.len() as f64).exp())
}
