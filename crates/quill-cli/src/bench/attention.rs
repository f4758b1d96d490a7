//! `quill bench attention`: forward + backward of scaled-dot-product attention on (8, L, 64)
//! f32 q, k, v (no mask) at L = 128, 512, 1024: quill's fused kernel, quill's composite
//! (matmul + softmax) and PyTorch's `F.scaled_dot_product_attention` in the same run,
//! alternating; medians, ratios, and the bytes each quill path keeps for the backward.

use super::{median, peer::Peer};
use quill::tensor::Tensor;
use quill::{DType, NDArray};
use std::time::Instant;

const BH: usize = 8;
const D: usize = 64;

pub fn run(args: &[String]) -> Result<(), String> {
    let rounds = super::rounds_only("attention", args, 7)?;
    quill::in_pool(move || bench(rounds))
}

fn step(q: &Tensor, k: &Tensor, v: &Tensor, g: &Tensor, fused: bool) -> Result<(), String> {
    for t in [q, k, v] {
        t.zero_grad();
    }
    let out = if fused {
        q.scaled_dot_product_attention(k, v, false, None)
    } else {
        q.attention_composite(k, v, false, None)
    }
    .map_err(|e| e.to_string())?;
    out.backward_with(g).map_err(|e| e.to_string())
}

fn bench(rounds: usize) -> Result<(), String> {
    let mut peer = Peer::start(include_str!("attention_peer.py"));
    let has_torch = peer.as_ref().is_some_and(|p| p.version.contains("torch"));
    crate::report::heading(format!(
        "quill bench attention: forward + backward, q, k, v (8, L, 64) f32, no mask, {} threads, {rounds} rounds, medians; peer: {}",
        rayon::current_num_threads(),
        peer.as_ref().map_or("none".to_string(), |p| p.version.clone())
    ));
    let table = crate::report::Table::new(
        "attention",
        &[
            "L",
            "fused ms",
            "composite ms",
            "PyTorch SDPA ms",
            "composite / fused",
            "PyTorch / fused",
            "kept for backward: fused",
            "composite (probs alone)",
        ],
    );
    for l in [128usize, 512, 1024] {
        let mk = |seed| -> Result<Tensor, String> {
            let a = NDArray::randn(&[BH, l, D], seed, DType::F32).map_err(|e| e.to_string())?;
            Tensor::from_array(a, true).map_err(|e| e.to_string())
        };
        let (q, k, v) = (mk(1)?, mk(2)?, mk(3)?);
        let g = Tensor::new(NDArray::ones(&[BH, l, D], DType::F32).map_err(|e| e.to_string())?);
        step(&q, &k, &v, &g, true)?;
        step(&q, &k, &v, &g, false)?;
        let (mut f, mut c, mut t) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let s = Instant::now();
            step(&q, &k, &v, &g, true)?;
            f.push(s.elapsed().as_secs_f64());
            let s = Instant::now();
            step(&q, &k, &v, &g, false)?;
            c.push(s.elapsed().as_secs_f64());
            if let (Some(p), true) = (peer.as_mut(), has_torch) {
                t.extend(p.run(&format!("sdpa-{l} torch"), 1).unwrap_or_default());
            }
        }
        let (f, c) = (median(&mut f), median(&mut c));
        let t = (!t.is_empty()).then(|| median(&mut t));
        // Beyond q, k, v (which both keep): the fused op keeps the output and one logsumexp
        // per row; the composite at least the (L, L) probabilities of every head.
        let fused_bytes = BH * l * (D + 1) * 4;
        let probs_bytes = BH * l * l * 4;
        table.line(format!(
            "| {l} | {:.2} | {:.2} | {} | {:.2}x | {} | {:.2} MiB | {:.2} MiB |",
            f * 1e3,
            c * 1e3,
            t.map_or("-".into(), |t| format!("{:.2}", t * 1e3)),
            c / f,
            t.map_or("-".into(), |t| format!("{:.2}x", t / f)),
            fused_bytes as f64 / (1 << 20) as f64,
            probs_bytes as f64 / (1 << 20) as f64,
        ));
    }
    Ok(())
}
