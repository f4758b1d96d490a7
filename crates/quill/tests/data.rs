//! The data layer: IDX reading (raw and gzip, every malformed case, SHA256SUMS), MNIST-format
//! loading (fixtures and the real data/mnist), TensorDataset gathers, DataLoader coverage, order
//! and shutdown, and transforms against naive references.

use flate2::write::GzEncoder;
use flate2::Compression;
use quill::data::{
    read_idx, read_idx_with_checksum, sha256_hex, Checksum, Compose, DataLoader, Dataset, Mnist,
    Normalize, RandomCrop, RandomHorizontalFlip, TensorDataset, Transform,
};
use quill::{DType, NDArray, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A fresh, empty directory for one test.
fn test_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("data-tests")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn idx_bytes(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut v = vec![0, 0, 8, dims.len() as u8];
    for d in dims {
        v.extend_from_slice(&d.to_be_bytes());
    }
    v.extend_from_slice(data);
    v
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn idx_round_trip_raw_and_gz() {
    let dir = test_dir("round_trip");
    let pixels: Vec<u8> = (0..3 * 4 * 5).map(|i| (i * 7 % 256) as u8).collect();
    let labels: Vec<u8> = vec![3, 1, 4, 1, 5, 9, 2];
    for (name, bytes) in [
        ("img", idx_bytes(&[3, 4, 5], &pixels)),
        ("img.gz", gz(&idx_bytes(&[3, 4, 5], &pixels))),
        // Detection is by content: a gzip file without .gz and a raw file with it both read.
        ("img_gz_no_suffix", gz(&idx_bytes(&[3, 4, 5], &pixels))),
        ("raw_named.gz", idx_bytes(&[3, 4, 5], &pixels)),
    ] {
        let a = read_idx(write(&dir, name, &bytes)).unwrap();
        assert_eq!(a.dtype(), DType::U8, "{name}");
        assert_eq!(a.shape(), &[3, 4, 5], "{name}");
        assert_eq!(a.to_vec::<u8>().unwrap(), pixels, "{name}");
    }
    for (name, bytes) in [
        ("lab", idx_bytes(&[7], &labels)),
        ("lab.gz", gz(&idx_bytes(&[7], &labels))),
    ] {
        let (a, chk) = read_idx_with_checksum(write(&dir, name, &bytes)).unwrap();
        assert_eq!(chk, Checksum::NoSumsFile);
        assert_eq!(a.shape(), &[7]);
        assert_eq!(a.to_vec::<u8>().unwrap(), labels);
    }
    // Empty arrays are valid IDX files too.
    let a = read_idx(write(&dir, "empty", &idx_bytes(&[0, 28, 28], &[]))).unwrap();
    assert_eq!(a.shape(), &[0, 28, 28]);
}

#[test]
fn malformed_idx_errors_name_the_file() {
    let dir = test_dir("malformed");
    let good = idx_bytes(&[2, 3, 3], &[1; 18]);
    let mut wrong_magic = good.clone();
    wrong_magic[2] = 0x0d; // f32 element type
    let mut bad_ndim = good.clone();
    bad_ndim[3] = 0;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty_file", vec![], "truncated header"),
        ("short_magic", vec![0, 0, 8], "truncated header"),
        ("short_dims", good[..10].to_vec(), "truncated header"),
        (
            "short_data",
            good[..good.len() - 1].to_vec(),
            "truncated data",
        ),
        ("no_data", good[..16].to_vec(), "truncated data"),
        ("wrong_magic", wrong_magic, "wrong magic"),
        ("zero_ndim", bad_ndim, "wrong magic"),
        ("text", b"hello, world, not idx".to_vec(), "wrong magic"),
        (
            "extra_data",
            [good.clone(), vec![0]].concat(),
            "dims do not match",
        ),
        (
            "dims_too_small",
            idx_bytes(&[2, 3, 2], &[1; 18]),
            "dims do not match",
        ),
        // Sizes a corrupt header might claim: must fail without trying to allocate them.
        (
            "huge",
            idx_bytes(&[u32::MAX, 1 << 30], &[1; 4]),
            "truncated data",
        ),
        (
            "overflow",
            idx_bytes(&[u32::MAX, u32::MAX, u32::MAX, u32::MAX], &[1; 4]),
            "overflow",
        ),
    ];
    for (name, bytes, what) in cases {
        for (suffix, content) in [("", bytes.clone()), (".gz", gz(&bytes))] {
            let path = write(&dir, &format!("{name}{suffix}"), &content);
            let msg = read_idx(&path).expect_err(name).to_string();
            assert!(
                msg.contains(&path.display().to_string()),
                "{name}{suffix}: {msg}"
            );
            assert!(
                msg.contains(what),
                "{name}{suffix}: expected {what:?} in {msg}"
            );
        }
    }
    // A gzip stream cut short is corrupt, not silently short.
    let cut = gz(&good);
    let path = write(&dir, "cut.gz", &cut[..cut.len() / 2]);
    let msg = read_idx(&path).unwrap_err().to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    let missing = dir.join("does-not-exist");
    let msg = read_idx(&missing).unwrap_err().to_string();
    assert!(msg.contains(&missing.display().to_string()), "{msg}");
}

#[test]
fn sha256sums_checked_when_present() {
    let dir = test_dir("sha");
    let bytes = gz(&idx_bytes(&[4], &[0, 1, 2, 3]));
    let path = write(&dir, "lab.gz", &bytes);
    let other = write(&dir, "other", &idx_bytes(&[1], &[7]));
    assert_eq!(
        read_idx_with_checksum(&path).unwrap().1,
        Checksum::NoSumsFile
    );
    let digest = sha256_hex(&bytes);
    assert_eq!(digest.len(), 64);
    // Known vector: sha256("abc").
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    std::fs::write(dir.join("SHA256SUMS"), format!("{digest}  lab.gz\n")).unwrap();
    assert_eq!(read_idx_with_checksum(&path).unwrap().1, Checksum::Verified);
    assert_eq!(
        read_idx_with_checksum(&other).unwrap().1,
        Checksum::NotListed
    );
    // Binary-mode marker and upper-case hex are accepted.
    std::fs::write(
        dir.join("SHA256SUMS"),
        format!("# comment\n\n{} *lab.gz\n", digest.to_uppercase()),
    )
    .unwrap();
    assert_eq!(read_idx_with_checksum(&path).unwrap().1, Checksum::Verified);

    let wrong = "0".repeat(64);
    std::fs::write(dir.join("SHA256SUMS"), format!("{wrong}  lab.gz\n")).unwrap();
    let msg = read_idx(&path).unwrap_err().to_string();
    let shown = path.display().to_string();
    let parts: [&str; 4] = [&shown, &wrong, &digest, "mismatch"];
    for part in parts {
        assert!(msg.contains(part), "{part:?} not in {msg}");
    }
    std::fs::write(dir.join("SHA256SUMS"), "not a checksum line\n").unwrap();
    let msg = read_idx(&path).unwrap_err().to_string();
    assert!(
        msg.contains("SHA256SUMS") && msg.contains("line 1"),
        "{msg}"
    );
}

/// Writes an MNIST-format split of `n` images of `h x w` into `dir`.
fn write_mnist_fixture(dir: &Path, prefix: &str, n: u32, h: u32, w: u32, gzip: bool) -> Vec<u8> {
    let pixels: Vec<u8> = (0..n * h * w).map(|i| (i * 37 % 256) as u8).collect();
    let labels: Vec<u8> = (0..n).map(|i| (i * 3 % 10) as u8).collect();
    let sfx = if gzip { ".gz" } else { "" };
    let f = |b: Vec<u8>| if gzip { gz(&b) } else { b };
    write(
        dir,
        &format!("{prefix}-images-idx3-ubyte{sfx}"),
        &f(idx_bytes(&[n, h, w], &pixels)),
    );
    write(
        dir,
        &format!("{prefix}-labels-idx1-ubyte{sfx}"),
        &f(idx_bytes(&[n], &labels)),
    );
    pixels
}

#[test]
fn mnist_format_fixture_loads() {
    let dir = test_dir("mnist_fixture");
    let pixels = write_mnist_fixture(&dir, "train", 5, 28, 28, true);
    write_mnist_fixture(&dir, "t10k", 3, 28, 28, false);
    let m = Mnist::load(&dir, true).unwrap();
    assert_eq!((m.len(), m.verified), (5, false));
    assert_eq!(m.images.shape(), &[5, 1, 28, 28]);
    assert_eq!(m.images.dtype(), DType::F32);
    assert_eq!(m.labels.dtype(), DType::I64);
    let want: Vec<f32> = pixels.iter().map(|&p| p as f32 / 255.0).collect();
    assert_eq!(m.images.to_vec::<f32>().unwrap(), want);
    assert_eq!(m.labels.to_vec::<i64>().unwrap(), vec![0, 3, 6, 9, 2]);
    assert_eq!(m.flat_images().unwrap().shape(), &[5, 784]);
    assert_eq!(Mnist::load(&dir, false).unwrap().len(), 3);

    // Mismatched counts, out-of-range labels and missing files name the file.
    let bad = test_dir("mnist_bad");
    write_mnist_fixture(&bad, "train", 4, 28, 28, false);
    let lab = write(
        &bad,
        "train-labels-idx1-ubyte",
        &idx_bytes(&[3], &[1, 2, 3]),
    );
    let msg = Mnist::load(&bad, true).unwrap_err().to_string();
    assert!(
        msg.contains(&lab.display().to_string()) && msg.contains("4 images"),
        "{msg}"
    );
    write(
        &bad,
        "train-labels-idx1-ubyte",
        &idx_bytes(&[4], &[1, 2, 10, 3]),
    );
    let msg = Mnist::load(&bad, true).unwrap_err().to_string();
    assert!(msg.contains("label 10 at index 2"), "{msg}");
    let msg = Mnist::load(&bad, false).unwrap_err().to_string();
    assert!(
        msg.contains("t10k-images-idx3-ubyte") && msg.contains("not found"),
        "{msg}"
    );
}

#[test]
fn real_mnist_loads_and_verifies() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/mnist");
    // First labels of each split, as in the canonical files.
    for (train, n, first) in [
        (true, 60000, [5, 0, 4, 1, 9]),
        (false, 10000, [7, 2, 1, 0, 4]),
    ] {
        let m = Mnist::load(&dir, train).unwrap();
        assert!(m.verified, "SHA256SUMS must list and match both files");
        assert_eq!(m.len(), n);
        assert_eq!(m.images.shape(), &[n, 1, 28, 28]);
        let labels = m.labels.to_vec::<i64>().unwrap();
        assert_eq!(labels[..5], first);
        assert!(labels.iter().all(|l| (0..10).contains(l)));
        let mut counts = [0usize; 10];
        labels.iter().for_each(|&l| counts[l as usize] += 1);
        assert!(counts.iter().all(|&c| c > n / 20), "{counts:?}");
        let px = m.images.to_vec::<f32>().unwrap();
        assert!(px.iter().all(|&p| (0.0..=1.0).contains(&p)));
        assert!(px.contains(&1.0) && px.contains(&0.0));
        if !train {
            // One shuffled epoch through the loader sees every test image once.
            let loader = DataLoader::new(m.into_dataset().unwrap(), 128)
                .unwrap()
                .shuffle(true);
            let mut seen = 0;
            let mut sum = 0i64;
            for b in loader.epoch(0) {
                let (x, y) = b.unwrap();
                assert_eq!(&x.shape()[1..], &[1, 28, 28]);
                seen += y.shape()[0];
                sum += y.to_vec::<i64>().unwrap().iter().sum::<i64>();
            }
            assert_eq!((seen, sum), (n, labels.iter().sum::<i64>()));
        }
    }
}

/// Sample i has inputs [i, i + 0.5] and target i, so a batch says which samples it holds.
fn numbered(n: usize) -> TensorDataset {
    let x: Vec<f32> = (0..n).flat_map(|i| [i as f32, i as f32 + 0.5]).collect();
    let y: Vec<i64> = (0..n as i64).collect();
    TensorDataset::new(
        NDArray::from_vec(x, &[n, 2]).unwrap(),
        NDArray::from_vec(y, &[n]).unwrap(),
    )
    .unwrap()
}

/// The targets of each batch of an epoch, checking that inputs agree with targets.
fn epoch_targets(loader: &DataLoader, epoch: u64) -> Vec<Vec<i64>> {
    loader
        .epoch(epoch)
        .map(|b| {
            let (x, y) = b.unwrap();
            let y = y.to_vec::<i64>().unwrap();
            assert_eq!(x.shape(), &[y.len(), 2]);
            let want: Vec<f32> = y.iter().flat_map(|&i| [i as f32, i as f32 + 0.5]).collect();
            assert_eq!(x.to_vec::<f32>().unwrap(), want);
            y
        })
        .collect()
}

#[test]
fn loader_covers_every_sample_once() {
    for n in [0usize, 1, 7, 10, 13, 64] {
        for bs in [1usize, 3, 4, 5, 10, 100] {
            for shuffle in [false, true] {
                for drop_last in [false, true] {
                    let loader = DataLoader::new(numbered(n), bs)
                        .unwrap()
                        .shuffle(shuffle)
                        .seed(9)
                        .drop_last(drop_last);
                    let ctx = format!("n {n} bs {bs} shuffle {shuffle} drop_last {drop_last}");
                    let batches = epoch_targets(&loader, 3);
                    assert_eq!(batches.len(), loader.len(), "{ctx}");
                    let full = n / bs;
                    for (k, b) in batches.iter().enumerate() {
                        let want = if k < full { bs } else { n % bs };
                        assert_eq!(b.len(), want, "{ctx}");
                    }
                    let seen: Vec<i64> = batches.concat();
                    let unique: HashSet<i64> = seen.iter().copied().collect();
                    assert_eq!(unique.len(), seen.len(), "duplicates: {ctx}");
                    let expect = if drop_last { full * bs } else { n };
                    assert_eq!(seen.len(), expect, "{ctx}");
                    if !shuffle {
                        assert_eq!(seen, (0..expect as i64).collect::<Vec<_>>(), "{ctx}");
                    }
                    // The visited order is the documented one.
                    let order: Vec<i64> = loader.indices(3).iter().map(|&i| i as i64).collect();
                    assert_eq!(seen, order[..expect], "{ctx}");
                }
            }
        }
    }
}

#[test]
fn shuffle_order_is_seeded_and_changes_per_epoch() {
    let make = |seed| {
        DataLoader::new(numbered(50), 8)
            .unwrap()
            .shuffle(true)
            .seed(seed)
    };
    let (a, b, c) = (make(1), make(1), make(2));
    assert_eq!(epoch_targets(&a, 0), epoch_targets(&b, 0));
    assert_eq!(epoch_targets(&a, 5), epoch_targets(&b, 5));
    assert_ne!(epoch_targets(&a, 0), epoch_targets(&a, 1));
    assert_ne!(epoch_targets(&a, 0), epoch_targets(&c, 0));
    assert_ne!(a.indices(0), (0..50).collect::<Vec<_>>());
    // Epoch streams are independent of how many epochs ran before.
    assert_eq!(epoch_targets(&make(1), 7), epoch_targets(&a, 7));
}

/// Counts batches built and can panic on a chosen index, to watch the worker thread.
struct Probe {
    inner: TensorDataset,
    built: Arc<AtomicUsize>,
    panic_on: Option<usize>,
}

impl Dataset for Probe {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn get_batch(&self, indices: &[usize]) -> Result<(NDArray, NDArray)> {
        if self.panic_on.is_some_and(|p| indices.contains(&p)) {
            panic!("probe panic");
        }
        self.built.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(1));
        self.inner.get_batch(indices)
    }
}

#[test]
fn dropping_an_epoch_early_stops_and_joins_the_worker() {
    let built = Arc::new(AtomicUsize::new(0));
    let ds: Arc<dyn Dataset> = Arc::new(Probe {
        inner: numbered(1000),
        built: built.clone(),
        panic_on: None,
    });
    let loader = DataLoader::from_arc(ds.clone(), 1).unwrap().prefetch(2);
    let start = Instant::now();
    {
        let mut epoch = loader.epoch(0);
        epoch.next().unwrap().unwrap();
        epoch.next().unwrap().unwrap();
    }
    // After the drop the worker has been joined: it released its handle on the dataset (the
    // loader and `ds` hold the other two) and builds nothing more.
    assert_eq!(Arc::strong_count(&ds), 2);
    let after_drop = built.load(Ordering::SeqCst);
    assert!(after_drop <= 2 + 2 + 1, "worker ran ahead: {after_drop}");
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(built.load(Ordering::SeqCst), after_drop);
    assert!(start.elapsed() < Duration::from_secs(5));
    // Dropping one that was never polled, and one that was fully drained, is fine too.
    drop(loader.epoch(1));
    assert_eq!(loader.epoch(2).take(3).count(), 3);
    assert_eq!(Arc::strong_count(&ds), 2);
}

#[test]
fn worker_panic_is_reported_not_a_short_epoch() {
    let ds = Probe {
        inner: numbered(10),
        built: Arc::new(AtomicUsize::new(0)),
        panic_on: Some(6),
    };
    let loader = DataLoader::new(ds, 3).unwrap();
    let items: Vec<_> = loader.epoch(0).collect();
    assert_eq!(items.len(), 3);
    assert!(items[0].is_ok() && items[1].is_ok());
    let msg = items[2].as_ref().unwrap_err().to_string();
    assert!(
        msg.contains("panicked") && msg.contains("2 batches left"),
        "{msg}"
    );
}

#[test]
fn dataset_errors() {
    let ds = numbered(4);
    assert!(ds.get_batch(&[0, 4]).is_err());
    let (x, y) = ds.get(2).unwrap();
    assert_eq!(x.shape(), &[2]);
    assert_eq!(y.item::<i64>().unwrap(), 2);
    assert!(DataLoader::new(numbered(3), 0).is_err());
    let x = NDArray::zeros(&[3, 2], DType::F32).unwrap();
    let y = NDArray::zeros(&[4], DType::I64).unwrap();
    assert!(TensorDataset::new(x.clone(), y).is_err());
    assert!(TensorDataset::new(x, NDArray::scalar(1i64)).is_err());
    // Non-contiguous inputs (a transposed view) gather correctly.
    let base = NDArray::arange(0.0, 12.0, 1.0, DType::F32).unwrap();
    let t = base.reshape(&[3, 4]).unwrap().transpose(0, 1).unwrap(); // (4, 3)
    let ds = TensorDataset::new(t, NDArray::arange(0.0, 4.0, 1.0, DType::U8).unwrap()).unwrap();
    let (x, y) = ds.get_batch(&[3, 0, 3]).unwrap();
    assert_eq!(
        x.to_vec::<f32>().unwrap(),
        vec![3., 7., 11., 0., 4., 8., 3., 7., 11.]
    );
    assert_eq!(y.to_vec::<u8>().unwrap(), vec![3, 0, 3]);
}

fn images(shape: &[usize], seed: u64) -> NDArray {
    NDArray::rand(shape, seed, DType::F32).unwrap()
}

#[test]
fn normalize_matches_reference() {
    let x = images(&[3, 2, 4, 5], 1);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let y = Normalize::new(&[0.5, 0.25], &[2.0, 0.5])
        .unwrap()
        .apply(&x, &mut rng)
        .unwrap();
    let (xv, yv) = (x.to_vec::<f32>().unwrap(), y.to_vec::<f32>().unwrap());
    for (i, (a, b)) in xv.iter().zip(&yv).enumerate() {
        let c = (i / 20) % 2;
        let want = (a - [0.5, 0.25][c]) / [2.0, 0.5][c];
        assert_eq!(*b, want);
    }
    let flat = images(&[4, 784], 2);
    let y = Normalize::new(&[0.1307], &[0.3081])
        .unwrap()
        .apply(&flat, &mut rng)
        .unwrap();
    assert_eq!(y.shape(), &[4, 784]);
    assert!(Normalize::new(&[0.0], &[0.0]).is_err());
    assert!(Normalize::new(&[0.0, 1.0], &[1.0]).is_err());
    let three = Normalize::new(&[0.0; 3], &[1.0; 3]).unwrap();
    assert!(three.apply(&x, &mut rng).is_err());
    let ints = NDArray::zeros(&[2, 4], DType::I64).unwrap();
    assert!(three.apply(&ints, &mut rng).is_err());
}

/// Naive crop: build the zero-padded image explicitly, then read the window.
fn crop_reference(
    x: &[f32],
    [n, c, h, w]: [usize; 4],
    pad: usize,
    rng: &mut ChaCha8Rng,
) -> Vec<f32> {
    let (ph, pw) = (h + 2 * pad, w + 2 * pad);
    let mut out = Vec::new();
    for i in 0..n {
        let dy: usize = rng.random_range(0..=2 * pad);
        let dx: usize = rng.random_range(0..=2 * pad);
        for ch in 0..c {
            let mut padded = vec![0f32; ph * pw];
            for y in 0..h {
                for xx in 0..w {
                    padded[(y + pad) * pw + xx + pad] = x[((i * c + ch) * h + y) * w + xx];
                }
            }
            for y in 0..h {
                for xx in 0..w {
                    out.push(padded[(y + dy) * pw + xx + dx]);
                }
            }
        }
    }
    out
}

#[test]
fn random_crop_matches_reference() {
    for (shape, pad) in [
        ([5, 2, 6, 7], 2),
        ([16, 1, 28, 28], 4),
        ([3, 3, 4, 4], 6), // padding larger than the image: some crops are all zero
        ([2, 1, 5, 5], 0),
    ] {
        let x = images(&shape, 3);
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let got = RandomCrop::new(pad).apply(&x, &mut rng).unwrap();
        let mut rrng = ChaCha8Rng::seed_from_u64(11);
        let want = crop_reference(&x.to_vec::<f32>().unwrap(), shape, pad, &mut rrng);
        assert_eq!(got.shape(), &shape);
        assert_eq!(got.to_vec::<f32>().unwrap(), want, "{shape:?} pad {pad}");
        if pad == 0 {
            assert_eq!(want, x.to_vec::<f32>().unwrap());
        }
    }
    // A flat (n, 784) batch is read as (n, 1, 28, 28).
    let x = images(&[4, 784], 4);
    let flat = RandomCrop::new(4)
        .apply(&x, &mut ChaCha8Rng::seed_from_u64(5))
        .unwrap();
    let square = RandomCrop::new(4)
        .apply(
            &x.reshape(&[4, 1, 28, 28]).unwrap(),
            &mut ChaCha8Rng::seed_from_u64(5),
        )
        .unwrap();
    assert_eq!(flat.shape(), &[4, 784]);
    assert_eq!(
        flat.to_vec::<f32>().unwrap(),
        square.to_vec::<f32>().unwrap()
    );
    assert!(RandomCrop::new(1)
        .apply(&images(&[2, 10], 0), &mut ChaCha8Rng::seed_from_u64(0))
        .is_err());
}

#[test]
fn random_flip_matches_reference() {
    let shape = [9, 2, 3, 4];
    let x = images(&shape, 6);
    let xv = x.to_vec::<f32>().unwrap();
    let got = RandomHorizontalFlip::new(0.5)
        .apply(&x, &mut ChaCha8Rng::seed_from_u64(8))
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let mut flipped = 0;
    for i in 0..9 {
        let flip = rng.random::<f64>() < 0.5;
        flipped += flip as usize;
        for ch in 0..2 {
            for y in 0..3 {
                for xx in 0..4 {
                    let src = if flip { 3 - xx } else { xx };
                    let at = |col: usize| ((i * 2 + ch) * 3 + y) * 4 + col;
                    assert_eq!(got[at(xx)], xv[at(src)]);
                }
            }
        }
    }
    assert!(flipped > 0 && flipped < 9, "seed should flip some, not all");
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let all = RandomHorizontalFlip::new(1.0).apply(&x, &mut rng).unwrap();
    assert_eq!(
        all.to_vec::<f32>().unwrap(),
        x.flip(&[3]).unwrap().to_vec::<f32>().unwrap()
    );
    let none = RandomHorizontalFlip::new(0.0).apply(&x, &mut rng).unwrap();
    assert_eq!(none.to_vec::<f32>().unwrap(), xv);
}

#[test]
fn loader_transforms_are_seeded() {
    let n = 20;
    let x = images(&[n, 1, 6, 6], 7);
    let y = NDArray::arange(0.0, n as f64, 1.0, DType::I64).unwrap();
    let make = |seed| {
        let t = Compose(vec![
            Box::new(RandomCrop::new(2)),
            Box::new(RandomHorizontalFlip::new(0.5)),
            Box::new(Normalize::new(&[0.5], &[0.25]).unwrap()),
        ]);
        let ds = TensorDataset::new(x.clone(), y.clone()).unwrap();
        DataLoader::new(ds, 6)
            .unwrap()
            .shuffle(true)
            .seed(seed)
            .transform(t)
    };
    let run = |l: &DataLoader, e| -> Vec<Vec<f32>> {
        l.epoch(e)
            .map(|b| b.unwrap().0.to_vec::<f32>().unwrap())
            .collect()
    };
    let (a, b, c) = (make(3), make(3), make(4));
    assert_eq!(run(&a, 0), run(&b, 0));
    assert_ne!(run(&a, 0), run(&a, 1));
    assert_ne!(run(&a, 0), run(&c, 0));
    let shapes: Vec<_> = a.epoch(0).map(|b| b.unwrap().0.shape().to_vec()).collect();
    assert_eq!(
        shapes,
        vec![
            vec![6, 1, 6, 6],
            vec![6, 1, 6, 6],
            vec![6, 1, 6, 6],
            vec![2, 1, 6, 6]
        ]
    );
    // A transform error ends the epoch with that error.
    let ds = TensorDataset::new(
        images(&[4, 10], 0),
        NDArray::zeros(&[4], DType::I64).unwrap(),
    )
    .unwrap();
    let l = DataLoader::new(ds, 2)
        .unwrap()
        .transform(RandomCrop::new(1));
    let items: Vec<_> = l.epoch(0).collect();
    assert_eq!(items.len(), 1);
    assert!(items[0].is_err());
}
