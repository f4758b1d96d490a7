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
use crate::train::{image_model, q, MNIST_MEAN, MNIST_STD};
use image::codecs::png::PngEncoder;
use image::{ColorType, ImageEncoder};
use plotters::prelude::*;
use quill::data::Mnist;
use quill::nn::{Module, Sequential};
use quill::tensor::{no_grad, Tensor};
use quill::{DType, NDArray};
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

/// The input normalisation a checkpoint was trained with: x -> (x - mean) / std on [0, 1].
#[derive(Clone, Copy, Debug)]
struct Norm {
    mean: f64,
    std: f64,
}

/// The image model a checkpoint holds, in eval mode, and its input normalisation (from the
/// metadata; MNIST's for checkpoints written before it was recorded).
fn load(path: &Path) -> Result<(Sequential, Norm), String> {
    let at = |msg: String| format!("{}: {msg}", path.display());
    let ck = q(quill::io::load_checkpoint(path))?;
    if let Some(task) = ck.metadata.get("task") {
        return Err(at(format!(
            "a checkpoint of task '{task}', not of the image job (`quill train`); for a language \
             model use `quill generate`"
        )));
    }
    let name = ck.metadata.get("model").ok_or_else(|| {
        at("no 'model' in its metadata: not a checkpoint of `quill train`".into())
    })?;
    let model = image_model(name).map_err(at)?;
    let state: Vec<(String, NDArray)> = ck
        .tensors
        .iter()
        .filter_map(|(n, a)| n.strip_prefix("model.").map(|s| (s.to_string(), a.clone())))
        .collect();
    q(model.load_state_dict(&state)).map_err(at)?;
    model.eval();
    let number = |key: &str, default: f64| -> Result<f64, String> {
        match ck.metadata.get(key) {
            None => Ok(default),
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| at(format!("metadata {key} = {v:?} is not a finite number"))),
        }
    };
    let norm = Norm {
        mean: number("normalize_mean", MNIST_MEAN)?,
        std: number("normalize_std", MNIST_STD)?,
    };
    if norm.std <= 0.0 {
        return Err(at(format!(
            "metadata normalize_std = {} is not positive",
            norm.std
        )));
    }
    if let Some(shape) = ck.metadata.get("input_shape").filter(|s| *s != "1,28,28") {
        return Err(at(format!(
            "the model reads images of shape ({shape}); evaluate and predict handle (1,28,28)"
        )));
    }
    Ok((model, norm))
}

/// Class probabilities (n, 10) of images (n, 1, 28, 28) with values in [0, 1].
fn probabilities(
    model: &Sequential,
    norm: Norm,
    images: &NDArray,
) -> Result<Vec<[f64; 10]>, String> {
    let _g = no_grad();
    let x = q(q(images.astype(DType::F32))?.sub_scalar(norm.mean))?;
    let x = q(x.div_scalar(norm.std))?;
    let logits = q(model.forward(&Tensor::new(x)))?;
    let p = q(q(logits.softmax(-1))?.array().astype(DType::F64))?;
    let v = q(p.to_vec::<f64>())?;
    Ok(v.chunks(10)
        .map(|c| std::array::from_fn(|k| c[k]))
        .collect())
}

fn argmax(p: &[f64; 10]) -> usize {
    (0..10).max_by(|&a, &b| p[a].total_cmp(&p[b])).unwrap_or(0)
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
    let (model, norm) = load(&checkpoint)?;
    let test = q(Mnist::load(&data, false))?;
    let labels = q(test.labels.to_vec::<i64>())?;
    let n = labels.len();
    let mut probs = Vec::with_capacity(n);
    let bar = report::bar(n.div_ceil(1000) as u64, "evaluate".into());
    for start in (0..n).step_by(1000) {
        let stop = (start + 1000).min(n) as isize;
        let batch = q(test.images.slice(&quill::s![start as isize..stop]))?;
        probs.extend(probabilities(&model, norm, &batch)?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let mut confusion = [[0usize; 10]; 10];
    for (p, &y) in probs.iter().zip(&labels) {
        confusion[y as usize][argmax(p)] += 1;
    }
    let correct: usize = (0..10).map(|k| confusion[k][k]).sum();
    let accuracy = correct as f64 / n.max(1) as f64;
    let per_class: Vec<f64> = confusion
        .iter()
        .enumerate()
        .map(|(k, row)| row[k] as f64 / row.iter().sum::<usize>().max(1) as f64)
        .collect();
    if report::mode() != report::Mode::Json {
        println!(
            "test accuracy {:.2}% ({correct} of {n}), {}",
            100.0 * accuracy,
            checkpoint.display()
        );
    }
    if report::mode() == report::Mode::Plain {
        print_confusion(&confusion, &per_class);
    }
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let cm = out.join("confusion.png");
    write_png(&cm, (640, 640), |root| draw_confusion(root, &confusion))?;
    // The wrong answers given with the most confidence, most confident first.
    let mut wrong: Vec<(usize, usize, f64)> = probs
        .iter()
        .zip(&labels)
        .enumerate()
        .filter(|(_, (p, &y))| argmax(p) != y as usize)
        .map(|(i, (p, _))| (i, argmax(p), p[argmax(p)]))
        .collect();
    wrong.sort_by(|a, b| b.2.total_cmp(&a.2));
    wrong.truncate(16);
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
fn print_confusion(confusion: &[[usize; 10]; 10], per_class: &[f64]) {
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
    confusion: &[[usize; 10]; 10],
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

/// Grey pixels in [0, 1] (row-major, `h` x `w`) as a (1, 1, 28, 28) image, white digit on
/// black as MNIST: a light background is inverted, and the picture is resized to 28 x 28.
fn to_mnist(v: Vec<f32>, h: u32, w: u32) -> Result<NDArray, String> {
    let mut v = if (h, w) == (28, 28) {
        v
    } else {
        let bytes = v.iter().map(|x| (x * 255.0).round() as u8).collect();
        let img = image::GrayImage::from_raw(w, h, bytes)
            .ok_or_else(|| format!("an image of {h} x {w} needs {} pixels", h * w))?;
        let small = image::imageops::resize(&img, 28, 28, image::imageops::FilterType::Triangle);
        small.pixels().map(|p| p.0[0] as f32 / 255.0).collect()
    };
    let mean = v.iter().sum::<f32>() / v.len().max(1) as f32;
    if mean > 0.5 {
        v.iter_mut().for_each(|x| *x = 1.0 - *x);
    }
    q(NDArray::from_vec(v, &[1, 1, 28, 28]))
}

/// The images of one input file, each named: a PNG or JPEG gives one (colour becomes grey), an
/// IDX file of shape (n, h, w) or (h, w) gives its n. The format is read from the content (the
/// IDX magic `00 00 08`, gzip's `1f 8b`, or what the image decoder recognises), not the name.
fn read_input(path: &Path) -> Result<Vec<(String, NDArray)>, String> {
    let at = |msg: String| format!("{}: {msg}", path.display());
    let mut head = [0u8; 3];
    let n = std::io::Read::read(
        &mut std::fs::File::open(path).map_err(|e| at(e.to_string()))?,
        &mut head,
    )
    .map_err(|e| at(e.to_string()))?;
    let name = path.display().to_string();
    if n == 3 && (head == [0, 0, 8] || head[..2] == [0x1f, 0x8b]) {
        let a = q(quill::data::read_idx(path)).map_err(at)?;
        let shape = a.shape().to_vec();
        let (count, h, w) = match shape[..] {
            [h, w] => (1, h, w),
            [count, h, w] => (count, h, w),
            _ => {
                return Err(at(format!(
                    "an IDX file of shape {shape:?}; predict reads images, (n, h, w) or (h, w)"
                )))
            }
        };
        let pixels = q(q(a.astype(DType::F32))?.to_vec::<f32>())?;
        let size = h * w;
        return (0..count)
            .map(|i| {
                let v = pixels[i * size..(i + 1) * size]
                    .iter()
                    .map(|x| x / 255.0)
                    .collect();
                let img = to_mnist(v, h as u32, w as u32).map_err(at)?;
                let label = if shape.len() == 2 {
                    name.clone()
                } else {
                    format!("{name}[{i}]")
                };
                Ok((label, img))
            })
            .collect();
    }
    let img = image::io::Reader::open(path)
        .and_then(|r| r.with_guessed_format())
        .map_err(|e| at(e.to_string()))?
        .decode()
        .map_err(|e| at(e.to_string()))?
        .to_luma8();
    let (w, h) = img.dimensions();
    let v = img.pixels().map(|p| p.0[0] as f32 / 255.0).collect();
    Ok(vec![(name, to_mnist(v, h, w).map_err(at)?)])
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
    let (model, norm) = load(&checkpoint)?;
    for f in &files {
        for (name, img) in read_input(f)? {
            let p = probabilities(&model, norm, &img)?[0];
            let mut order: Vec<usize> = (0..10).collect();
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
