//! `quill bench transformer`: one training step (forward, MSE loss, backward, Adam) of a
//! 2-layer pre-norm Transformer (embedding 128, 4 heads x 32, hidden 256, causal, no dropout,
//! learned positions) on (16, 64, 128) f32 input, in quill and in the same model in PyTorch
//! CPU, alternating in one run; medians and the ratio.

use super::{median, peer::Peer};
use quill::nn::functional::{mse_loss, Reduction};
use quill::nn::{Module, Transformer};
use quill::optim::{Adam, Optimizer};
use quill::tensor::Tensor;
use quill::{DType, NDArray};
use std::time::Instant;

pub fn run(args: &[String]) -> Result<(), String> {
    let rounds = super::rounds_only("transformer", args, 20)?;
    quill::in_pool(move || bench(rounds).map_err(|e| e.to_string()))
}

fn bench(rounds: usize) -> quill::Result<()> {
    let (e, b, seq) = (128usize, 16usize, 64usize);
    let model = Transformer::new(e, 256, 2, 4, 32, 0.0, true, true, seq, true, 0)?;
    let mut opt = Adam::new(model.parameters(), 1e-3)?;
    let x = Tensor::new(NDArray::randn(&[b, seq, e], 1, DType::F32)?);
    let y = Tensor::new(NDArray::randn(&[b, seq, e], 2, DType::F32)?);
    let mut step = || -> quill::Result<()> {
        let loss = mse_loss(&model.forward(&x)?, &y, Reduction::Mean)?;
        opt.zero_grad();
        loss.backward()?;
        opt.step()
    };
    let mut peer = Peer::start(include_str!("transformer_peer.py"));
    let has_torch = peer.as_ref().is_some_and(|p| p.version.contains("torch"));
    crate::report::heading(format!(
        "quill bench transformer: training step of a 2-layer Transformer (emb 128, 4x32 heads, hidden 256, causal), batch 16 x seq 64, Adam, {} threads, {rounds} rounds, medians; peer: {}",
        rayon::current_num_threads(),
        peer.as_ref().map_or("none".to_string(), |p| p.version.clone())
    ));
    for _ in 0..3 {
        step()?;
    }
    if let (Some(p), true) = (peer.as_mut(), has_torch) {
        p.run("step torch", 3);
    }
    let (mut ours, mut pt) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        step()?;
        ours.push(t.elapsed().as_secs_f64());
        if let (Some(p), true) = (peer.as_mut(), has_torch) {
            pt.extend(p.run("step torch", 1).unwrap_or_default());
        }
    }
    let q = median(&mut ours);
    let t = (!pt.is_empty()).then(|| median(&mut pt));
    let table = crate::report::Table::new(
        "transformer",
        &["case", "quill ms", "PyTorch ms", "speed-up"],
    );
    table.line(format!(
        "| 2-layer Transformer training step | {:.2} | {} | {} |",
        q * 1e3,
        t.map_or("-".into(), |t| format!("{:.2}", t * 1e3)),
        t.map_or("-".into(), |t| format!("{:.2}x", t / q))
    ));
    Ok(())
}
