//! Writes the inputs, parameters, outputs and gradients of quill's RNN (tanh, ReLU), LSTM and
//! GRU (2 layers, f64, with initial states, a batch-first input permuted to (T, B, I)) to a
//! safetensors file, for `crates/quill/tests/reference/rnn_torch.py` to replay in PyTorch.
//! Usage: `cargo run -p quill --example rnn_reference_dump -- OUT.safetensors`.

use quill::io::save_safetensors;
use quill::nn::{Module, Nonlinearity, GRU, LSTM, RNN};
use quill::tensor::Tensor;
use quill::{DType, NDArray, Result};
use std::collections::BTreeMap;

fn main() -> Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or("rnn_reference.safetensors".into());
    let (t, b, i, h, l) = (5, 3, 4, 6, 2);
    let mut out: Vec<(String, NDArray)> = Vec::new();
    for (k, kind) in ["rnn_tanh", "rnn_relu", "lstm", "gru"].iter().enumerate() {
        let seed = 100 + k as u64;
        let x = Tensor::randn(&[b, t, i], seed, DType::F64)?
            .permute(&[1, 0, 2])?
            .detach()
            .requires_grad_(true)?;
        let h0 = Tensor::randn(&[l, b, h], seed + 10, DType::F64)?;
        let c0 = Tensor::randn(&[l, b, h], seed + 20, DType::F64)?;
        let (module, y, hn, cn): (Box<dyn Module>, Tensor, Tensor, Option<Tensor>) = match *kind {
            "lstm" => {
                let m = LSTM::with_dtype(i, h, l, true, seed, DType::F64)?;
                let (y, (hn, cn)) = m.forward_with(&x, Some((&h0, &c0)))?;
                (Box::new(m), y, hn, Some(cn))
            }
            "gru" => {
                let m = GRU::with_dtype(i, h, l, true, seed, DType::F64)?;
                let (y, hn) = m.forward_with(&x, Some(&h0))?;
                (Box::new(m), y, hn, None)
            }
            _ => {
                let act = if *kind == "rnn_tanh" {
                    Nonlinearity::Tanh
                } else {
                    Nonlinearity::Relu
                };
                let m = RNN::with_dtype(i, h, l, true, act, seed, DType::F64)?;
                let (y, hn) = m.forward_with(&x, Some(&h0))?;
                (Box::new(m), y, hn, None)
            }
        };
        // loss = sum(y * w) + sum(h_n) (+ sum(c_n)): every output gets a gradient.
        let w = Tensor::randn(y.shape(), seed + 30, DType::F64)?;
        let mut loss = y.mul(&w)?.sum(None, false)?.add(&hn.sum(None, false)?)?;
        if let Some(cn) = &cn {
            loss = loss.add(&cn.sum(None, false)?)?;
        }
        loss.backward()?;
        let mut put =
            |name: String, a: &NDArray| out.push((format!("{kind}.{name}"), a.compact().unwrap()));
        put("x".into(), x.array());
        put("h0".into(), h0.array());
        put("c0".into(), c0.array());
        put("w".into(), w.array());
        put("out".into(), y.array());
        put("h_n".into(), hn.array());
        if let Some(cn) = &cn {
            put("c_n".into(), cn.array());
        }
        put("grad.x".into(), x.grad().expect("x grad").array());
        for (n, p) in module.named_parameters() {
            put(format!("param.{n}"), p.array());
            put(format!("grad.{n}"), p.grad().expect("param grad").array());
        }
    }
    save_safetensors(std::path::Path::new(&path), &out, &BTreeMap::new())?;
    println!("wrote {path}");
    Ok(())
}
