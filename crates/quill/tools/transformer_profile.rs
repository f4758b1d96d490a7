//! Where one training step of `quill bench transformer`'s model spends its time: the forward
//! of each kind of piece, the backward and the optimizer step.
//! Medians of `reps` (first argument, default 15) steps; run with
//! `cargo run --release -p quill --example transformer_profile -- 15`.
use quill::nn::functional::{mse_loss, Reduction};
use quill::nn::{Module, Transformer};
use quill::optim::{Adam, Optimizer};
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
        .unwrap_or(15);
    quill::in_pool(move || run(reps))
}

fn run(reps: usize) -> quill::Result<()> {
    let (e, b, seq) = (128usize, 16usize, 64usize);
    let model = Transformer::new(e, 256, 2, 4, 32, 0.0, true, true, seq, true, 0)?;
    let mut opt = Adam::new(model.parameters(), 1e-3)?;
    let x = Tensor::new(NDArray::randn(&[b, seq, e], 1, DType::F32)?);
    let y = Tensor::new(NDArray::randn(&[b, seq, e], 2, DType::F32)?);
    let layer = &model.layers[0];
    let ln = &layer.norm1;
    let mut t: [Vec<f64>; 8] = Default::default();
    let names = [
        "forward (whole model + loss)",
        "backward",
        "adam step + zero_grad",
        "  layer_norm forward x1",
        "  attention layer forward x1",
        "  linear 128->256 + relu x1",
        "  sdpa forward x1",
        "  mlp forward x1",
    ];
    let time = |f: &mut dyn FnMut() -> quill::Result<()>| -> quill::Result<f64> {
        let s = Instant::now();
        f()?;
        Ok(s.elapsed().as_secs_f64() * 1e3)
    };
    // QUILL_PROFILE_PAUSE_MS: idle time before each step (the bench's peer runs there).
    let pause: u64 = std::env::var("QUILL_PROFILE_PAUSE_MS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    for r in 0..reps + 2 {
        std::thread::sleep(std::time::Duration::from_millis(pause));
        let mut loss = None;
        let f = time(&mut || {
            loss = Some(mse_loss(&model.forward(&x)?, &y, Reduction::Mean)?);
            Ok(())
        })?;
        let loss = loss.unwrap();
        let bw = time(&mut || loss.backward())?;
        let st = time(&mut || {
            opt.step()?;
            opt.zero_grad();
            Ok(())
        })?;
        let xin = Tensor::new(NDArray::randn(&[b, seq, e], 3, DType::F32)?);
        let l1 = time(&mut || ln.forward(&xin).map(|_| ()))?;
        let a1 = time(&mut || layer.attn.forward(&xin).map(|_| ()))?;
        let m1 = time(&mut || layer.linear_in.forward(&xin)?.relu().map(|_| ()))?;
        let q = Tensor::new(NDArray::randn(&[b, 4, seq, 32], 4, DType::F32)?);
        let s1 = time(&mut || {
            q.scaled_dot_product_attention(&q, &q, true, None)
                .map(|_| ())
        })?;
        let mm = time(&mut || {
            layer
                .linear_out
                .forward(&layer.linear_in.forward(&xin)?.relu()?)
                .map(|_| ())
        })?;
        if r >= 2 {
            for (v, s) in t.iter_mut().zip([f, bw, st, l1, a1, m1, s1, mm]) {
                v.push(s);
            }
        }
    }
    for (n, v) in names.iter().zip(t.iter_mut()) {
        println!("{n:40} {:8.3} ms", median(v));
    }
    Ok(())
}
