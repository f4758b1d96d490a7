//! Where one training step of the main job's small CNN (`models::small_cnn`, batch 128)
//! spends its time: each layer's forward and backward on its own (BatchNorm and the ReLU
//! after it as the one fused op `Sequential` runs), medians of `reps` (first argument,
//! default 20) runs; run with
//! `cargo run --release -p quill --example cnn_profile -- 20`.
use quill::nn::{models, Module};
use quill::tensor::Tensor;
use quill::{DType, NDArray};
use std::time::Instant;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> quill::Result<()> {
    let reps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    quill::in_pool(move || run(reps))
}

fn run(reps: usize) -> quill::Result<()> {
    let model = models::small_cnn(0)?;
    let names = [
        "conv 1->16",
        "bn 16 + relu",
        "",
        "maxpool",
        "conv 16->32",
        "bn 32 + relu",
        "",
        "maxpool",
        "flatten",
        "linear 1568->128",
        "relu",
        "dropout",
        "linear 128->10",
    ];
    let mut h = Tensor::new(NDArray::randn(&[128, 1, 28, 28], 1, DType::F32)?);
    let (mut tf, mut tb) = (0.0, 0.0);
    println!("| layer | forward ms | backward ms |");
    let layers = &model.layers;
    for (i, (l, name)) in layers.iter().zip(names).enumerate() {
        // The ReLU folded into the BatchNorm before it.
        if name.is_empty() {
            continue;
        }
        let fused = layers.get(i + 1).is_some_and(|n| n.is_relu());
        // As in training: the images need no gradient, every later activation does.
        let x = h.detach().requires_grad_(i > 0)?;
        let (mut f, mut b) = (Vec::new(), Vec::new());
        let mut out = None;
        for _ in 0..reps {
            let s = Instant::now();
            let y = match fused.then(|| l.forward_relu(&x)).flatten() {
                Some(y) => y?,
                None => l.forward(&x)?,
            };
            f.push(s.elapsed().as_secs_f64() * 1e3);
            let g = Tensor::new(NDArray::ones(y.shape(), DType::F32)?);
            let s = Instant::now();
            y.backward_with(&g)?;
            b.push(s.elapsed().as_secs_f64() * 1e3);
            out = Some(y);
        }
        let (fm, bm) = (median(&mut f), median(&mut b));
        println!("| {name} | {fm:.3} | {bm:.3} |");
        tf += fm;
        tb += bm;
        h = out.expect("reps > 0").detach();
    }
    println!("| total | {tf:.3} | {tb:.3} |");
    Ok(())
}
