//! `quill evaluate` and `quill predict` through the `quill` binary on a quickly trained MLP:
//! the accuracy, per-class lines and confusion matrix agree with each other, the two PNGs are
//! written and are images of the stated size, and digits drawn here (not from MNIST's files:
//! a dark stroke on light paper, a light ring on black, at 140 x 140) are classified.

mod common;

use common::{assert_refused, quill, scratch};
use image::{GrayImage, Luma};

fn stdout(o: &std::process::Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A 140 x 140 picture: `ink` where `on(y, x)`, `paper` elsewhere.
fn draw(path: &std::path::Path, ink: u8, paper: u8, on: impl Fn(f64, f64) -> bool) {
    let img = GrayImage::from_fn(140, 140, |x, y| {
        Luma([if on(y as f64, x as f64) { ink } else { paper }])
    });
    img.save(path).unwrap();
}

#[test]
fn evaluate_and_predict_a_trained_mlp() {
    let dir = scratch("eval", "mlp");
    let out = dir.to_str().unwrap();
    stdout(&quill(&["--epochs", "1", "--limit", "10000", "--out", out]));
    let ck = format!("{out}/checkpoint.safetensors");
    let text = stdout(&quill(&["evaluate", "--checkpoint", &ck]));
    // "test accuracy A% (C of N)": the confusion matrix's diagonal sums to C, its cells to N.
    let head = text.lines().next().unwrap();
    let nums: Vec<f64> = head
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|w| w.parse().ok())
        .collect();
    let (acc, correct, n) = (nums[0], nums[1] as usize, nums[2] as usize);
    assert!(acc > 85.0 && n == 10_000, "{head}");
    let rows: Vec<Vec<usize>> = text
        .lines()
        .skip_while(|l| !l.starts_with("confusion matrix"))
        .skip(2)
        .take(10)
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .map(|c| c.parse().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 10, "{text}");
    assert_eq!((0..10).map(|k| rows[k][k]).sum::<usize>(), correct);
    assert_eq!(rows.iter().flatten().sum::<usize>(), n);
    for (name, size) in [("confusion.png", (640, 640)), ("wrong.png", (600, 680))] {
        let img = image::open(dir.join(name)).unwrap();
        assert_eq!((img.width(), img.height()), size, "{name}");
    }
    // Digits drawn here, in the two colour schemes.
    let one = dir.join("one.png");
    draw(&one, 0, 255, |y, x| {
        (25.0..115.0).contains(&y) && (62.0..78.0).contains(&x)
    });
    let zero = dir.join("zero.png");
    draw(&zero, 255, 0, |y, x| {
        let r = (y - 70.0).hypot((x - 70.0) * 1.4);
        r > 30.0 && r < 44.0
    });
    let p = stdout(&quill(&[
        "predict",
        "--checkpoint",
        &ck,
        one.to_str().unwrap(),
        zero.to_str().unwrap(),
    ]));
    let answers: Vec<&str> = p
        .lines()
        .map(|l| l.rsplit_once(": ").unwrap().1.split(' ').next().unwrap())
        .collect();
    assert_eq!(answers, ["1", "0"], "{p}");
}

#[test]
fn bad_input_names_the_problem() {
    let dir = scratch("eval", "bad");
    let missing = [
        "predict",
        "--checkpoint",
        "/nonexistent.safetensors",
        "x.png",
    ];
    assert_refused(&quill(&missing), &["nonexistent"]);
    assert_refused(&quill(&["predict"]), &["no image given"]);
    // A language-model checkpoint is refused by name.
    let path = dir.join("lm.safetensors");
    let meta = std::collections::BTreeMap::from([("task".to_string(), "lm".to_string())]);
    let w = quill::NDArray::zeros(&[2], quill::DType::F32).unwrap();
    quill::io::save_checkpoint(&path, &[("model.w".to_string(), w)], &meta).unwrap();
    let lm = path.to_str().unwrap();
    assert_refused(
        &quill(&["evaluate", "--checkpoint", lm]),
        &["quill generate"],
    );
    // An image checkpoint and a file that is not an image: the error names the file.
    let ck = scratch("eval", "mlp-bad");
    common::run_ok(&common::small(&ck, 1));
    let ck = ck.join("checkpoint.safetensors");
    let not_png = dir.join("not.png");
    std::fs::write(&not_png, b"not an image").unwrap();
    let args = [
        "predict",
        "--checkpoint",
        ck.to_str().unwrap(),
        not_png.to_str().unwrap(),
    ];
    assert_refused(&quill(&args), &["not.png"]);
    assert!(String::from_utf8_lossy(&quill(&["evaluate", "--help"]).stdout).contains("--data"));
}

/// Parses every stdout line of a `--json` run as a JSON object with an "event".
fn json_lines(o: &std::process::Output) -> Vec<serde_json::Value> {
    stdout(o)
        .lines()
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            assert!(v["event"].is_string(), "no event: {l}");
            v
        })
        .collect()
}

fn events<'a>(lines: &'a [serde_json::Value], event: &str) -> Vec<&'a serde_json::Value> {
    lines.iter().filter(|v| v["event"] == event).collect()
}

/// A picture as an IDX file of unsigned bytes, shape (n, 28, 28).
fn write_idx(path: &std::path::Path, images: &[GrayImage]) {
    let mut b = vec![0u8, 0, 8, 3];
    for d in [images.len() as u32, 28, 28] {
        b.extend(d.to_be_bytes());
    }
    for img in images {
        let small = image::imageops::resize(img, 28, 28, image::imageops::FilterType::Triangle);
        b.extend(small.as_raw());
    }
    std::fs::write(path, b).unwrap();
}

#[test]
fn json_and_quiet_output_and_every_input_format() {
    let dir = scratch("eval", "formats");
    let out = dir.to_str().unwrap();
    // Training with --json: a setup line, one line per epoch, a result line, nothing else.
    let lines = json_lines(&quill(&[
        "--epochs", "1", "--limit", "10000", "--out", out, "--json",
    ]));
    assert_eq!(events(&lines, "setup").len(), 1, "{lines:?}");
    let epochs = events(&lines, "epoch");
    assert_eq!(epochs.len(), 1, "{lines:?}");
    assert_eq!(epochs[0]["epoch"], 1);
    let result = events(&lines, "result");
    let acc = result[0]["test_accuracy"].as_f64().unwrap();
    assert!(
        acc > 0.85 && acc == epochs[0]["test_acc"].as_f64().unwrap(),
        "{lines:?}"
    );
    let ck = dir.join("checkpoint.safetensors");
    let ck_s = ck.to_str().unwrap();
    // The checkpoint names its input and normalisation.
    let meta = quill::io::load_checkpoint(&ck).unwrap().metadata;
    assert_eq!(meta["input_shape"], "1,28,28");
    assert_eq!(meta["normalize_mean"].parse::<f64>().unwrap(), 0.1307);
    assert_eq!(meta["normalize_std"].parse::<f64>().unwrap(), 0.3081);

    // evaluate --quiet: the accuracy line alone; --json: one result whose matrix adds up.
    let quiet = stdout(&quill(&["evaluate", "--checkpoint", ck_s, "--quiet"]));
    assert_eq!(quiet.lines().count(), 1, "{quiet}");
    assert!(quiet.starts_with("test accuracy "), "{quiet}");
    let lines = json_lines(&quill(&["evaluate", "--checkpoint", ck_s, "--json"]));
    let r = events(&lines, "result")[0];
    let confusion: Vec<Vec<u64>> = serde_json::from_value(r["confusion"].clone()).unwrap();
    let diagonal: u64 = (0..10).map(|k| confusion[k][k]).sum();
    assert_eq!(diagonal, r["correct"].as_u64().unwrap());
    assert_eq!(confusion.iter().flatten().sum::<u64>(), 10_000);
    assert_eq!(r["per_class_accuracy"].as_array().unwrap().len(), 10);

    // The same digits as PNG, JPEG and one IDX file holding both.
    let one = GrayImage::from_fn(140, 140, |x, y| {
        let on = (25..115).contains(&y) && (62..78).contains(&x);
        Luma([if on { 255 } else { 0 }])
    });
    let zero = GrayImage::from_fn(140, 140, |x, y| {
        let r = (y as f64 - 70.0).hypot((x as f64 - 70.0) * 1.4);
        Luma([if r > 30.0 && r < 44.0 { 255 } else { 0 }])
    });
    let jpeg = dir.join("one.jpg");
    one.save(&jpeg).unwrap();
    let idx = dir.join("digits-idx3-ubyte");
    write_idx(&idx, &[one.clone(), zero.clone()]);
    let lines = json_lines(&quill(&[
        "predict",
        "--checkpoint",
        ck_s,
        jpeg.to_str().unwrap(),
        idx.to_str().unwrap(),
        "--json",
    ]));
    let preds = events(&lines, "prediction");
    let classes: Vec<u64> = preds.iter().map(|p| p["class"].as_u64().unwrap()).collect();
    assert_eq!(classes, [1, 1, 0], "{lines:?}");
    assert!(preds[2]["input"]
        .as_str()
        .unwrap()
        .ends_with("digits-idx3-ubyte[1]"));
    for p in &preds {
        let probs: Vec<f64> = serde_json::from_value(p["probabilities"].clone()).unwrap();
        assert_eq!(probs.len(), 10);
        assert!((probs.iter().sum::<f64>() - 1.0).abs() < 1e-4, "{probs:?}");
    }
    // A checkpoint whose normalisation is not a number is refused by its key.
    let mut bad = quill::io::load_checkpoint(&ck).unwrap();
    bad.metadata
        .insert("normalize_std".to_string(), "wide".to_string());
    let bad_path = dir.join("bad.safetensors");
    quill::io::save_checkpoint(&bad_path, &bad.tensors, &bad.metadata).unwrap();
    assert_refused(
        &quill(&[
            "predict",
            "--checkpoint",
            bad_path.to_str().unwrap(),
            jpeg.to_str().unwrap(),
        ]),
        &["normalize_std", "wide"],
    );
    // An IDX file that is not of images, and both output flags at once.
    let labels = dir.join("labels-idx1-ubyte");
    std::fs::write(&labels, [0u8, 0, 8, 1, 0, 0, 0, 2, 3, 4]).unwrap();
    assert_refused(
        &quill(&["predict", "--checkpoint", ck_s, labels.to_str().unwrap()]),
        &["labels-idx1-ubyte", "(n, h, w)"],
    );
    assert_refused(&quill(&["evaluate", "--quiet", "--json"]), &["exclude"]);
}

#[test]
fn bench_rows_as_json() {
    let lines = json_lines(&quill(&[
        "bench", "ops", "--only", "reduce", "--filter", "sum_last", "--rounds", "1", "--json",
    ]));
    assert_eq!(events(&lines, "setup").len(), 1, "{lines:?}");
    let rows = events(&lines, "bench");
    assert!(!rows.is_empty(), "{lines:?}");
    for r in rows {
        assert_eq!(r["bench"], "ops");
        assert!(r["case"].as_str().unwrap().contains("sum"), "{r}");
        assert!(r["quill"].as_f64().unwrap() > 0.0, "{r}");
    }
}
