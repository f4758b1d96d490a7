//! Lesson 5: a small CNN on MNIST: Conv2d -> BatchNorm -> ReLU -> MaxPool twice, then a
//! Linear head, trained with SGD and momentum. Images stay (N, 1, 28, 28); the loader shuffles
//! with a seed, so a run is reproducible.
//!
//! `cargo run --release --example mnist_cnn [-- STEPS]` (default 200 steps, ~95 %)

use quill::data::{DataLoader, Mnist};
use quill::nn::functional::{cross_entropy, Reduction};
use quill::nn::{BatchNorm, Conv2d, Flatten, Linear, MaxPool2d, Module, ReLU, Sequential};
use quill::optim::{Optimizer, Sgd};
use quill::tensor::{no_grad, Tensor};
use quill::DType;

fn main() -> quill::Result<()> {
    let steps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let train = Mnist::load("data/mnist", true)?;
    let test = Mnist::load("data/mnist", false)?;
    let loader = DataLoader::new(train.into_dataset()?, 64)?
        .shuffle(true)
        .seed(0);

    // 28x28 -> conv 3x3 pad 1 -> pool 2 -> 14x14 -> conv -> pool -> 7x7, 16 channels.
    let model = Sequential::new()
        .add(Conv2d::new(1, 8, 3, 1, 1, 1, true, 1)?)
        .add(BatchNorm::new_2d(8)?)
        .add(ReLU)
        .add(MaxPool2d::new(2, 2)?)
        .add(Conv2d::new(8, 16, 3, 1, 1, 1, true, 2)?)
        .add(BatchNorm::new_2d(16)?)
        .add(ReLU)
        .add(MaxPool2d::new(2, 2)?)
        .add(Flatten)
        .add(Linear::new(16 * 7 * 7, 10, true, 3)?);
    let mut opt = Sgd::new(model.parameters(), 0.05)?.momentum(0.9)?;

    for (step, batch) in loader.epoch(0).take(steps).enumerate() {
        let (images, labels) = batch?;
        let loss = cross_entropy(
            &model.forward(&Tensor::new(images))?,
            &labels,
            0.0,
            Reduction::Mean,
        )?;
        opt.zero_grad();
        loss.backward()?;
        opt.step()?;
        if step % 50 == 0 {
            println!("step {step:4}  loss {:.4}", loss.array().item::<f32>()?);
        }
    }

    // Evaluation: batch norm uses its running statistics; 1,000 test images.
    model.eval();
    let _eval = no_grad();
    let n = 1000.min(test.len());
    let x = test.images.slice(&quill::s![..n as isize])?;
    let y = test.labels.slice(&quill::s![..n as isize])?;
    let predicted = model
        .forward(&Tensor::new(x))?
        .array()
        .argmax(Some(1), false)?;
    let accuracy = predicted
        .eq(&y)?
        .astype(DType::F64)?
        .mean(None, false)?
        .item::<f64>()?;
    println!(
        "test accuracy on {n} images after {steps} steps: {:.1} %",
        100.0 * accuracy
    );
    Ok(())
}
