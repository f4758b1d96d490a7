//! Careless and hostile dataset files beyond the pickle format itself: labels outside the ten
//! classes in CIFAR-10 and MNIST files (a typed error naming the file, the index and the
//! label), batch size 0, and a gzipped corpus whose line limit must stop the reading early.

use flate2::{write::GzEncoder, Compression};
use quill::data::{Cifar10, Corpus, DataLoader, Mnist, MnistRaw, TensorDataset, Tokenizer};
use quill::NDArray;
use std::io::Write;
use std::path::{Path, PathBuf};

fn test_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("data-hostile")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// A protocol-5 CIFAR batch as NumPy writes it: `{"data": uint8 (n, 3072), "labels": [...]}`,
/// pixel j of image i being `(7 i + 3 j) % 256`.
fn batch(labels: &[i32]) -> Vec<u8> {
    let n = labels.len();
    let pixels: Vec<u8> = (0..n * 3072)
        .map(|k| ((k / 3072) * 7 + (k % 3072) * 3) as u8)
        .collect();
    let mut b = b"\x80\x05}(\x8c\x04data".to_vec();
    b.extend_from_slice(b"\x8c\x13numpy._core.numeric\x8c\x0b_frombuffer\x93(\x96");
    b.extend_from_slice(&(pixels.len() as u64).to_le_bytes());
    b.extend_from_slice(&pixels);
    b.extend_from_slice(b"\x8c\x05numpy\x8c\x05dtype\x93\x8c\x02u1\x89\x88\x87R");
    b.extend_from_slice(b"(K\x03\x8c\x01|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb");
    b.push(b'J');
    b.extend_from_slice(&(n as i32).to_le_bytes());
    b.extend_from_slice(b"M\x00\x0c\x86\x8c\x01CtR\x8c\x06labels](");
    for l in labels {
        b.push(b'J');
        b.extend_from_slice(&l.to_le_bytes());
    }
    b.extend_from_slice(b"eu.");
    b
}

#[test]
fn cifar_labels_outside_the_ten_classes_name_file_index_and_label() {
    let dir = test_dir("cifar-labels");
    std::fs::write(dir.join("data_batch_1"), batch(&[3, 0, 9])).unwrap();
    let (pixels, labels) = Cifar10::load_raw(&dir, true).unwrap();
    assert_eq!(labels, vec![3, 0, 9]);
    let want: Vec<u8> = (0..3 * 3072)
        .map(|k| ((k / 3072) * 7 + (k % 3072) * 3) as u8)
        .collect();
    assert_eq!(pixels, want);
    for (bad, at) in [(99, 1), (-1, 2), (10, 0)] {
        let mut ls = vec![1, 2, 3];
        ls[at] = bad;
        std::fs::write(dir.join("data_batch_2"), batch(&ls)).unwrap();
        let e = Cifar10::load(&dir, true).unwrap_err().to_string();
        assert!(
            e.contains("data_batch_2") && e.contains(&format!("label {bad} at index {at}")),
            "{e}"
        );
    }
}

#[test]
fn cifar_batch_that_calls_a_global_is_refused_naming_it_and_the_file() {
    let dir = test_dir("cifar-evil");
    let evil = b"\x80\x02}X\x04\x00\x00\x00datacos\nsystem\nX\x04\x00\x00\x00true\x85Rs.";
    std::fs::write(dir.join("test_batch"), evil).unwrap();
    let e = Cifar10::load(&dir, false).unwrap_err().to_string();
    assert!(e.contains("test_batch") && e.contains("os.system"), "{e}");
}

fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut v = vec![0, 0, 8, dims.len() as u8];
    for d in dims {
        v.extend_from_slice(&d.to_be_bytes());
    }
    v.extend_from_slice(data);
    v
}

#[test]
fn mnist_label_200_names_file_index_and_label() {
    let dir = test_dir("mnist-labels");
    let images = dir.join("train-images-idx3-ubyte.gz");
    let labels = dir.join("train-labels-idx1-ubyte");
    std::fs::write(&images, gz(&idx(&[3, 2, 2], &[7; 12]))).unwrap();
    std::fs::write(&labels, idx(&[3], &[1, 9, 0])).unwrap();
    let raw = MnistRaw::read(&images, &labels).unwrap();
    assert_eq!(
        (raw.shape, raw.labels.as_slice()),
        ([3, 2, 2], &[1u8, 9, 0][..])
    );
    std::fs::write(&labels, idx(&[3], &[1, 200, 0])).unwrap();
    for e in [
        Mnist::load(&dir, true).unwrap_err().to_string(),
        MnistRaw::read(&images, &labels).unwrap_err().to_string(),
    ] {
        assert!(
            e.contains("train-labels-idx1-ubyte") && e.contains("label 200 at index 1"),
            "{e}"
        );
    }
}

#[test]
fn loaders_refuse_batch_size_zero_naming_it() {
    let ds = TensorDataset::new(
        NDArray::from_vec(vec![0f32; 4], &[4, 1]).unwrap(),
        NDArray::from_vec(vec![0i64; 4], &[4]).unwrap(),
    )
    .unwrap();
    let e = DataLoader::new(ds, 0).unwrap_err().to_string();
    assert!(e.contains("batch_size") && e.contains("got 0"), "{e}");
    assert!(quill::data::batchify(&[1, 2, 3], 0)
        .unwrap_err()
        .to_string()
        .contains("batch_size"));
}

#[test]
fn a_line_limit_stops_reading_a_gzipped_corpus_early() {
    let dir = test_dir("corpus-stream");
    // Two good lines, then a large stretch of text, then bytes that are not gzip at all: a
    // reader that inflates the whole file fails on them, one that stops after the limit never
    // reaches them.
    let mut text = b"the cat\nthe dog\n".to_vec();
    text.extend(std::iter::repeat_n(b"filler line\n".as_slice(), 200_000).flatten());
    let mut file = gz(&text);
    file.extend_from_slice(b"this is not a gzip member");
    std::fs::write(dir.join("train.txt.gz"), &file).unwrap();
    std::fs::write(dir.join("test.txt"), "the\r\ncat\n").unwrap();
    let c = Corpus::load(&dir, Tokenizer::Words, Some(2)).unwrap();
    let w = |s: &str| c.dictionary.get(s).unwrap();
    let eos = w("<eos>");
    assert_eq!(
        c.train,
        vec![w("the"), w("cat"), eos, w("the"), w("dog"), eos]
    );
    assert_eq!(
        c.test,
        vec![w("the"), eos, w("cat"), eos],
        "CRLF is a line end"
    );
    assert_eq!(c.dictionary.get("filler"), None);
    let e = Corpus::load(&dir, Tokenizer::Words, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("train.txt.gz"), "{e}");
}
