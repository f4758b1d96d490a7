//! `quill bench train`: one epoch of the main job's default model (MLPResNet, Adam, batch 128)
//! or, with `--model cnn`, of its small CNN (two conv3x3-BatchNorm-ReLU-maxpool stages, 207 k
//! parameters) on MNIST in quill and in PyTorch CPU (same model, optimizer and batch size),
//! alternating in one run; seconds per epoch (medians over the rounds) and the ratio.
//! `--precision bf16` times bf16 autocast in both (`quill::autocast`, `torch.autocast("cpu",
//! torch.bfloat16)`), `--precision both` f32 and bf16 side by side (a model each, same seed).

use super::{median, peer::Peer};
use crate::train::precision::Precision;
use crate::train::{default_setup, train_epoch};
use indicatif::ProgressBar;
use quill::nn::{Module, Sequential};
use quill::optim::Optimizer;
use std::time::Instant;

/// The precisions `--precision` names: one, or both (f32 first).
pub(super) fn precisions(v: Option<&String>) -> Result<Vec<Precision>, String> {
    match v.map(String::as_str) {
        Some("both") => Ok(vec![Precision::F32, Precision::Bf16]),
        Some(p) => Ok(vec![Precision::parse("--precision", p)?]),
        None => Err("--precision needs f32, bf16 or both".into()),
    }
}

/// The case's words for a precision, and the peer's case name suffix.
/// The table's last row when both precisions ran: quill's and PyTorch's bf16 speed-up over
/// f32, from `medians` = [(quill f32, PyTorch f32), (quill bf16, PyTorch bf16)] in seconds.
pub(super) fn speedup_row(table: &crate::report::Table, medians: &[(f64, Option<f64>)]) {
    if let [(qf, tf), (qb, tb)] = medians[..] {
        table.line(format!(
            "| bf16 speed-up over f32 | {:.2}x | {} | - |",
            qf / qb,
            tf.zip(tb)
                .map_or("-".into(), |(f, b)| format!("{:.2}x", f / b))
        ));
    }
}

pub(super) fn label(p: Precision) -> (&'static str, &'static str) {
    match p {
        Precision::F32 => ("f32", ""),
        Precision::Bf16 => ("bf16 autocast", "_bf16"),
    }
}

pub fn run(args: &[String]) -> Result<(), String> {
    let mut rounds = 3usize;
    let mut device = quill::Device::Cpu;
    let mut model = "mlp".to_string();
    let mut precision = vec![Precision::F32];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => rounds = super::rounds_value(it.next())?,
            "--device" => {
                let d = it.next().ok_or("--device needs cpu or cuda")?;
                device =
                    quill::Device::parse(d).ok_or(format!("--device: '{d}' is not cpu or cuda"))?;
            }
            "--model" => {
                model = match it.next().map(String::as_str) {
                    Some(m @ ("mlp" | "cnn")) => m.to_string(),
                    other => return Err(format!("--model needs mlp or cnn, got {other:?}")),
                }
            }
            "--precision" => precision = precisions(it.next())?,
            other => return Err(format!("bench train: unknown option '{other}'")),
        }
    }
    quill::in_pool(move || epochs(rounds, device, &model, &precision))
}

/// One precision's model, optimizer and loader, built from the same seed as the others.
struct Case {
    precision: Precision,
    model: Sequential,
    opt: Box<dyn Optimizer>,
    loader: quill::data::DataLoader,
    ours: Vec<f64>,
    torch: Vec<f64>,
}

fn epochs(
    rounds: usize,
    device: quill::Device,
    name: &str,
    precisions: &[Precision],
) -> Result<(), String> {
    let mut cases = Vec::new();
    for &precision in precisions {
        let (model, opt, loader) = default_setup(name)?;
        model.to_device(device).map_err(|e| e.to_string())?;
        cases.push(Case {
            precision,
            model,
            opt,
            loader,
            ours: Vec::new(),
            torch: Vec::new(),
        });
    }
    let mut script = format!("MODEL = \"{name}\"\n");
    if device != quill::Device::Cpu {
        script += &format!("DEVICE = \"{device}\"\n");
    }
    script += include_str!("train_peer.py");
    let label_of = match name {
        "cnn" => "the small CNN (conv3x3 16-BN-ReLU-pool, conv3x3 32-BN-ReLU-pool, 1568-128-10)",
        _ => "MLPResNet 784-512x3-10",
    };
    let mut peer = Peer::start(&script);
    let has_torch = peer.as_ref().is_some_and(|p| p.version.contains("torch"));
    let words: Vec<String> = precisions.iter().map(|p| p.describe()).collect();
    crate::report::heading(format!(
        "quill bench train: one MNIST epoch (60,000 samples) of {label_of}, Adam, batch 128, {} threads, {rounds} rounds, medians; precision: {}; peer: {}",
        rayon::current_num_threads(),
        words.join(" / "),
        peer.as_ref().map_or("none".to_string(), |p| p.version.clone())
    ));
    for r in 0..rounds {
        for c in cases.iter_mut() {
            let t = Instant::now();
            {
                let _autocast = c.precision.guard()?;
                train_epoch(
                    &c.model,
                    c.opt.as_mut(),
                    &c.loader,
                    r + 1,
                    None,
                    &ProgressBar::hidden(),
                )?;
            }
            c.ours.push(t.elapsed().as_secs_f64());
            if let (Some(p), true) = (peer.as_mut(), has_torch) {
                let case = format!("epoch{} torch", label(c.precision).1);
                c.torch.extend(p.run(&case, 1).unwrap_or_default());
            }
        }
    }
    let table = crate::report::Table::new(
        "train",
        &["case", "quill s/epoch", "PyTorch s/epoch", "speed-up"],
    );
    let model_name = if name == "cnn" { "CNN" } else { "MLPResNet" };
    let mut medians = Vec::new();
    for c in cases.iter_mut() {
        let q = median(&mut c.ours);
        let t = (!c.torch.is_empty()).then(|| median(&mut c.torch));
        table.line(format!(
            "| {model_name} epoch, {} | {q:.2} | {} | {} |",
            label(c.precision).0,
            t.map_or("-".into(), |t| format!("{t:.2}")),
            t.map_or("-".into(), |t| format!("{:.2}x", t / q))
        ));
        medians.push((q, t));
    }
    speedup_row(&table, &medians);
    Ok(())
}
