//! The recurrent layers (RNN tanh / ReLU, LSTM, GRU and their cells) against a per-step
//! reference written here over plain `Vec<f64>` with the modules' own parameter values:
//! outputs and final states for 1 and several layers, with and without bias and initial
//! state, fused and per-step paths, odd sizes (batch 1, seq_len 1) and non-contiguous inputs;
//! gradients by central differences in f64 (parameters, input and state); the fused op's
//! gradients and second derivatives against the per-step graph; PyTorch's parameter names
//! and shapes; a small sequence task that must be learnt; bad inputs.

use quill::nn::{
    GRUCell, LSTMCell, Linear, Module, Nonlinearity, RNNCell, RecurrentParams, GRU, LSTM, RNN,
};
use quill::optim::{Adam, Optimizer};
use quill::tensor::{grad, gradcheck, BackwardOptions, GradcheckOptions, Tensor};
use quill::{s, DType, NDArray, Result};
use quill_test_support::Prng;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Tanh,
    Relu,
    Lstm,
    Gru,
}

const KINDS: [Kind; 4] = [Kind::Tanh, Kind::Relu, Kind::Lstm, Kind::Gru];

impl Kind {
    fn gates(self) -> usize {
        match self {
            Kind::Tanh | Kind::Relu => 1,
            Kind::Lstm => 4,
            Kind::Gru => 3,
        }
    }
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.array()
        .astype(DType::F64)
        .unwrap()
        .to_vec::<f64>()
        .unwrap()
}

fn uniform(rng: &mut Prng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|_| lo + (hi - lo) * rng.unit()).collect()
}

fn tensor(v: Vec<f64>, shape: &[usize], dtype: DType) -> Tensor {
    Tensor::new(NDArray::from_vec(v, shape).unwrap().astype(dtype).unwrap())
}

#[track_caller]
fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

// ---------------------------------------------------------------------------------------------
// The reference: one step of each cell over Vec<f64>, then layers and stacks.

/// One layer's parameters read back from the module.
struct RefParams {
    wih: Vec<f64>,
    whh: Vec<f64>,
    bih: Option<Vec<f64>>,
    bhh: Option<Vec<f64>>,
    input: usize,
    hidden: usize,
}

impl RefParams {
    fn of(p: &RecurrentParams) -> RefParams {
        RefParams {
            wih: vals(&p.weight_ih),
            whh: vals(&p.weight_hh),
            bih: p.bias_ih.as_ref().map(vals),
            bhh: p.bias_hh.as_ref().map(vals),
            input: p.weight_ih.shape()[1],
            hidden: p.weight_hh.shape()[1],
        }
    }
}

/// `W v + b` for a row-major `w` (rows, cols).
fn affine(w: &[f64], v: &[f64], b: Option<&Vec<f64>>, rows: usize) -> Vec<f64> {
    let cols = v.len();
    (0..rows)
        .map(|k| {
            let dot: f64 = (0..cols).map(|j| w[k * cols + j] * v[j]).sum();
            dot + b.map_or(0.0, |b| b[k])
        })
        .collect()
}

/// One step for one batch row: returns (h', c').
fn ref_step(kind: Kind, p: &RefParams, x: &[f64], h: &[f64], c: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let hd = p.hidden;
    let rows = kind.gates() * hd;
    let gx = affine(&p.wih, x, p.bih.as_ref(), rows);
    let gh = affine(&p.whh, h, p.bhh.as_ref(), rows);
    let mut h2 = vec![0.0; hd];
    let mut c2 = vec![0.0; hd];
    for j in 0..hd {
        match kind {
            Kind::Tanh => h2[j] = (gx[j] + gh[j]).tanh(),
            Kind::Relu => h2[j] = (gx[j] + gh[j]).max(0.0),
            Kind::Lstm => {
                let a = |k: usize| gx[k * hd + j] + gh[k * hd + j];
                let (i, f, g, o) = (sigmoid(a(0)), sigmoid(a(1)), a(2).tanh(), sigmoid(a(3)));
                c2[j] = f * c[j] + i * g;
                h2[j] = o * c2[j].tanh();
            }
            Kind::Gru => {
                let r = sigmoid(gx[j] + gh[j]);
                let z = sigmoid(gx[hd + j] + gh[hd + j]);
                let n = (gx[2 * hd + j] + r * gh[2 * hd + j]).tanh();
                h2[j] = (1.0 - z) * n + z * h[j];
            }
        }
    }
    (h2, c2)
}

/// The stack over `x` (T, B, I) flat from `h0`, `c0` (L, B, H) flat: (out, h_n, c_n).
fn ref_stack(
    kind: Kind,
    layers: &[RefParams],
    x: &[f64],
    (t_len, b): (usize, usize),
    h0: &[f64],
    c0: &[f64],
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let hd = layers[0].hidden;
    let mut seq = x.to_vec();
    let (mut hn, mut cn) = (Vec::new(), Vec::new());
    for (k, p) in layers.iter().enumerate() {
        let i = p.input;
        let mut out = vec![0.0; t_len * b * hd];
        for r in 0..b {
            let at = (k * b + r) * hd;
            let mut h = h0[at..at + hd].to_vec();
            let mut c = c0[at..at + hd].to_vec();
            for t in 0..t_len {
                let xr = &seq[(t * b + r) * i..(t * b + r + 1) * i];
                let (h2, c2) = ref_step(kind, p, xr, &h, &c);
                out[(t * b + r) * hd..(t * b + r + 1) * hd].copy_from_slice(&h2);
                h = h2;
                c = c2;
            }
            hn.push((k, r, h));
            cn.push((k, r, c));
        }
        seq = out;
    }
    let flat = |v: Vec<(usize, usize, Vec<f64>)>| -> Vec<f64> {
        let mut v = v;
        v.sort_by_key(|(k, r, _)| (*k, *r));
        v.into_iter().flat_map(|(_, _, h)| h).collect()
    };
    (seq, flat(hn), flat(cn))
}

// ---------------------------------------------------------------------------------------------
// One handle over the three sequence modules.

enum Net {
    Rnn(RNN),
    Lstm(LSTM),
    Gru(GRU),
}

impl Net {
    fn new(kind: Kind, i: usize, h: usize, l: usize, bias: bool, seed: u64, dt: DType) -> Net {
        match kind {
            Kind::Tanh => {
                Net::Rnn(RNN::with_dtype(i, h, l, bias, Nonlinearity::Tanh, seed, dt).unwrap())
            }
            Kind::Relu => {
                Net::Rnn(RNN::with_dtype(i, h, l, bias, Nonlinearity::Relu, seed, dt).unwrap())
            }
            Kind::Lstm => Net::Lstm(LSTM::with_dtype(i, h, l, bias, seed, dt).unwrap()),
            Kind::Gru => Net::Gru(GRU::with_dtype(i, h, l, bias, seed, dt).unwrap()),
        }
    }
    fn layers(&self) -> &[RecurrentParams] {
        match self {
            Net::Rnn(m) => &m.layers,
            Net::Lstm(m) => &m.layers,
            Net::Gru(m) => &m.layers,
        }
    }
    fn set_fused(&mut self, fused: bool) {
        match self {
            Net::Rnn(m) => m.fused = fused,
            Net::Lstm(m) => m.fused = fused,
            Net::Gru(m) => m.fused = fused,
        }
    }
    fn module(&self) -> &dyn Module {
        match self {
            Net::Rnn(m) => m,
            Net::Lstm(m) => m,
            Net::Gru(m) => m,
        }
    }
    /// (out, h_n, c_n); `c0` is used only by LSTM.
    fn run(
        &self,
        x: &Tensor,
        h0: Option<&Tensor>,
        c0: Option<&Tensor>,
    ) -> Result<(Tensor, Tensor, Option<Tensor>)> {
        match self {
            Net::Rnn(m) => m.forward_with(x, h0).map(|(o, h)| (o, h, None)),
            Net::Gru(m) => m.forward_with(x, h0).map(|(o, h)| (o, h, None)),
            Net::Lstm(m) => {
                let state = h0.zip(c0);
                m.forward_with(x, state).map(|(o, (h, c))| (o, h, Some(c)))
            }
        }
    }
}

/// `v` laid out as (T, B, I) but stored batch-first (B, T, I) and permuted: a
/// non-contiguous view with the same values.
fn batch_first_view(v: &[f64], (t, b, i): (usize, usize, usize), dtype: DType) -> Tensor {
    let mut bf = vec![0.0; v.len()];
    for tt in 0..t {
        for r in 0..b {
            for k in 0..i {
                bf[(r * t + tt) * i + k] = v[(tt * b + r) * i + k];
            }
        }
    }
    let a = NDArray::from_vec(bf, &[b, t, i])
        .unwrap()
        .astype(dtype)
        .unwrap();
    Tensor::new(a.permute(&[1, 0, 2]).unwrap())
}

#[test]
fn sequence_modules_match_the_per_step_reference() -> Result<()> {
    let mut rng = Prng::new(1);
    let (i, hd) = (4, 5);
    let mut cases = 0;
    for kind in KINDS {
        for layers in [1, 3] {
            for bias in [true, false] {
                for (t, b) in [(5, 3), (1, 1), (1, 4), (6, 1)] {
                    for with_state in [false, true] {
                        for (fused, dtype, tol) in [
                            (true, DType::F64, 1e-12),
                            (false, DType::F64, 1e-12),
                            (true, DType::F32, 2e-5),
                        ] {
                            let seed = rng.next_u64();
                            let mut net = Net::new(kind, i, hd, layers, bias, seed, dtype);
                            net.set_fused(fused);
                            let xv = uniform(&mut rng, t * b * i, -2.0, 2.0);
                            let n0 = layers * b * hd;
                            let (h0v, c0v) = if with_state {
                                (
                                    uniform(&mut rng, n0, -1.0, 1.0),
                                    uniform(&mut rng, n0, -1.0, 1.0),
                                )
                            } else {
                                (vec![0.0; n0], vec![0.0; n0])
                            };
                            // Alternate contiguous and permuted (batch-first) inputs.
                            let x = if cases % 2 == 0 {
                                tensor(xv.clone(), &[t, b, i], dtype)
                            } else {
                                batch_first_view(&xv, (t, b, i), dtype)
                            };
                            let h0 = tensor(h0v.clone(), &[layers, b, hd], dtype);
                            let c0 = tensor(c0v.clone(), &[layers, b, hd], dtype);
                            let (out, hn, cn) = if with_state {
                                net.run(&x, Some(&h0), Some(&c0))?
                            } else {
                                net.run(&x, None, None)?
                            };
                            let refs: Vec<RefParams> =
                                net.layers().iter().map(RefParams::of).collect();
                            let (ro, rh, rc) = ref_stack(kind, &refs, &xv, (t, b), &h0v, &c0v);
                            let what = format!(
                                "{kind:?} layers {layers} bias {bias} T {t} B {b} state {with_state} fused {fused} {dtype}"
                            );
                            assert_eq!(out.shape(), &[t, b, hd], "{what}");
                            assert_eq!(hn.shape(), &[layers, b, hd], "{what}");
                            assert_eq!(out.dtype(), dtype, "{what}");
                            assert_close(&vals(&out), &ro, tol, &format!("{what}: output"));
                            assert_close(&vals(&hn), &rh, tol, &format!("{what}: h_n"));
                            if let Some(cn) = cn {
                                assert_close(&vals(&cn), &rc, tol, &format!("{what}: c_n"));
                            }
                            // Module::forward is the output from a zero state.
                            if !with_state {
                                let y = net.module().forward(&x)?;
                                assert_close(&vals(&y), &ro, tol, &format!("{what}: forward"));
                            }
                            cases += 1;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(cases, 4 * 2 * 2 * 4 * 2 * 3);
    Ok(())
}

#[test]
fn cells_match_the_per_step_reference() -> Result<()> {
    let mut rng = Prng::new(2);
    let (i, hd) = (3, 4);
    for kind in KINDS {
        for bias in [true, false] {
            for b in [1, 5] {
                for with_state in [false, true] {
                    for fused in [true, false] {
                        let seed = rng.next_u64();
                        let dt = DType::F64;
                        let xv = uniform(&mut rng, b * i, -2.0, 2.0);
                        let (hv, cv) = if with_state {
                            (
                                uniform(&mut rng, b * hd, -1.0, 1.0),
                                uniform(&mut rng, b * hd, -1.0, 1.0),
                            )
                        } else {
                            (vec![0.0; b * hd], vec![0.0; b * hd])
                        };
                        // x transposed: stored (I, B).
                        let mut xt = vec![0.0; b * i];
                        for r in 0..b {
                            for k in 0..i {
                                xt[k * b + r] = xv[r * i + k];
                            }
                        }
                        let x = tensor(xt, &[i, b], dt).transpose(0, 1)?;
                        let h = tensor(hv.clone(), &[b, hd], dt);
                        let c = tensor(cv.clone(), &[b, hd], dt);
                        let hs = with_state.then_some(&h);
                        let (got_h, got_c, params) = match kind {
                            Kind::Tanh | Kind::Relu => {
                                let act = if kind == Kind::Tanh {
                                    Nonlinearity::Tanh
                                } else {
                                    Nonlinearity::Relu
                                };
                                let mut m = RNNCell::with_dtype(i, hd, bias, act, seed, dt)?;
                                m.fused = fused;
                                let h2 = m.forward_with(&x, hs)?;
                                if !with_state {
                                    assert_eq!(vals(&m.forward(&x)?), vals(&h2));
                                }
                                (h2, None, RefParams::of(&m.params))
                            }
                            Kind::Lstm => {
                                let mut m = LSTMCell::with_dtype(i, hd, bias, seed, dt)?;
                                m.fused = fused;
                                let (h2, c2) =
                                    m.forward_with(&x, with_state.then_some((&h, &c)))?;
                                (h2, Some(c2), RefParams::of(&m.params))
                            }
                            Kind::Gru => {
                                let mut m = GRUCell::with_dtype(i, hd, bias, seed, dt)?;
                                m.fused = fused;
                                (m.forward_with(&x, hs)?, None, RefParams::of(&m.params))
                            }
                        };
                        let (mut wh, mut wc) = (Vec::new(), Vec::new());
                        for r in 0..b {
                            let (h2, c2) = ref_step(
                                kind,
                                &params,
                                &xv[r * i..(r + 1) * i],
                                &hv[r * hd..(r + 1) * hd],
                                &cv[r * hd..(r + 1) * hd],
                            );
                            wh.extend(h2);
                            wc.extend(c2);
                        }
                        let what = format!(
                            "{kind:?} cell bias {bias} B {b} state {with_state} fused {fused}"
                        );
                        assert_eq!(got_h.shape(), &[b, hd], "{what}");
                        assert_close(&vals(&got_h), &wh, 1e-12, &format!("{what}: h"));
                        if let Some(c2) = got_c {
                            assert_close(&vals(&c2), &wc, 1e-12, &format!("{what}: c"));
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

#[test]
fn parameters_have_pytorch_names_shapes_and_init() -> Result<()> {
    let (i, hd) = (7, 16);
    for kind in KINDS {
        let g = kind.gates();
        let net = Net::new(kind, i, hd, 2, true, 3, DType::F32);
        let named = net.module().named_parameters();
        let want: Vec<(String, Vec<usize>)> = (0..2)
            .flat_map(|k| {
                let inp = if k == 0 { i } else { hd };
                vec![
                    (format!("weight_ih_l{k}"), vec![g * hd, inp]),
                    (format!("weight_hh_l{k}"), vec![g * hd, hd]),
                    (format!("bias_ih_l{k}"), vec![g * hd]),
                    (format!("bias_hh_l{k}"), vec![g * hd]),
                ]
            })
            .collect();
        let got: Vec<(String, Vec<usize>)> = named
            .iter()
            .map(|(n, t)| (n.clone(), t.shape().to_vec()))
            .collect();
        assert_eq!(got, want, "{kind:?}");
        let bound = 1.0 / (hd as f64).sqrt();
        let mut firsts = Vec::new();
        for (n, t) in &named {
            assert!(t.requires_grad(), "{kind:?} {n}");
            let v = vals(t);
            assert!(
                v.iter().all(|x| x.abs() <= bound),
                "{kind:?} {n}: outside ±1/sqrt(H)"
            );
            // Spread over the range, not a constant.
            let (lo, hi) = v
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            assert!(hi - lo > bound, "{kind:?} {n}: values span only {lo}..{hi}");
            firsts.push(v[0]);
        }
        firsts.sort_by(f64::total_cmp);
        firsts.dedup();
        assert_eq!(
            firsts.len(),
            named.len(),
            "{kind:?}: two parameters share values"
        );
        // Without bias: only the weights.
        let nb = Net::new(kind, i, hd, 1, false, 3, DType::F32);
        let names: Vec<String> = nb
            .module()
            .named_parameters()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["weight_ih_l0", "weight_hh_l0"]);
    }
    let cell = LSTMCell::new(3, 2, true, 0)?;
    let names: Vec<(String, Vec<usize>)> = cell
        .named_parameters()
        .into_iter()
        .map(|(n, t)| (n, t.shape().to_vec()))
        .collect();
    assert_eq!(
        names,
        [
            ("weight_ih".to_string(), vec![8, 3]),
            ("weight_hh".to_string(), vec![8, 2]),
            ("bias_ih".to_string(), vec![8]),
            ("bias_hh".to_string(), vec![8]),
        ]
    );
    Ok(())
}

#[test]
fn state_dict_round_trip_reproduces_outputs() -> Result<()> {
    let a = LSTM::new(3, 4, 2, true, 10)?;
    let b = LSTM::new(3, 4, 2, true, 11)?;
    let x = Tensor::randn(&[4, 2, 3], 5, DType::F32)?;
    assert_ne!(vals(&a.forward(&x)?), vals(&b.forward(&x)?));
    b.load_state_dict(&a.state_dict())?;
    assert_eq!(vals(&a.forward(&x)?), vals(&b.forward(&x)?));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Gradients

/// f64 leaves: x as a permuted batch-first view, h0 / c0 as every other row of a reversed
/// buffer (stride -2), and every parameter; checks all of their gradients.
#[test]
fn gradients_match_central_differences() -> Result<()> {
    let mut rng = Prng::new(4);
    let (t, b, i, hd, layers) = (3, 2, 3, 2, 2);
    for kind in KINDS {
        for fused in [true, false] {
            for bias in [true, false] {
                let mut net = Net::new(kind, i, hd, layers, bias, rng.next_u64(), DType::F64);
                net.set_fused(fused);
                // ReLU's kink: keep pre-activations away from 0 by a positive input.
                let (lo, hi) = if kind == Kind::Relu {
                    (0.2, 1.5)
                } else {
                    (-1.5, 1.5)
                };
                let xv = uniform(&mut rng, t * b * i, lo, hi);
                let x = Tensor::from_array(
                    batch_first_view(&xv, (t, b, i), DType::F64).array().clone(),
                    true,
                )?;
                let n0 = layers * b * hd;
                let stepped = |rng: &mut Prng| -> Result<Tensor> {
                    let buf =
                        NDArray::from_vec(uniform(rng, 2 * n0, 0.1, 0.9), &[2 * layers, b, hd])?;
                    Tensor::from_array(buf.slice(&s![..;-2])?, true)
                };
                let (h0, c0) = (stepped(&mut rng)?, stepped(&mut rng)?);
                assert!(!x.array().is_contiguous() && !h0.array().is_contiguous());
                let mut inputs = vec![x, h0];
                if kind == Kind::Lstm {
                    inputs.push(c0);
                }
                inputs.extend(net.module().parameters());
                let f = |xs: &[Tensor]| -> Result<Tensor> {
                    let c0 = (kind == Kind::Lstm).then(|| &xs[2]);
                    let (out, hn, cn) = net.run(&xs[0], Some(&xs[1]), c0)?;
                    // Every output reaches the checked scalar.
                    let mut parts = vec![out.reshape(&[-1])?, hn.reshape(&[-1])?];
                    if let Some(cn) = cn {
                        parts.push(cn.reshape(&[-1])?);
                    }
                    Tensor::concat(&parts.iter().collect::<Vec<_>>(), 0)
                };
                let rep = gradcheck(f, &inputs, GradcheckOptions::default())?;
                assert!(rep.passed, "{kind:?} fused {fused} bias {bias}: {rep}");
            }
        }
    }
    Ok(())
}

#[test]
fn cell_gradients_match_central_differences() -> Result<()> {
    let mut rng = Prng::new(5);
    let (b, i, hd) = (3, 2, 3);
    let leaf = |rng: &mut Prng, shape: &[usize]| -> Tensor {
        let n = shape.iter().product();
        Tensor::from_array(
            NDArray::from_vec(uniform(rng, n, -1.0, 1.0), shape).unwrap(),
            true,
        )
        .unwrap()
    };
    let x = leaf(&mut rng, &[i, b])
        .transpose(0, 1)?
        .detach()
        .requires_grad_(true)?;
    let (h, c) = (leaf(&mut rng, &[b, hd]), leaf(&mut rng, &[b, hd]));
    let lstm = LSTMCell::with_dtype(i, hd, true, 1, DType::F64)?;
    let mut inputs = vec![x.clone(), h.clone(), c.clone()];
    inputs.extend(lstm.parameters());
    let rep = gradcheck(
        |xs| {
            let (h2, c2) = lstm.forward_with(&xs[0], Some((&xs[1], &xs[2])))?;
            Tensor::concat(&[&h2, &c2], 1)
        },
        &inputs,
        GradcheckOptions::default(),
    )?;
    assert!(rep.passed, "LSTMCell: {rep}");
    let gru = GRUCell::with_dtype(i, hd, true, 2, DType::F64)?;
    let mut inputs = vec![x.clone(), h.clone()];
    inputs.extend(gru.parameters());
    let rep = gradcheck(
        |xs| gru.forward_with(&xs[0], Some(&xs[1])),
        &inputs,
        GradcheckOptions::default(),
    )?;
    assert!(rep.passed, "GRUCell: {rep}");
    let rnn = RNNCell::with_dtype(i, hd, true, Nonlinearity::Tanh, 3, DType::F64)?;
    let mut inputs = vec![x, h];
    inputs.extend(rnn.parameters());
    let rep = gradcheck(
        |xs| rnn.forward_with(&xs[0], Some(&xs[1])),
        &inputs,
        GradcheckOptions::default(),
    )?;
    assert!(rep.passed, "RNNCell: {rep}");
    Ok(())
}

/// The fused layers against the per-step graph at a larger size, in f32: first derivatives
/// of every parameter, and second derivatives (a gradient penalty) through `create_graph`.
#[test]
fn fused_gradients_equal_the_per_step_graph() -> Result<()> {
    let (t, b, i, hd) = (7, 4, 5, 6);
    for kind in KINDS {
        let x = Tensor::randn(&[t, b, i], 7, DType::F32)?.requires_grad_(true)?;
        let run = |fused: bool, second: bool| -> Result<Vec<Vec<f64>>> {
            let mut net = Net::new(kind, i, hd, 2, true, 9, DType::F32);
            net.set_fused(fused);
            let (out, hn, _) = net.run(&x, None, None)?;
            let w = Tensor::randn(out.shape(), 3, DType::F32)?;
            let loss = out
                .mul(&w)?
                .sum(None, false)?
                .add(&hn.square()?.sum(None, false)?)?;
            let params = net.module().parameters();
            let loss = if second {
                let opts = BackwardOptions {
                    retain_graph: true,
                    create_graph: true,
                    overwrite_grad: false,
                };
                let gx = grad(&loss, std::slice::from_ref(&x), None, opts)?;
                gx[0].square()?.sum(None, false)?
            } else {
                loss
            };
            let gs = grad(&loss, &params, None, BackwardOptions::default())?;
            Ok(gs.iter().map(vals).collect())
        };
        for second in [false, true] {
            let (a, c) = (run(true, second)?, run(false, second)?);
            for (k, (ga, gc)) in a.iter().zip(&c).enumerate() {
                let norm = gc.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                assert!(
                    norm > 0.0,
                    "{kind:?} second {second} param {k}: zero gradient"
                );
                let scaled: Vec<f64> = ga.iter().map(|v| v / norm).collect();
                let want: Vec<f64> = gc.iter().map(|v| v / norm).collect();
                assert_close(
                    &scaled,
                    &want,
                    1e-4,
                    &format!("{kind:?} second {second} param {k}"),
                );
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Learning

/// Echo the input two steps late: y_t = x_{t-2} (0 for t < 2), x in {-1, 1}. An LSTM and a
/// GRU must each cut the mean squared error to under a tenth of its start.
#[test]
fn a_delayed_copy_is_learnt() -> Result<()> {
    let (t, b, hd) = (8, 16, 12);
    let mut rng = Prng::new(6);
    for kind in [Kind::Lstm, Kind::Gru] {
        let net = Net::new(kind, 1, hd, 1, true, 21, DType::F32);
        let head = Linear::new(hd, 1, true, 22)?;
        let mut params = net.module().parameters();
        params.extend(head.parameters());
        let mut opt = Adam::new(params, 0.02)?;
        let mut losses = Vec::new();
        for _ in 0..150 {
            let xv: Vec<f64> = (0..t * b)
                .map(|_| if rng.chance(0.5) { 1.0 } else { -1.0 })
                .collect();
            let yv: Vec<f64> = (0..t * b)
                .map(|k| if k / b >= 2 { xv[k - 2 * b] } else { 0.0 })
                .collect();
            let x = tensor(xv, &[t, b, 1], DType::F32);
            let y = tensor(yv, &[t, b, 1], DType::F32);
            let (out, _, _) = net.run(&x, None, None)?;
            let pred = head.forward(&out)?;
            let loss = pred.sub(&y)?.square()?.mean(None, false)?;
            opt.zero_grad();
            loss.backward()?;
            opt.step()?;
            losses.push(loss.item()?);
        }
        let start: f64 = losses[..10].iter().sum::<f64>() / 10.0;
        let end: f64 = losses[losses.len() - 10..].iter().sum::<f64>() / 10.0;
        assert!(end < 0.1 * start, "{kind:?}: loss {start} -> {end}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Bad input

#[track_caller]
fn assert_err_mentions<T: std::fmt::Debug>(r: Result<T>, needles: &[&str]) {
    let msg = r.expect_err("expected an error").to_string();
    for n in needles {
        assert!(msg.contains(n), "error {msg:?} does not mention {n:?}");
    }
}

#[test]
fn bad_inputs_are_errors_naming_the_module_and_shapes() -> Result<()> {
    let lstm = LSTM::new(3, 4, 2, true, 0)?;
    let x = Tensor::zeros(&[5, 2, 3], DType::F32)?;
    let (h, c) = (
        Tensor::zeros(&[2, 2, 4], DType::F32)?,
        Tensor::zeros(&[2, 2, 4], DType::F32)?,
    );
    // Right shapes work.
    lstm.forward_with(&x, Some((&h, &c)))?;
    assert_err_mentions(
        lstm.forward(&Tensor::zeros(&[5, 3], DType::F32)?),
        &["LSTM", "[5, 3]"],
    );
    assert_err_mentions(
        lstm.forward(&Tensor::zeros(&[5, 2, 7], DType::F32)?),
        &["LSTM", "[5, 2, 7]", "input_size = 3"],
    );
    assert_err_mentions(
        lstm.forward(&Tensor::zeros(&[0, 2, 3], DType::F32)?),
        &["LSTM", "seq_len"],
    );
    let bad = Tensor::zeros(&[1, 2, 4], DType::F32)?;
    assert_err_mentions(
        lstm.forward_with(&x, Some((&bad, &c))),
        &["LSTM", "[1, 2, 4]", "[2, 2, 4]", "h0"],
    );
    assert_err_mentions(
        lstm.forward_with(&x, Some((&h, &bad))),
        &["LSTM", "[1, 2, 4]", "c0"],
    );
    let gru = GRU::new(3, 4, 1, false, 0)?;
    assert_err_mentions(
        gru.forward_with(&x, Some(&Tensor::zeros(&[1, 3, 4], DType::F32)?)),
        &["GRU", "[1, 3, 4]", "[1, 2, 4]"],
    );
    let rnn = RNN::new(3, 4, 1, true, Nonlinearity::Relu, 0)?;
    assert_err_mentions(
        rnn.forward(&Tensor::zeros(&[2, 2, 2, 3], DType::F32)?),
        &["RNN", "[2, 2, 2, 3]"],
    );
    let cell = LSTMCell::new(3, 4, true, 0)?;
    assert_err_mentions(cell.forward(&x), &["LSTMCell", "[5, 2, 3]"]);
    let h1 = Tensor::zeros(&[2, 5], DType::F32)?;
    let x2 = Tensor::zeros(&[2, 3], DType::F32)?;
    assert_err_mentions(
        cell.forward_with(&x2, Some((&h1, &h1))),
        &["LSTMCell", "[2, 5]", "[2, 4]"],
    );
    let gcell = GRUCell::new(3, 4, true, 0)?;
    assert_err_mentions(
        gcell.forward(&Tensor::zeros(&[2, 4], DType::F32)?),
        &["GRUCell", "[2, 4]"],
    );
    let rcell = RNNCell::new(3, 4, true, Nonlinearity::Tanh, 0)?;
    assert_err_mentions(rcell.forward_with(&x2, Some(&h1)), &["RNNCell", "[2, 5]"]);
    assert_err_mentions(
        LSTM::new(3, 4, 0, true, 0).map(|_| ()),
        &["LSTM", "num_layers"],
    );
    assert_err_mentions(GRU::new(3, 0, 1, true, 0).map(|_| ()), &["hidden_size"]);
    Ok(())
}
