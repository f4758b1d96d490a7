//! The sequence-model functions behind `quill.nn`'s RNN / LSTM / GRU (cells and stacks),
//! Embedding, MultiHeadAttention, AttentionLayer, TransformerLayer, Transformer and
//! BatchNorm2d. The Python modules own their parameters (needle's names and layouts); each
//! call assembles quill's Rust layer around those very tensors (views, never copies, so
//! gradients land in the Python `Parameter`s and optimizer updates are seen by the next call)
//! and runs its forward. Parameter shapes are checked here so that a bad one is a ValueError
//! naming it, not a failure deep inside a kernel.

use crate::convert::{from_numpy_like, Q};
use crate::ndarray::PyNDArray;
use crate::tensor::PyTensor;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use quill::nn::{
    AttentionLayer, BatchNorm, Dropout, Embedding, LayerNorm, Linear, Module, MultiHeadAttention,
    Nonlinearity, RecurrentParams, Transformer, TransformerLayer, GRU, LSTM, RNN,
};
use quill::tensor::Tensor;
use quill::{DType, NDArray};

type T<'py> = PyRef<'py, PyTensor>;

fn wrap(t: Tensor) -> PyTensor {
    PyTensor::wrap(t)
}

fn opt(t: &Option<T<'_>>) -> Option<Tensor> {
    t.as_ref().map(|t| t.inner.clone())
}

/// One recurrent layer's parameters in needle's layout: `W_ih` (I, G*H), `W_hh` (H, G*H),
/// `bias_ih`, `bias_hh` (G*H) or None.
type LayerArgs<'py> = (T<'py>, T<'py>, Option<T<'py>>, Option<T<'py>>);

/// A recurrence by its Python name.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Rnn(Nonlinearity),
    Lstm,
    Gru,
}

impl Kind {
    fn parse(name: &str) -> PyResult<Kind> {
        match name {
            "rnn_tanh" | "tanh" => Ok(Kind::Rnn(Nonlinearity::Tanh)),
            "rnn_relu" | "relu" => Ok(Kind::Rnn(Nonlinearity::Relu)),
            "lstm" => Ok(Kind::Lstm),
            "gru" => Ok(Kind::Gru),
            _ => Err(PyValueError::new_err(format!(
                "unknown recurrence '{name}': expected rnn_tanh, rnn_relu, lstm or gru"
            ))),
        }
    }
    fn gates(self) -> usize {
        match self {
            Kind::Rnn(_) => 1,
            Kind::Lstm => 4,
            Kind::Gru => 3,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Kind::Rnn(_) => "RNN",
            Kind::Lstm => "LSTM",
            Kind::Gru => "GRU",
        }
    }
}

/// Quill's `RecurrentParams` over needle-layout tensors: `weight_ih = W_ih^T` (a transposed
/// view, so the input projection's `x weight_ih^T` is a plain matmul by `W_ih`). `input` is
/// the input size this layer must read (None: whatever `W_ih` says). Returns the params and
/// the hidden size.
fn layer_params(
    kind: Kind,
    k: usize,
    input: Option<usize>,
    (w_ih, w_hh, b_ih, b_hh): &LayerArgs<'_>,
) -> PyResult<(RecurrentParams, usize)> {
    let bad = |what: String| {
        PyValueError::new_err(format!(
            "{}: layer {k}: {what} (needle's layout: W_ih (input_size, {g}*hidden_size), W_hh \
             (hidden_size, {g}*hidden_size), biases ({g}*hidden_size,))",
            kind.name(),
            g = kind.gates()
        ))
    };
    let (si, sh) = (w_ih.inner.shape(), w_hh.inner.shape());
    if si.len() != 2 || sh.len() != 2 || sh[0] == 0 || sh[1] != kind.gates() * sh[0] {
        return Err(bad(format!("W_ih has shape {si:?} and W_hh {sh:?}")));
    }
    let (hidden, gh) = (sh[0], sh[1]);
    if si[1] != gh {
        return Err(bad(format!(
            "W_ih has shape {si:?} but W_hh {sh:?} says {gh} gate columns"
        )));
    }
    if let Some(i) = input {
        if si[0] != i {
            return Err(bad(format!(
                "W_ih has shape {si:?} but the layer reads {i} features"
            )));
        }
    }
    for (b, name) in [(b_ih, "bias_ih"), (b_hh, "bias_hh")] {
        if let Some(b) = b {
            if b.inner.shape() != [gh] {
                return Err(bad(format!(
                    "{name} has shape {:?}, expected ({gh},)",
                    b.inner.shape()
                )));
            }
        }
    }
    let p = RecurrentParams {
        weight_ih: w_ih.inner.mt().q()?,
        weight_hh: w_hh.inner.mt().q()?,
        bias_ih: opt(b_ih),
        bias_hh: opt(b_hh),
    };
    Ok((p, hidden))
}

/// A stack of recurrent layers over `x` (seq_len, batch, input_size) from `h0` (and, for
/// LSTM, `c0`), each (num_layers, batch, hidden) or None for zeros: returns the last layer's
/// hidden sequence (seq_len, batch, hidden), `h_n` and, for LSTM, `c_n`. Runs quill's fused
/// recurrent layers (one graph node per layer).
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (kind, x, layers, h0 = None, c0 = None))]
pub fn recurrent(
    kind: &str,
    x: T<'_>,
    layers: Vec<LayerArgs<'_>>,
    h0: Option<T<'_>>,
    c0: Option<T<'_>>,
) -> PyResult<(PyTensor, PyTensor, Option<PyTensor>)> {
    let kind = Kind::parse(kind)?;
    if layers.is_empty() {
        return Err(PyValueError::new_err(format!(
            "{}: needs at least one layer",
            kind.name()
        )));
    }
    let mut params = Vec::with_capacity(layers.len());
    let mut input = None;
    for (k, l) in layers.iter().enumerate() {
        let (p, hidden) = layer_params(kind, k, input, l)?;
        params.push(p);
        input = Some(hidden);
    }
    let (x, h0, c0) = (&x.inner, opt(&h0), opt(&c0));
    match kind {
        Kind::Rnn(nonlinearity) => {
            let m = RNN {
                layers: params,
                nonlinearity,
                fused: true,
            };
            let (out, h) = m.forward_with(x, h0.as_ref()).q()?;
            Ok((wrap(out), wrap(h), None))
        }
        Kind::Gru => {
            let m = GRU {
                layers: params,
                fused: true,
            };
            let (out, h) = m.forward_with(x, h0.as_ref()).q()?;
            Ok((wrap(out), wrap(h), None))
        }
        Kind::Lstm => {
            let state = match (&h0, &c0) {
                (Some(h), Some(c)) => Some((h, c)),
                (None, None) => None,
                _ => {
                    return Err(PyValueError::new_err(
                        "LSTM: give both h0 and c0, or neither",
                    ))
                }
            };
            let m = LSTM {
                layers: params,
                fused: true,
            };
            let (out, (h, c)) = m.forward_with(x, state).q()?;
            Ok((wrap(out), wrap(h), Some(wrap(c))))
        }
    }
}

/// One step of a cell: `x` (batch, input_size), `h` (and for LSTM `c`) (batch, hidden) or
/// None for zeros; returns the next `h` and, for LSTM, the next `c`.
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (kind, x, params, h = None, c = None))]
pub fn recurrent_cell(
    kind: &str,
    x: T<'_>,
    params: LayerArgs<'_>,
    h: Option<T<'_>>,
    c: Option<T<'_>>,
) -> PyResult<(PyTensor, Option<PyTensor>)> {
    let kind = Kind::parse(kind)?;
    let (params, _) = layer_params(kind, 0, None, &params)?;
    let (x, h, c) = (&x.inner, opt(&h), opt(&c));
    match kind {
        Kind::Rnn(nonlinearity) => {
            let m = quill::nn::RNNCell {
                params,
                nonlinearity,
                fused: true,
            };
            Ok((wrap(m.forward_with(x, h.as_ref()).q()?), None))
        }
        Kind::Gru => {
            let m = quill::nn::GRUCell {
                params,
                fused: true,
            };
            Ok((wrap(m.forward_with(x, h.as_ref()).q()?), None))
        }
        Kind::Lstm => {
            let state = match (&h, &c) {
                (Some(h), Some(c)) => Some((h, c)),
                (None, None) => None,
                _ => {
                    return Err(PyValueError::new_err(
                        "LSTMCell: give both h and c, or neither",
                    ))
                }
            };
            let m = quill::nn::LSTMCell {
                params,
                fused: true,
            };
            let (h2, c2) = m.forward_with(x, state).q()?;
            Ok((wrap(h2), Some(wrap(c2))))
        }
    }
}

/// Integer ids from a Tensor (needle hands ids over as float tensors), an NDArray or anything
/// NumPy takes; floats must hold whole numbers.
fn ids_of(ids: &Bound<'_, PyAny>) -> PyResult<NDArray> {
    let a = if let Ok(t) = ids.extract::<T<'_>>() {
        t.inner.array().clone()
    } else if let Ok(a) = ids.extract::<PyRef<'_, PyNDArray>>() {
        a.inner.clone()
    } else {
        from_numpy_like(ids, None)?
    };
    if a.dtype().is_int() {
        return Ok(a);
    }
    let ints = a.astype(DType::I64).q()?;
    let exact = ints
        .astype(a.dtype())
        .q()?
        .eq(&a)
        .q()?
        .all(None, false)
        .q()?;
    if !exact.item::<bool>().q()? {
        return Err(PyValueError::new_err(format!(
            "Embedding: ids of dtype {:?} must hold whole numbers",
            a.dtype()
        )));
    }
    Ok(ints)
}

/// The rows of `weight` (num_embeddings, dim) at `ids` (any shape): shape `ids.shape + (dim,)`.
#[quill_py_guard::guard]
#[pyfunction]
pub fn embedding(weight: T<'_>, ids: &Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let w = &weight.inner;
    if w.ndim() != 2 {
        return Err(PyValueError::new_err(format!(
            "Embedding: weight must be (num_embeddings, embedding_dim), got shape {:?}",
            w.shape()
        )));
    }
    let ids = ids_of(ids)?.to_device(w.device()).q()?;
    let e = Embedding { weight: w.clone() };
    Ok(wrap(e.lookup(&ids).q()?))
}

/// Fused `softmax(scale * q k^T + causal mask) v` for q (..., Lq, D), k (..., Lk, D),
/// v (..., Lk, Dv): the probabilities are never stored; `scale` defaults to 1/sqrt(D).
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (q, k, v, causal = false, scale = None))]
pub fn scaled_dot_product_attention(
    q: T<'_>,
    k: T<'_>,
    v: T<'_>,
    causal: bool,
    scale: Option<f64>,
) -> PyResult<PyTensor> {
    Ok(wrap(
        q.inner
            .scaled_dot_product_attention(&k.inner, &v.inner, causal, scale)
            .q()?,
    ))
}

/// The attention probabilities `softmax(scale * q k^T + causal mask)` (..., Lq, Lk), from
/// differentiable primitives.
#[quill_py_guard::guard]
#[pyfunction]
#[pyo3(signature = (q, k, causal = false, scale = None))]
pub fn attention_probs(q: T<'_>, k: T<'_>, causal: bool, scale: Option<f64>) -> PyResult<PyTensor> {
    Ok(wrap(q.inner.attention_probs(&k.inner, causal, scale).q()?))
}

/// quill's `MultiHeadAttention` with dropout `p` (its masks seeded by `seed`) in training
/// mode: `(output, probabilities before dropout)`, or no probabilities when `p` is 0 (the
/// fused kernel).
#[quill_py_guard::guard]
#[pyfunction]
pub fn multi_head_attention(
    q: T<'_>,
    k: T<'_>,
    v: T<'_>,
    p: f64,
    causal: bool,
    seed: u64,
) -> PyResult<(PyTensor, Option<PyTensor>)> {
    let m = MultiHeadAttention::new(p, causal, seed).q()?;
    let (o, probs) = m.attend(&q.inner, &k.inner, &v.inner).q()?;
    Ok((wrap(o), probs.map(wrap)))
}

/// A LayerNorm's `(weight, bias, eps)`.
type NormArgs<'py> = (T<'py>, T<'py>, f64);
/// A Linear's `(weight (in, out), bias or None)`.
type LinearArgs<'py> = (T<'py>, Option<T<'py>>);
/// An AttentionLayer's `(prenorm (q, k, v) or None, q, k, v and out projection weights)`.
type AttnArgs<'py> = (
    Option<(NormArgs<'py>, NormArgs<'py>, NormArgs<'py>)>,
    T<'py>,
    T<'py>,
    T<'py>,
    T<'py>,
);
/// A TransformerLayer's `(attention, linear_in, linear_out, norm)`.
type LayerNormedArgs<'py> = (
    AttnArgs<'py>,
    LinearArgs<'py>,
    LinearArgs<'py>,
    NormArgs<'py>,
);

fn norm((w, b, eps): &NormArgs<'_>) -> LayerNorm {
    LayerNorm {
        weight: w.inner.clone(),
        bias: b.inner.clone(),
        eps: *eps,
    }
}

fn linear(w: &T<'_>, b: Option<&T<'_>>) -> PyResult<Linear> {
    if w.inner.ndim() != 2 {
        return Err(PyValueError::new_err(format!(
            "Linear: weight must be (in_features, out_features), got shape {:?}",
            w.inner.shape()
        )));
    }
    Ok(Linear {
        weight: w.inner.clone(),
        bias: b.map(|b| b.inner.clone()),
    })
}

/// How an attention block runs: heads, dropout and its seed, masking, mode.
#[derive(Clone, Copy)]
struct AttnConfig {
    num_head: usize,
    dim_head: usize,
    dropout: f64,
    causal: bool,
    training: bool,
    seed: u64,
}

fn attention_layer_of(p: &AttnArgs<'_>, c: AttnConfig) -> PyResult<AttentionLayer> {
    let (prenorm, wq, wk, wv, wo) = p;
    let inner = c.num_head * c.dim_head;
    for (w, name, col) in [
        (wq, "q_projection", 1),
        (wk, "k_projection", 1),
        (wv, "v_projection", 1),
        (wo, "out_projection", 0),
    ] {
        let s = w.inner.shape();
        if s.len() != 2 || s[col] != inner {
            return Err(PyValueError::new_err(format!(
                "AttentionLayer: {name}.weight has shape {s:?}, but num_head * dim_head = {inner} \
                 must be its {} dim",
                if col == 1 { "output" } else { "input" }
            )));
        }
    }
    let attn = MultiHeadAttention::new(c.dropout, c.causal, c.seed).q()?;
    attn.set_training(c.training);
    Ok(AttentionLayer {
        prenorm: prenorm
            .as_ref()
            .map(|(a, b, d)| [norm(a), norm(b), norm(d)]),
        q_projection: linear(wq, None)?,
        k_projection: linear(wk, None)?,
        v_projection: linear(wv, None)?,
        out_projection: linear(wo, None)?,
        attn,
        num_head: c.num_head,
        dim_head: c.dim_head,
    })
}

fn transformer_layer_of(p: &LayerNormedArgs<'_>, c: AttnConfig) -> PyResult<TransformerLayer> {
    let (attn, (w_in, b_in), (w_out, b_out), n1) = p;
    let dropout = Dropout::new(c.dropout, c.seed ^ 0x5EED_D40F).q()?;
    dropout.set_training(c.training);
    Ok(TransformerLayer {
        attn: attention_layer_of(attn, c)?,
        linear_in: linear(w_in, b_in.as_ref())?,
        linear_out: linear(w_out, b_out.as_ref())?,
        norm1: norm(n1),
        norm2: None,
        dropout,
    })
}

/// needle's AttentionLayer forward: `q` (B, Lq, Fq), `k` (B, Lk, Fk), `v` (B, Lk, Fv) ->
/// (B, Lq, out_features).
#[quill_py_guard::guard]
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn attention_layer(
    q: T<'_>,
    k: T<'_>,
    v: T<'_>,
    params: AttnArgs<'_>,
    num_head: usize,
    dim_head: usize,
    dropout: f64,
    causal: bool,
    training: bool,
    seed: u64,
) -> PyResult<PyTensor> {
    let c = AttnConfig {
        num_head,
        dim_head,
        dropout,
        causal,
        training,
        seed,
    };
    let m = attention_layer_of(&params, c)?;
    Ok(wrap(m.attend(&q.inner, &k.inner, &v.inner).q()?))
}

/// needle's (pre-norm) TransformerLayer forward on `x` (B, L, F).
#[quill_py_guard::guard]
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn transformer_layer(
    x: T<'_>,
    params: LayerNormedArgs<'_>,
    num_head: usize,
    dim_head: usize,
    dropout: f64,
    causal: bool,
    training: bool,
    seed: u64,
) -> PyResult<PyTensor> {
    let c = AttnConfig {
        num_head,
        dim_head,
        dropout,
        causal,
        training,
        seed,
    };
    let m = transformer_layer_of(&params, c)?;
    Ok(wrap(m.forward(&x.inner).q()?))
}

/// needle's Transformer forward: `x` (L, B, E) (or (B, L, E) when `batch_first`) plus the
/// learned positional embedding `pos_weight` (sequence_len, E), then the layers.
#[quill_py_guard::guard]
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn transformer(
    x: T<'_>,
    pos_weight: T<'_>,
    layers: Vec<LayerNormedArgs<'_>>,
    num_head: usize,
    dim_head: usize,
    dropout: f64,
    causal: bool,
    batch_first: bool,
    training: bool,
    seed: u64,
) -> PyResult<PyTensor> {
    if pos_weight.inner.ndim() != 2 {
        return Err(PyValueError::new_err(format!(
            "Transformer: the positional embedding must be (sequence_len, embedding_size), got \
             shape {:?}",
            pos_weight.inner.shape()
        )));
    }
    let layers = layers
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let c = AttnConfig {
                num_head,
                dim_head,
                dropout,
                causal,
                training,
                // Each layer draws its own dropout masks.
                seed: seed.wrapping_add((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            };
            transformer_layer_of(p, c)
        })
        .collect::<PyResult<Vec<_>>>()?;
    let m = Transformer {
        pos_embedding: Embedding {
            weight: pos_weight.inner.clone(),
        },
        layers,
        batch_first,
    };
    Ok(wrap(m.forward(&x.inner).q()?))
}

/// Batch normalisation of NCHW (or NC) `x` over every dim but the channels (quill's fused
/// op): batch statistics in training, where `running_mean` / `running_var` are updated in place
/// (`(1 - momentum) * running + momentum * batch`, the variance unbiased as PyTorch, or biased
/// as needle's BatchNorm1d with `unbiased=False`), and the running statistics in eval; `relu`
/// applies a ReLU to the result (fused in training).
#[quill_py_guard::guard]
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (x, weight, bias, running_mean, running_var, eps, momentum, training, unbiased = true, relu = false))]
pub fn batch_norm2d(
    x: T<'_>,
    weight: T<'_>,
    bias: T<'_>,
    running_mean: T<'_>,
    running_var: T<'_>,
    eps: f64,
    momentum: f64,
    training: bool,
    unbiased: bool,
    relu: bool,
) -> PyResult<PyTensor> {
    let c = weight.inner.shape().first().copied().unwrap_or(0);
    for (t, name) in [
        (&weight, "weight"),
        (&bias, "bias"),
        (&running_mean, "running_mean"),
        (&running_var, "running_var"),
    ] {
        if t.inner.shape() != [c] {
            return Err(PyValueError::new_err(format!(
                "BatchNorm2d: {name} has shape {:?}, expected ({c},)",
                t.inner.shape()
            )));
        }
    }
    let mut bn = if x.inner.ndim() == 2 {
        BatchNorm::new_1d(c).q()?
    } else {
        BatchNorm::new_2d(c).q()?
    };
    bn.unbiased_running_var = unbiased;
    // NumPy's promotion, as needle's NumPy-backed ops: float64 data with float32 parameters
    // computes in float64 (the casts are differentiable; running statistics keep their dtype).
    use crate::tensor::{common_dtype, to_dtype};
    let d = common_dtype(&[&x.inner, &weight.inner, &bias.inner])?;
    bn.weight = to_dtype(&weight.inner, d)?;
    bn.bias = to_dtype(&bias.inner, d)?;
    let x_in = to_dtype(&x.inner, d)?;
    bn.running_mean = running_mean.inner.clone();
    bn.running_var = running_var.inner.clone();
    bn.eps = eps;
    bn.momentum = momentum;
    bn.set_training(training);
    // `relu`: ReLU fused into the normalisation (one pass, one graph node) in training; in
    // eval the two run one after the other.
    if relu {
        if let Some(y) = bn.forward_relu(&x_in) {
            return Ok(wrap(y.q()?));
        }
        return Ok(wrap(bn.forward(&x_in).q()?.relu().q()?));
    }
    Ok(wrap(bn.forward(&x_in).q()?))
}

/// Registers this file's functions on the extension module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(recurrent, m)?)?;
    m.add_function(wrap_pyfunction!(recurrent_cell, m)?)?;
    m.add_function(wrap_pyfunction!(embedding, m)?)?;
    m.add_function(wrap_pyfunction!(scaled_dot_product_attention, m)?)?;
    m.add_function(wrap_pyfunction!(attention_probs, m)?)?;
    m.add_function(wrap_pyfunction!(multi_head_attention, m)?)?;
    m.add_function(wrap_pyfunction!(attention_layer, m)?)?;
    m.add_function(wrap_pyfunction!(transformer_layer, m)?)?;
    m.add_function(wrap_pyfunction!(transformer, m)?)?;
    m.add_function(wrap_pyfunction!(batch_norm2d, m)?)?;
    Ok(())
}
