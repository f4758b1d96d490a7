//! `quill bench lstm`: one training step (forward, backward, Adam update) of a 2-layer LSTM
//! and of a 2-layer GRU (seq 32, batch 32, input 64, hidden 128) with a Linear head and
//! cross-entropy over every step's output, in quill (fused layers, and the LSTM's per-step
//! graph for comparison) and in PyTorch CPU (`torch.nn.LSTM` / `torch.nn.GRU`), alternating in
//! one run; milliseconds per step (medians) and the ratio.

use super::{median, peer::Peer};
use quill::nn::functional::{cross_entropy, Reduction};
use quill::nn::{Linear, Module, GRU, LSTM};
use quill::optim::{Adam, Optimizer};
use quill::tensor::Tensor;
use quill::{DType, NDArray};
use std::time::Instant;

const SEQ: usize = 32;
const BATCH: usize = 32;
const INPUT: usize = 64;
const HIDDEN: usize = 128;
const CLASSES: usize = 10;
const STEPS_PER_ROUND: usize = 5;

/// The recurrent stack a bench row trains.
#[derive(Clone, Copy)]
enum Net {
    Lstm { fused: bool },
    Gru,
}

struct Setup {
    rnn: Box<dyn Module>,
    head: Linear,
    opt: Adam,
    x: Tensor,
    y: NDArray,
}

impl Setup {
    fn new(net: Net) -> quill::Result<Setup> {
        let rnn: Box<dyn Module> = match net {
            Net::Lstm { fused } => {
                let mut lstm = LSTM::new(INPUT, HIDDEN, 2, true, 1)?;
                lstm.fused = fused;
                Box::new(lstm)
            }
            Net::Gru => Box::new(GRU::new(INPUT, HIDDEN, 2, true, 1)?),
        };
        let head = Linear::new(HIDDEN, CLASSES, true, 2)?;
        let mut params = rnn.parameters();
        params.extend(head.parameters());
        let opt = Adam::new(params, 1e-3)?;
        let x = Tensor::randn(&[SEQ, BATCH, INPUT], 3, DType::F32)?;
        let y = NDArray::rand(&[SEQ * BATCH], 4, DType::F64)?
            .mul_scalar(CLASSES as f64)?
            .floor()?
            .astype(DType::I64)?;
        Ok(Setup {
            rnn,
            head,
            opt,
            x,
            y,
        })
    }

    fn step(&mut self) -> quill::Result<()> {
        let out = self.rnn.forward(&self.x)?;
        let logits = self.head.forward(&out.reshape(&[-1, HIDDEN as isize])?)?;
        let loss = cross_entropy(&logits, &self.y, 0.0, Reduction::Mean)?;
        self.opt.zero_grad();
        loss.backward()?;
        self.opt.step()
    }

    /// Seconds of each of `n` steps.
    fn time(&mut self, n: usize) -> Result<Vec<f64>, String> {
        (0..n)
            .map(|_| {
                let t = Instant::now();
                self.step().map_err(|e| e.to_string())?;
                Ok(t.elapsed().as_secs_f64())
            })
            .collect()
    }
}

pub fn run(args: &[String]) -> Result<(), String> {
    let rounds = super::rounds_only("lstm", args, 10)?;
    quill::in_pool(move || steps(rounds))
}

fn steps(rounds: usize) -> Result<(), String> {
    let err = |e: quill::Error| e.to_string();
    let mut fused = Setup::new(Net::Lstm { fused: true }).map_err(err)?;
    let mut graph = Setup::new(Net::Lstm { fused: false }).map_err(err)?;
    let mut gru = Setup::new(Net::Gru).map_err(err)?;
    let mut peer = Peer::start(include_str!("lstm_peer.py"));
    let has_torch = peer.as_ref().is_some_and(|p| p.version.contains("torch"));
    crate::report::heading(format!(
        "quill bench lstm: one training step (forward + backward + Adam) of a 2-layer LSTM and a 2-layer GRU, seq {SEQ}, batch {BATCH}, input {INPUT}, hidden {HIDDEN}, Linear head + cross-entropy over every step; {} threads, {rounds} rounds of {STEPS_PER_ROUND} steps, medians; peer: {}",
        rayon::current_num_threads(),
        peer.as_ref().map_or("none".to_string(), |p| p.version.clone())
    ));
    // Warm-up: buffer pool, thread pool, PyTorch's allocator.
    fused.time(2)?;
    graph.time(1)?;
    gru.time(2)?;
    if let (Some(p), true) = (peer.as_mut(), has_torch) {
        p.run("step torch", 2);
        p.run("gru torch", 2);
    }
    let (mut f, mut g, mut r, mut pt, mut pg) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        f.extend(fused.time(STEPS_PER_ROUND)?);
        g.extend(graph.time(STEPS_PER_ROUND)?);
        r.extend(gru.time(STEPS_PER_ROUND)?);
        if let (Some(p), true) = (peer.as_mut(), has_torch) {
            pt.extend(p.run("step torch", STEPS_PER_ROUND).unwrap_or_default());
            pg.extend(p.run("gru torch", STEPS_PER_ROUND).unwrap_or_default());
        }
    }
    let ms = |v: &mut Vec<f64>| (!v.is_empty()).then(|| median(v) * 1e3);
    let (t_lstm, t_gru) = (ms(&mut pt), ms(&mut pg));
    let table = crate::report::Table::new(
        "lstm",
        &["case", "quill ms/step", "PyTorch ms/step", "speed-up"],
    );
    for (name, ms, t) in [
        (
            "LSTM train step (fused layers)",
            median(&mut f) * 1e3,
            t_lstm,
        ),
        (
            "LSTM train step (per-step graph)",
            median(&mut g) * 1e3,
            t_lstm,
        ),
        ("GRU train step (fused layers)", median(&mut r) * 1e3, t_gru),
    ] {
        table.line(format!(
            "| {name} | {ms:.2} | {} | {} |",
            t.map_or("-".into(), |t| format!("{t:.2}")),
            t.map_or("-".into(), |t| format!("{:.2}x", t / ms))
        ));
    }
    Ok(())
}
