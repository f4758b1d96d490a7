//! Lesson 4: an MLP on MNIST in about 40 lines: a DataLoader over the IDX files in data/mnist,
//! a Sequential of Linear and ReLU layers, cross-entropy, Adam, and the test accuracy.
//!
//! `cargo run --release --example mnist_mlp [-- STEPS]` (default one epoch: 469 steps, about
//! 94 % on the test set)

use quill::data::{DataLoader, Mnist};
use quill::nn::{
    functional::cross_entropy, functional::Reduction, Linear, Module, ReLU, Sequential,
};
use quill::optim::{Adam, Optimizer};
use quill::tensor::{no_grad, Tensor};

fn main() -> quill::Result<()> {
    let steps: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(469);
    let train = Mnist::load("data/mnist", true)?;
    let test = Mnist::load("data/mnist", false)?;
    let (x_test, y_test) = (test.flat_images()?, test.labels.clone());
    let loader = DataLoader::new(train.into_dataset()?, 128)?
        .shuffle(true)
        .seed(0);

    let model = Sequential::new()
        .add(Linear::new(784, 256, true, 1)?)
        .add(ReLU)
        .add(Linear::new(256, 10, true, 2)?);
    let mut opt = Adam::new(model.parameters(), 1e-3)?;

    for (step, batch) in loader.epoch(0).take(steps).enumerate() {
        let (images, labels) = batch?;
        let x = Tensor::new(images.reshape(&[-1, 784])?); // (128, 1, 28, 28) -> (128, 784)
        let loss = cross_entropy(&model.forward(&x)?, &labels, 0.0, Reduction::Mean)?;
        opt.zero_grad();
        loss.backward()?;
        opt.step()?;
        if step % 100 == 0 {
            println!("step {step:4}  loss {:.4}", loss.array().item::<f32>()?);
        }
    }

    let logits = {
        let _eval = no_grad(); // no graph for the evaluation
        model.forward(&Tensor::new(x_test))?
    };
    let hits = logits.array().argmax(Some(1), false)?.eq(&y_test)?;
    let accuracy = hits
        .astype(quill::DType::F64)?
        .mean(None, false)?
        .item::<f64>()?;
    println!(
        "test accuracy after {steps} steps: {:.2} %",
        100.0 * accuracy
    );
    Ok(())
}
