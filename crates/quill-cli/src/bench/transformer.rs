//! `quill bench transformer`: one training step (forward, MSE loss, backward, Adam) of a
//! 2-layer pre-norm Transformer (embedding 128, 4 heads x 32, hidden 256, causal, no dropout,
//! learned positions) on (16, 64, 128) f32 input, in quill and in the same model in PyTorch
//! CPU, alternating in one run; medians and the ratio. `--precision bf16` times bf16 autocast
//! in both (forward and loss under `quill::autocast` / `torch.autocast`), `--precision both`
//! f32 and bf16 side by side (a model each, same seed).

use super::train::{label, precisions, speedup_row};
use super::{median, peer::Peer};
use crate::train::precision::Precision;
use quill::nn::functional::{mse_loss, Reduction};
use quill::nn::{Module, Transformer};
use quill::optim::{Adam, Optimizer};
use quill::tensor::Tensor;
use quill::{DType, NDArray};
use std::time::Instant;

pub fn run(args: &[String]) -> Result<(), String> {
    let mut rounds = 20usize;
    let mut precision = vec![Precision::F32];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => rounds = super::rounds_value(it.next())?,
            "--precision" => precision = precisions(it.next())?,
            other => return Err(format!("bench transformer: unknown option '{other}'")),
        }
    }
    quill::in_pool(move || bench(rounds, &precision))
}

/// One precision's model and optimizer, and its timings.
struct Case {
    precision: Precision,
    model: Transformer,
    opt: Adam,
    ours: Vec<f64>,
    torch: Vec<f64>,
}

impl Case {
    fn step(&mut self, x: &Tensor, y: &Tensor) -> Result<(), String> {
        let q = |r: quill::Result<()>| r.map_err(|e| e.to_string());
        let loss = {
            let _autocast = self.precision.guard()?;
            let out = self.model.forward(x).map_err(|e| e.to_string())?;
            mse_loss(&out, y, Reduction::Mean).map_err(|e| e.to_string())?
        };
        self.opt.zero_grad();
        q(loss.backward())?;
        q(self.opt.step())
    }
}

fn bench(rounds: usize, precisions: &[Precision]) -> Result<(), String> {
    let q = |e: quill::Error| e.to_string();
    let (e, b, seq) = (128usize, 16usize, 64usize);
    let mut cases = Vec::new();
    for &precision in precisions {
        let model = Transformer::new(e, 256, 2, 4, 32, 0.0, true, true, seq, true, 0).map_err(q)?;
        let opt = Adam::new(model.parameters(), 1e-3).map_err(q)?;
        cases.push(Case {
            precision,
            model,
            opt,
            ours: Vec::new(),
            torch: Vec::new(),
        });
    }
    let x = Tensor::new(NDArray::randn(&[b, seq, e], 1, DType::F32).map_err(q)?);
    let y = Tensor::new(NDArray::randn(&[b, seq, e], 2, DType::F32).map_err(q)?);
    let mut peer = Peer::start(include_str!("transformer_peer.py"));
    let has_torch = peer.as_ref().is_some_and(|p| p.version.contains("torch"));
    let words: Vec<String> = precisions.iter().map(|p| p.describe()).collect();
    crate::report::heading(format!(
        "quill bench transformer: training step of a 2-layer Transformer (emb 128, 4x32 heads, hidden 256, causal), batch 16 x seq 64, Adam, {} threads, {rounds} rounds, medians; precision: {}; peer: {}",
        rayon::current_num_threads(),
        words.join(" / "),
        peer.as_ref().map_or("none".to_string(), |p| p.version.clone())
    ));
    for c in cases.iter_mut() {
        for _ in 0..3 {
            c.step(&x, &y)?;
        }
        if let (Some(p), true) = (peer.as_mut(), has_torch) {
            p.run(&format!("step{} torch", label(c.precision).1), 3);
        }
    }
    for _ in 0..rounds {
        for c in cases.iter_mut() {
            let t = Instant::now();
            c.step(&x, &y)?;
            c.ours.push(t.elapsed().as_secs_f64());
            if let (Some(p), true) = (peer.as_mut(), has_torch) {
                let case = format!("step{} torch", label(c.precision).1);
                c.torch.extend(p.run(&case, 1).unwrap_or_default());
            }
        }
    }
    let table = crate::report::Table::new(
        "transformer",
        &["case", "quill ms", "PyTorch ms", "speed-up"],
    );
    let mut medians = Vec::new();
    for c in cases.iter_mut() {
        let q = median(&mut c.ours);
        let t = (!c.torch.is_empty()).then(|| median(&mut c.torch));
        table.line(format!(
            "| 2-layer Transformer training step, {} | {:.2} | {} | {} |",
            label(c.precision).0,
            q * 1e3,
            t.map_or("-".into(), |t| format!("{:.2}", t * 1e3)),
            t.map_or("-".into(), |t| format!("{:.2}x", t / q))
        ));
        medians.push((q, t));
    }
    speedup_row(&table, &medians);
    Ok(())
}
