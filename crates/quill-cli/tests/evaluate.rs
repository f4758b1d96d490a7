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
