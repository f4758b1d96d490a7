//! `quill evaluate` and `quill predict`: the image job's checkpoint put to use. The model is
//! rebuilt from the checkpoint (its `model` metadata names the architecture) and reads images
//! normalised as in training. `evaluate` scores the MNIST test split: accuracy, accuracy per
//! class, the confusion matrix (as text, and as a PNG heat map with the counts written in), and
//! a PNG grid of the test images the model gets wrong most confidently. `predict` gives the
//! class probabilities of PNG or JPEG images (any size, grey or colour, dark or light
//! background) and of every image in an IDX file (raw or gzip), recognised by content.
//! Both follow `--quiet` / `--json` (`report.rs`).

use crate::report;
use crate::train::plot::{font, FAMILY};
use crate::train::q;
use image::codecs::png::PngEncoder;
use image::{ColorType, ImageEncoder};
use plotters::prelude::*;
use quill::data::Mnist;
use quill::infer::ImageClassifier;
use quill::DType;
use std::path::{Path, PathBuf};

/// `quill evaluate`'s options.
pub const EVALUATE_USAGE: &str =
    "usage: quill evaluate [--checkpoint PATH] [--data DIR] [--out DIR]
  --checkpoint PATH  a checkpoint of the image job (default runs/checkpoint.safetensors)
  --data DIR         the MNIST-format test split's directory (default data/mnist)
  --out DIR          where confusion.png and wrong.png go (default: the checkpoint's directory)";

/// `quill predict`'s options.
pub const PREDICT_USAGE: &str = "usage: quill predict [--checkpoint PATH] IMAGE [IMAGE ...]
  IMAGE              a PNG or JPEG picture of a digit, or an IDX file of 28 x 28 images
                     (raw or .gz, as MNIST's), each classified
  --checkpoint PATH  a checkpoint of the image job (default runs/checkpoint.safetensors)";

fn load(path: &Path) -> Result<ImageClassifier, String> {
    q(ImageClassifier::load(path))
}

fn flag_value<'a>(
    it: &mut impl Iterator<Item = &'a String>,
    flag: &str,
    usage: &str,
) -> Result<&'a String, String> {
    it.next()
        .ok_or_else(|| format!("{flag} needs a value\n{usage}"))
}

/// Runs `quill evaluate` with `args` (after the word `evaluate`).
pub fn evaluate(args: &[String]) -> Result<(), String> {
    let (mut checkpoint, mut data, mut out) = (
        PathBuf::from("runs/checkpoint.safetensors"),
        PathBuf::from("data/mnist"),
        None,
    );
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "-h" | "--help" => return Err(EVALUATE_USAGE.into()),
            "--checkpoint" => checkpoint = flag_value(&mut it, flag, EVALUATE_USAGE)?.into(),
            "--data" => data = flag_value(&mut it, flag, EVALUATE_USAGE)?.into(),
            "--out" => out = Some(PathBuf::from(flag_value(&mut it, flag, EVALUATE_USAGE)?)),
            other => return Err(format!("unknown option '{other}'\n{EVALUATE_USAGE}")),
        }
    }
    let out = out.unwrap_or_else(|| {
        checkpoint
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    });
    let classifier = load(&checkpoint)?;
    let test = q(Mnist::load(&data, false))?;
    let n = test.labels.shape()[0];
    let bar = report::bar(n as u64, "evaluate".into());
    let scores = q(classifier.evaluate(&test.images, &test.labels, |done, _| {
        bar.set_position(done as u64)
    }))?;
    bar.finish_and_clear();
    let (confusion, labels) = (&scores.confusion, &scores.labels);
    let (correct, accuracy, per_class) = (scores.correct(), scores.accuracy(), scores.per_class());
    if report::mode() != report::Mode::Json {
        println!(
            "test accuracy {:.2}% ({correct} of {n}), {}",
            100.0 * accuracy,
            checkpoint.display()
        );
    }
    if report::mode() == report::Mode::Plain {
        print_confusion(confusion, &per_class);
    }
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let cm = out.join("confusion.png");
    write_png(&cm, (640, 640), |root| draw_confusion(root, confusion))?;
    let wrong = scores.most_confident_mistakes(16);
    let pixels = q(q(test.images.astype(DType::F64))?.to_vec::<f64>())?;
    let tiles: Vec<Tile> = wrong
        .iter()
        .map(|&(i, pred, conf)| Tile {
            pixels: pixels[i * 784..(i + 1) * 784].to_vec(),
            caption: format!("{} as {pred} ({:.0}%)", labels[i], 100.0 * conf),
        })
        .collect();
    let grid = out.join("wrong.png");
    write_png(&grid, (4 * 150, 4 * 170), |root| draw_tiles(root, &tiles))?;
    report::progress(
        "written",
        || {
            format!(
                "{} (the confusion matrix) and {} (the {} most confident mistakes) written",
                cm.display(),
                grid.display(),
                tiles.len()
            )
        },
        serde_json::json!({"confusion_png": report::path(&cm), "wrong_png": report::path(&grid)}),
    );
    if report::mode() == report::Mode::Json {
        report::result(
            "result",
            String::new,
            serde_json::json!({
                "checkpoint": report::path(&checkpoint), "test_accuracy": accuracy, "correct": correct,
                "samples": n, "per_class_accuracy": per_class, "confusion": confusion,
                "confusion_png": report::path(&cm), "wrong_png": report::path(&grid),
            }),
        );
    }
    Ok(())
}

/// The per-class accuracies and the confusion matrix as text.
fn print_confusion(confusion: &[Vec<usize>], per_class: &[f64]) {
    println!("accuracy per class:");
    for (k, row) in confusion.iter().enumerate() {
        let total: usize = row.iter().sum();
        println!("  {k}: {:6.2}% of {total}", 100.0 * per_class[k]);
    }
    println!("confusion matrix (rows: true class, columns: predicted):");
    println!(
        "      {}",
        (0..10).map(|k| format!("{k:>6}")).collect::<String>()
    );
    for (k, row) in confusion.iter().enumerate() {
        let cells: String = row.iter().map(|c| format!("{c:>6}")).collect();
        println!("  {k}:  {cells}");
    }
}

struct Tile {
    pixels: Vec<f64>,
    caption: String,
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Draws with `f` into an RGB buffer of `size` and writes it as a PNG, atomically.
fn write_png(
    path: &Path,
    size: (u32, u32),
    f: impl FnOnce(DrawingArea<BitMapBackend, plotters::coord::Shift>) -> Result<(), String>,
) -> Result<(), String> {
    font()?;
    let mut pixels = vec![0u8; (size.0 * size.1 * 3) as usize];
    f(BitMapBackend::with_buffer(&mut pixels, size).into_drawing_area())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    quill::io::write_atomic(path, |w| {
        PngEncoder::new(w)
            .write_image(&pixels, size.0, size.1, ColorType::Rgb8)
            .map_err(std::io::Error::other)
    })
    .map_err(|e| e.to_string())
}

/// The confusion matrix drawn in pixels (a 10 x 10 grid of 54-pixel cells): each cell shaded by
/// its share of the true class's row (the diagonal dark when right), its count written at its
/// centre, the class digits centred on the rows and columns.
fn draw_confusion(
    root: DrawingArea<BitMapBackend, plotters::coord::Shift>,
    confusion: &[Vec<usize>],
) -> Result<(), String> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    const CELL: i32 = 54;
    const LEFT: i32 = 75;
    const TOP: i32 = 45;
    let centred = |size: u32, ink: &RGBColor| {
        (FAMILY, size)
            .into_font()
            .color(ink)
            .pos(Pos::new(HPos::Center, VPos::Center))
    };
    root.fill(&WHITE).map_err(err)?;
    root.draw(&Text::new(
        "confusion matrix (rows: true class, columns: predicted)",
        (320, 18),
        centred(19, &BLACK),
    ))
    .map_err(err)?;
    for (t, row) in confusion.iter().enumerate() {
        let total = row.iter().sum::<usize>().max(1) as f64;
        let y = TOP + t as i32 * CELL;
        for (p, &c) in row.iter().enumerate() {
            let share = c as f64 / total;
            let level = (255.0 * (1.0 - share.sqrt())) as u8;
            let x = LEFT + p as i32 * CELL;
            root.draw(&Rectangle::new(
                [(x, y), (x + CELL, y + CELL)],
                RGBColor(level, level, 255).filled(),
            ))
            .map_err(err)?;
            root.draw(&Rectangle::new(
                [(x, y), (x + CELL, y + CELL)],
                RGBColor(200, 200, 200),
            ))
            .map_err(err)?;
            let ink = if share > 0.5 { WHITE } else { BLACK };
            root.draw(&Text::new(
                format!("{c}"),
                (x + CELL / 2, y + CELL / 2),
                centred(14, &ink),
            ))
            .map_err(err)?;
        }
        root.draw(&Text::new(
            format!("{t}"),
            (LEFT - 14, y + CELL / 2),
            centred(15, &BLACK),
        ))
        .map_err(err)?;
    }
    let bottom = TOP + 10 * CELL;
    for p in 0..10 {
        root.draw(&Text::new(
            format!("{p}"),
            (LEFT + p * CELL + CELL / 2, bottom + 14),
            centred(15, &BLACK),
        ))
        .map_err(err)?;
    }
    root.draw(&Text::new(
        "predicted",
        (LEFT + 5 * CELL, bottom + 38),
        centred(15, &BLACK),
    ))
    .map_err(err)?;
    root.draw(&Text::new(
        "true",
        (LEFT - 45, TOP + 5 * CELL),
        centred(15, &BLACK),
    ))
    .map_err(err)?;
    root.present().map_err(err)
}

fn draw_tiles(
    root: DrawingArea<BitMapBackend, plotters::coord::Shift>,
    tiles: &[Tile],
) -> Result<(), String> {
    root.fill(&WHITE).map_err(err)?;
    for (k, tile) in tiles.iter().enumerate() {
        let (x0, y0) = ((k % 4) as i32 * 150 + 19, (k / 4) as i32 * 170 + 8);
        for (i, v) in tile.pixels.iter().enumerate() {
            let (r, c) = ((i / 28) as i32, (i % 28) as i32);
            let g = (255.0 * (1.0 - v.clamp(0.0, 1.0))) as u8;
            root.draw(&Rectangle::new(
                [(x0 + 4 * c, y0 + 4 * r), (x0 + 4 * c + 4, y0 + 4 * r + 4)],
                RGBColor(g, g, g).filled(),
            ))
            .map_err(err)?;
        }
        root.draw(&Text::new(
            tile.caption.clone(),
            (x0 - 12, y0 + 116),
            (FAMILY, 15).into_font(),
        ))
        .map_err(err)?;
    }
    root.present().map_err(err)
}

/// Runs `quill predict` with `args` (after the word `predict`).
pub fn predict(args: &[String]) -> Result<(), String> {
    let mut checkpoint = PathBuf::from("runs/checkpoint.safetensors");
    let mut files = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => return Err(PREDICT_USAGE.into()),
            "--checkpoint" => checkpoint = flag_value(&mut it, a, PREDICT_USAGE)?.into(),
            f if f.starts_with("--") => {
                return Err(format!("unknown option '{f}'\n{PREDICT_USAGE}"))
            }
            f => files.push(PathBuf::from(f)),
        }
    }
    if files.is_empty() {
        return Err(format!("no image given\n{PREDICT_USAGE}"));
    }
    let classifier = load(&checkpoint)?;
    for f in &files {
        for (name, img) in q(ImageClassifier::read_images(f))? {
            let p = q(classifier.probabilities(&img))?.remove(0);
            let mut order: Vec<usize> = (0..p.len()).collect();
            order.sort_by(|&a, &b| p[b].total_cmp(&p[a]));
            let top: Vec<String> = order[..3]
                .iter()
                .map(|&k| format!("{k} {:.1}%", 100.0 * p[k]))
                .collect();
            report::result(
                "prediction",
                || format!("{name}: {} ({})", order[0], top.join(", ")),
                serde_json::json!({"input": name, "class": order[0], "probabilities": p}),
            );
        }
    }
    Ok(())
}
