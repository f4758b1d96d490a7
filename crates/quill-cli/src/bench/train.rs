//! `quill bench train`: one epoch of the main job's default model (MLPResNet, Adam, batch 128)
//! on MNIST in quill and in PyTorch CPU (same model, optimizer and batch size), alternating in
//! one run; seconds per epoch (medians over the rounds) and the ratio.

use super::{median, peer::Peer};
use crate::train::{default_setup, train_epoch};
use indicatif::ProgressBar;
use quill::nn::Module;
use std::time::Instant;

pub fn run(args: &[String]) -> Result<(), String> {
    let mut rounds = 3usize;
    let mut device = quill::Device::Cpu;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => rounds = super::rounds_value(it.next())?,
            "--device" => {
                let d = it.next().ok_or("--device needs cpu or cuda")?;
                device =
                    quill::Device::parse(d).ok_or(format!("--device: '{d}' is not cpu or cuda"))?;
            }
            other => return Err(format!("bench train: unknown option '{other}'")),
        }
    }
    quill::in_pool(move || epochs(rounds, device))
}

fn epochs(rounds: usize, device: quill::Device) -> Result<(), String> {
    let (model, mut opt, loader) = default_setup()?;
    model.to_device(device).map_err(|e| e.to_string())?;
    let script = match device {
        quill::Device::Cpu => include_str!("train_peer.py").to_string(),
        d => format!("DEVICE = \"{d}\"\n{}", include_str!("train_peer.py")),
    };
    let mut peer = Peer::start(&script);
    let has_torch = peer.as_ref().is_some_and(|p| p.version.contains("torch"));
    println!(
        "quill bench train: one MNIST epoch (60,000 samples) of MLPResNet 784-512x3-10, Adam, batch 128, {} threads, {rounds} rounds, medians; peer: {}",
        rayon::current_num_threads(),
        peer.as_ref().map_or("none".to_string(), |p| p.version.clone())
    );
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
    println!("| case | quill s/epoch | PyTorch s/epoch | speed-up |");
    println!("|---|---|---|---|");
    println!(
        "| MLPResNet epoch | {q:.2} | {} | {} |",
        t.map_or("-".into(), |t| format!("{t:.2}")),
        t.map_or("-".into(), |t| format!("{:.2}x", t / q))
    );
    Ok(())
}
