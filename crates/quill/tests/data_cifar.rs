//! CIFAR-10 batches and the data-only unpickler, on fixtures written by Python's own `pickle`
//! and NumPy (tests/fixtures/cifar/make.py: protocols 2, 4, 5, Fortran order, and Python 2's
//! opcodes), checked against the formula the fixtures were made from; plus malformed pickles.

use quill::data::pickle::{unpickle, Value};
use quill::data::Cifar10;
use std::path::{Path, PathBuf};

const N: usize = 4;

fn fixture(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cifar")
        .join(name);
    std::fs::read(p).expect("fixture")
}

fn pixel(i: usize, j: usize) -> u8 {
    ((i * 7 + j * 3) % 256) as u8
}

fn label(i: usize) -> i64 {
    ((i * 3 + 1) % 10) as i64
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("quill-cifar-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn every_fixture_decodes_to_the_same_batch() {
    for name in [
        "proto2.pkl",
        "proto4.pkl",
        "proto5.pkl",
        "fortran.pkl",
        "py2.pkl",
    ] {
        let v = unpickle(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let data = v.get(v.root(), "data").and_then(|r| v.value(r));
        let Some(Value::Array(a)) = data else {
            panic!("{name}: no data array")
        };
        assert_eq!(a.shape, vec![N, 3072], "{name}");
        for i in 0..N {
            for j in 0..3072 {
                assert_eq!(a.data[i * 3072 + j], pixel(i, j), "{name} [{i}, {j}]");
            }
        }
        let labels = v.get(v.root(), "labels").and_then(|r| v.value(r));
        let got: Vec<i64> = match labels {
            Some(Value::List(items)) => items
                .iter()
                .map(|&r| match v.value(r) {
                    Some(Value::Int(l)) => *l,
                    other => panic!("{name}: label {other:?}"),
                })
                .collect(),
            Some(Value::Array(a)) => a
                .data
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            other => panic!("{name}: labels {other:?}"),
        };
        assert_eq!(got, (0..N).map(label).collect::<Vec<_>>(), "{name}");
    }
}

#[test]
fn load_reads_train_and_test_batches_as_scaled_images() {
    let dir = temp_dir("load");
    std::fs::write(dir.join("data_batch_1"), fixture("py2.pkl")).unwrap();
    std::fs::write(dir.join("data_batch_2"), fixture("proto5.pkl")).unwrap();
    std::fs::write(dir.join("test_batch"), fixture("proto4.pkl")).unwrap();
    let train = Cifar10::load(&dir, true).unwrap();
    assert_eq!(train.images.shape(), &[2 * N, 3, 32, 32]);
    let img: Vec<f32> = train.images.to_vec().unwrap();
    let lab: Vec<i64> = train.labels.to_vec().unwrap();
    for b in 0..2 {
        for i in 0..N {
            assert_eq!(lab[b * N + i], label(i));
            // Channel c, row y, column x is byte c*1024 + y*32 + x of the row.
            for (c, y, x) in [(0, 0, 0), (1, 5, 7), (2, 31, 31)] {
                let j = c * 1024 + y * 32 + x;
                let got = img[(b * N + i) * 3072 + j];
                assert_eq!(got, f32::from(pixel(i, j)) / 255.0);
            }
        }
    }
    let test = Cifar10::load(&dir, false).unwrap();
    assert_eq!(test.len(), N);
    let ds = test.into_dataset().unwrap();
    use quill::data::Dataset;
    let (x, y) = ds.get(3).unwrap();
    assert_eq!(x.shape(), &[3, 32, 32]);
    assert_eq!(y.item::<i64>().unwrap(), label(3));
}

#[test]
fn load_errors_name_the_file() {
    let dir = temp_dir("errors");
    let e = Cifar10::load(&dir, true).unwrap_err().to_string();
    assert!(e.contains("data_batch_1"), "{e}");
    std::fs::write(dir.join("test_batch"), b"not a pickle").unwrap();
    let e = Cifar10::load(&dir, false).unwrap_err().to_string();
    assert!(e.contains("test_batch") && e.contains("opcode"), "{e}");
    // A dict without 'data'.
    std::fs::write(dir.join("test_batch"), b"\x80\x02}q\x00.").unwrap();
    let e = Cifar10::load(&dir, false).unwrap_err().to_string();
    assert!(e.contains("'data'"), "{e}");
}

#[test]
fn malformed_pickles_are_errors_not_panics() {
    let good = fixture("proto4.pkl");
    // Every truncation of a valid pickle fails cleanly.
    for cut in (0..good.len()).step_by(97) {
        assert!(unpickle(&good[..cut]).is_err(), "cut at {cut}");
    }
    // A global that would run code.
    let evil = b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85R.";
    let e = unpickle(evil).unwrap_err().to_string();
    assert!(e.contains("os.system"), "{e}");
    // A length far beyond the data.
    let huge = b"\x80\x04\x8e\xff\xff\xff\xff\xff\xff\xff\x7f";
    assert!(unpickle(huge)
        .unwrap_err()
        .to_string()
        .contains("truncated"));
    // An array whose byte count disagrees with its shape.
    let mut bad = good.clone();
    let pos = bad
        .windows(3)
        .position(|w| w == b"M\x00\x0c")
        .expect("the 3072 in the shape");
    bad[pos + 1] = 0x01; // 3073 columns
    assert!(unpickle(&bad).is_err());
    // Stack underflow and an unknown memo key.
    assert!(unpickle(b"\x80\x02R.").is_err());
    assert!(unpickle(b"\x80\x02h\x05.").is_err());
}
