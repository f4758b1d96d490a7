//! `quill bench train`: one epoch of the main job's default model (MLPResNet, Adam, batch 128)
//! or, with `--model cnn`, of its small CNN (two conv3x3-BatchNorm-ReLU-maxpool stages, 207 k
//! parameters) on MNIST in quill and in PyTorch CPU (same model, optimizer and batch size),
//! alternating in one run; seconds per epoch (medians over the rounds) and the ratio.

use super::{median, peer::Peer};
use crate::train::{default_setup, train_epoch};
use indicatif::ProgressBar;
use quill::nn::Module;
use std::time::Instant;

pub fn run(args: &[String]) -> Result<(), String> {
    let mut rounds = 3usize;
    let mut device = quill::Device::Cpu;
    let mut model = "mlp".to_string();
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
            other => return Err(format!("bench train: unknown option '{other}'")),
        }
    }
    quill::in_pool(move || epochs(rounds, device, &model))
}

fn epochs(rounds: usize, device: quill::Device, name: &str) -> Result<(), String> {
    let (model, mut opt, loader) = default_setup(name)?;
    model.to_device(device).map_err(|e| e.to_string())?;
    let mut script = format!("MODEL = \"{name}\"\n");
    if device != quill::Device::Cpu {
        script += &format!("DEVICE = \"{device}\"\n");
    }
    script += include_str!("train_peer.py");
    let label = match name {
        "cnn" => "the small CNN (conv3x3 16-BN-ReLU-pool, conv3x3 32-BN-ReLU-pool, 1568-128-10)",
        _ => "MLPResNet 784-512x3-10",
    };
    let mut peer = Peer::start(&script);
    let has_torch = peer.as_ref().is_some_and(|p| p.version.contains("torch"));
    crate::report::heading(format!(
        "quill bench train: one MNIST epoch (60,000 samples) of {label}, Adam, batch 128, {} threads, {rounds} rounds, medians; peer: {}",
        rayon::current_num_threads(),
        peer.as_ref().map_or("none".to_string(), |p| p.version.clone())
    ));
    let (mut ours, mut pt) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let t = Instant::now();
        train_epoch(
            &model,
            opt.as_mut(),
            &loader,
            r + 1,
            None,
            &ProgressBar::hidden(),
        )?;
        ours.push(t.elapsed().as_secs_f64());
        if let (Some(p), true) = (peer.as_mut(), has_torch) {
            pt.extend(p.run("epoch torch", 1).unwrap_or_default());
        }
    }
    let q = median(&mut ours);
    let t = (!pt.is_empty()).then(|| median(&mut pt));
    let table = crate::report::Table::new(
        "train",
        &["case", "quill s/epoch", "PyTorch s/epoch", "speed-up"],
    );
    table.line(format!(
        "| {} epoch | {q:.2} | {} | {} |",
        if name == "cnn" { "CNN" } else { "MLPResNet" },
        t.map_or("-".into(), |t| format!("{t:.2}")),
        t.map_or("-".into(), |t| format!("{:.2}x", t / q))
    ));
    Ok(())
}
