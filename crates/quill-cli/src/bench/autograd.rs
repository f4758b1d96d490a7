//! `quill bench autograd`: forward + backward of an MLP 784-512-512-10 (ReLU, cross-entropy,
//! batch 128, f32) against the same model in PyTorch CPU, alternating in one run. Reports
//! milliseconds per step (medians) and the ratio.

use super::{median, peer::Peer};
use quill::nn::functional::{cross_entropy, Reduction};
use quill::tensor::{no_grad, Tensor};
use quill::{DType, NDArray};
use std::time::Instant;

struct Mlp {
    params: Vec<Tensor>,
    x: Tensor,
    y: NDArray,
}

impl Mlp {
    fn new() -> quill::Result<Mlp> {
        let sizes = [784usize, 512, 512, 10];
        let mut params = Vec::new();
        for (k, w) in sizes.windows(2).enumerate() {
            let scale = (2.0 / w[0] as f64).sqrt();
            let wt = NDArray::randn(&[w[0], w[1]], k as u64, DType::F32)?.mul_scalar(scale)?;
            params.push(Tensor::from_array(wt, true)?);
            params.push(Tensor::from_array(
                NDArray::zeros(&[w[1]], DType::F32)?,
                true,
            )?);
        }
        let x = Tensor::rand(&[128, 784], 7, DType::F32)?;
        let y = NDArray::rand(&[128], 8, DType::F64)?
            .mul_scalar(10.0)?
            .floor()?
            .astype(DType::I64)?;
        Ok(Mlp { params, x, y })
    }

    fn loss(&self) -> quill::Result<Tensor> {
        let mut h = self.x.clone();
        let n = self.params.len();
        for k in (0..n).step_by(2) {
            h = h.matmul(&self.params[k])?.add(&self.params[k + 1])?;
            if k + 2 < n {
                h = h.relu()?;
            }
        }
        cross_entropy(&h, &self.y, 0.0, Reduction::Mean)
    }

    fn step(&self) -> quill::Result<()> {
        let loss = self.loss()?;
        for p in &self.params {
            p.zero_grad();
        }
        loss.backward()
    }
}

pub fn run(args: &[String]) -> Result<(), String> {
    let rounds = super::rounds_only("autograd", args, 7)?;
    quill::in_pool(move || cases(rounds))
}

fn cases(rounds: usize) -> Result<(), String> {
    let m = Mlp::new().map_err(|e| e.to_string())?;
    let mut peer = Peer::start(include_str!("autograd_peer.py"));
    let has_torch = peer.as_ref().is_some_and(|p| p.version.contains("torch"));
    crate::report::heading(format!(
        "quill bench autograd: MLP 784-512-512-10, batch 128, f32, {} threads, {rounds} rounds x 5 reps, medians; peer: {}",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        peer.as_ref().map_or("none".to_string(), |p| p.version.clone())
    ));
    let table = crate::report::Table::new(
        "autograd",
        &[
            "case",
            "quill ms",
            "PyTorch ms",
            "PyTorch / quill (speed-up)",
        ],
    );
    type Run<'a> = Box<dyn Fn() -> quill::Result<()> + 'a>;
    let cases: Vec<(&str, &str, Run)> = vec![
        (
            "mlp_forward",
            "forward (no_grad)",
            Box::new(|| {
                let _g = no_grad();
                m.loss().map(drop)
            }),
        ),
        ("mlp_step", "forward + backward", Box::new(|| m.step())),
    ];
    for (name, what, f) in &cases {
        f().map_err(|e| e.to_string())?;
        let (mut ours, mut pt) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            for _ in 0..5 {
                let t = Instant::now();
                f().map_err(|e| e.to_string())?;
                ours.push(t.elapsed().as_secs_f64());
            }
            if let (Some(p), true) = (peer.as_mut(), has_torch) {
                pt.extend(p.run(&format!("{name} torch"), 5).unwrap_or_default());
            }
        }
        let q = median(&mut ours) * 1e3;
        let t = (!pt.is_empty()).then(|| median(&mut pt) * 1e3);
        table.line(format!(
            "| {what} | {q:.2} | {} | {} |",
            t.map_or("-".into(), |t| format!("{t:.2}")),
            t.map_or("-".into(), |t| format!("{:.2}x", t / q))
        ));
    }
    Ok(())
}
