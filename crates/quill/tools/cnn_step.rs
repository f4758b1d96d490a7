//! Whole training steps of the main job's small CNN (`models::small_cnn`, Adam, batch 128):
//! forward through the `Sequential` (so with its fusions), cross-entropy, backward, optimizer
//! step. Prints the median and the fastest step of `steps` (first argument, default 60)
//! after 5 warm-up steps, for A/B runs of two builds on a noisy machine. The batch is one
//! random batch, or with a second argument `mnist` the main job's shuffled, normalised
//! MNIST batches from its loader (the data is in data/mnist); run with
//! `cargo run --release -p quill --example cnn_step -- 60 [mnist]`.
use quill::data::{DataLoader, Mnist, Normalize};
use quill::nn::functional::{cross_entropy, Reduction};
use quill::nn::{models, Module};
use quill::optim::{Adam, Optimizer};
use quill::tensor::Tensor;
use quill::{DType, NDArray};
use std::time::Instant;

fn main() -> quill::Result<()> {
    let steps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let mnist = std::env::args().nth(2).is_some_and(|a| a == "mnist");
    quill::in_pool(move || run(steps.max(1), mnist))
}

fn run(steps: usize, mnist: bool) -> quill::Result<()> {
    let model = models::small_cnn(0)?;
    let mut opt = Adam::new(model.parameters(), 1e-3)?;
    let x = NDArray::randn(&[128, 1, 28, 28], 1, DType::F32)?;
    let labels: Vec<i64> = (0..128).map(|i| (i * 7 % 10) as i64).collect();
    let y = NDArray::from_vec(labels, &[128])?;
    let loader = if mnist {
        let train = Mnist::load("data/mnist", true)?.into_dataset()?;
        let norm = Normalize::new(&[0.1307], &[0.3081])?;
        Some(DataLoader::new(train, 128)?.shuffle(true).transform(norm))
    } else {
        None
    };
    let mut batches = loader.as_ref().map(|l| l.epoch(0));
    let mut times = Vec::with_capacity(steps);
    for i in 0..steps + 5 {
        let t = Instant::now();
        let (x, y) = match batches.as_mut().and_then(|b| b.next()) {
            Some(b) => b?,
            None => (x.clone(), y.clone()),
        };
        let logits = model.forward(&Tensor::new(x))?;
        let loss = cross_entropy(&logits, &y, 0.0, Reduction::Mean)?;
        opt.zero_grad();
        loss.backward()?;
        opt.step()?;
        if i >= 5 {
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "step ms: median {:.2}, fastest {:.2} ({steps} steps, {} threads)",
        times[times.len() / 2],
        times[0],
        rayon::current_num_threads()
    );
    Ok(())
}
