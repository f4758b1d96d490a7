//! Lesson 7: PyTorch weights in a quill model. PyTorch saves a `state_dict` as safetensors
//! (`safetensors.torch.save_file(model.state_dict(), path)`); quill reads the file (headers and
//! sizes checked, nothing executed), and `load_state_dict` copies each tensor into the
//! parameter of the same name. Two differences to mind: `Sequential` numbers its layers as
//! PyTorch's does ("0.weight", "2.bias"), but quill's `Linear` stores its weight (in, out),
//! PyTorch's (out, in), so those transpose on the way in.
//!
//! The file here is a PyTorch `Sequential(Linear(4, 8), ReLU(), Linear(8, 3))`, written with a
//! fixed input and PyTorch's output for it (`examples/data/make_torch_mlp.py`, run once).
//!
//! `cargo run --example torch_import`

use quill::io::load_safetensors;
use quill::nn::{Linear, Module, ReLU, Sequential};
use quill::{NDArray, Result, Tensor};
use std::path::Path;

fn main() -> Result<()> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/torch_mlp.safetensors");
    let (tensors, metadata) = load_safetensors(&path)?;
    println!("{} tensors, metadata {metadata:?}", tensors.len());
    let get = |name: &str| -> Result<NDArray> {
        let t = tensors.iter().find(|(n, _)| n == name);
        t.map(|(_, a)| a.clone())
            .ok_or_else(|| quill::Error::invalid("torch_import", format!("no tensor {name}")))
    };

    let model = Sequential::new()
        .add(Linear::new(4, 8, true, 0)?)
        .add(ReLU)
        .add(Linear::new(8, 3, true, 0)?);
    // PyTorch's names, with each Linear weight transposed to quill's (in, out).
    let mut state = Vec::new();
    for (name, _) in model.state_dict() {
        let a = get(&name)?;
        let a = if name.ends_with("weight") {
            a.permute(&[1, 0])?
        } else {
            a
        };
        state.push((name, a));
    }
    model.load_state_dict(&state)?;

    let y = model.forward(&Tensor::new(get("input")?))?;
    let want = get("expected_output")?;
    let diff = y
        .array()
        .sub(&want)?
        .abs()?
        .max(None, false)?
        .item::<f64>()?;
    println!(
        "quill's output:\n{}\nlargest difference from PyTorch's: {diff:e}",
        y.array()
    );
    assert!(
        diff < 1e-5,
        "the imported model disagrees with PyTorch by {diff}"
    );
    Ok(())
}
