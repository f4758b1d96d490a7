"""needle hw4's sequence modules (``nn_sequence.py`` and ``nn_transformer.py``) with needle's
names, constructor signatures, parameter names and layouts, plus GRU (PyTorch's formula).

Each module owns its ``Parameter``s (so ``parameters()`` and ``quill.optim`` see them); its
forward hands those tensors to quill's Rust layer (``quill._native``), which runs the whole
recurrence or attention block: a fused op per recurrent layer, the fused attention kernel
when no dropout is active. Nothing here is re-implemented op by op.

Layouts are needle's: ``W_ih`` (input_size, G*hidden), ``W_hh`` (hidden, G*hidden), biases
(G*hidden,), with G = 1 (RNN), 4 (LSTM: gates i, f, g, o) or 3 (GRU: r, z, n). ``W_ih`` is
the transpose of PyTorch's ``weight_ih``; the Rust side reads it through a transposed view.

Differences from needle: causal attention hides key ``j`` from query ``i`` when ``j > i``
(PyTorch's top-left alignment; needle aligns bottom-right, which differs only when the query
and key lengths differ), and dropout masks come from quill's generator, seeded from NumPy's
global RNG (``np.random.seed`` still reproduces a run).
"""
import math

import numpy as np

from . import _native, init
from .nn import Dropout, LayerNorm1d, Linear, Module, Parameter

__all__ = [
    "RNNCell", "RNN", "LSTMCell", "LSTM", "GRUCell", "GRU", "Embedding", "MultiHeadAttention",
    "AttentionLayer", "TransformerLayer", "Transformer",
]


def _uniform(shape, bound, device, dtype):
    return Parameter(init.rand(*shape, low=-bound, high=bound, device=device, dtype=dtype))


def _dropout_seed(p, training):
    """A fresh seed for quill's dropout masks when dropout is active (none drawn otherwise,
    so eval leaves NumPy's RNG untouched)."""
    if training and p > 0:
        return int(np.random.randint(0, 2**63 - 1, dtype=np.int64))
    return 0


class _Cell(Module):
    """Parameters of one recurrent cell (or one layer of a stack), PyTorch's init: every
    tensor uniform in +-1/sqrt(hidden_size)."""

    _gates = 1

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype="float32"):
        super().__init__()
        if input_size < 1 or hidden_size < 1:
            raise ValueError(
                f"{type(self).__name__}: input_size and hidden_size must be at least 1, got "
                f"{input_size} and {hidden_size}"
            )
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.device, self.dtype = device, dtype
        g, k = self._gates * hidden_size, 1.0 / math.sqrt(hidden_size)
        self.W_ih = _uniform((input_size, g), k, device, dtype)
        self.W_hh = _uniform((hidden_size, g), k, device, dtype)
        self.bias_ih = _uniform((g,), k, device, dtype) if bias else None
        self.bias_hh = _uniform((g,), k, device, dtype) if bias else None

    def _params(self):
        return (self.W_ih, self.W_hh, self.bias_ih, self.bias_hh)


def _nonlinearity(name):
    if name not in ("tanh", "relu"):
        raise ValueError(f"nonlinearity must be 'tanh' or 'relu', got {name!r}")
    return name


class RNNCell(_Cell):
    """``h' = act(X W_ih + bias_ih + h W_hh + bias_hh)``, act tanh or ReLU."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype="float32"):
        self.nonlinearity = _nonlinearity(nonlinearity)
        super().__init__(input_size, hidden_size, bias, device, dtype)

    def forward(self, X, h=None):
        """``X`` (bs, input_size), ``h`` (bs, hidden_size) or None for zeros -> (bs, hidden)."""
        return _native.recurrent_cell("rnn_" + self.nonlinearity, X, self._params(), h)[0]


class LSTMCell(_Cell):
    """PyTorch's LSTM step: gates i, f, g, o from ``X W_ih + bias_ih + h W_hh + bias_hh``,
    ``c' = sigmoid(f) c + sigmoid(i) tanh(g)``, ``h' = sigmoid(o) tanh(c')``."""

    _gates = 4

    def forward(self, X, h=None):
        """``X`` (bs, input_size), ``h`` = ``(h0, c0)`` (bs, hidden each) or None for zeros;
        returns ``(h', c')``."""
        h0, c0 = (None, None) if h is None else h
        return _native.recurrent_cell("lstm", X, self._params(), h0, c0)


class GRUCell(_Cell):
    """PyTorch's GRU step (gates r, z, n): ``n = tanh(x_n + r * (h W_hn + b_hn))``,
    ``h' = (1 - z) n + z h``."""

    _gates = 3

    def forward(self, X, h=None):
        """``X`` (bs, input_size), ``h`` (bs, hidden_size) or None -> (bs, hidden_size)."""
        return _native.recurrent_cell("gru", X, self._params(), h)[0]


class _Stack(Module):
    """``num_layers`` cells; layer k > 0 reads layer k - 1's hidden sequence."""

    def _make(self, cell, input_size, hidden_size, num_layers, bias, device, dtype, **kw):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"{type(self).__name__}: num_layers must be at least 1, got {num_layers}")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.device, self.dtype = bias, device, dtype
        return [
            cell(input_size if k == 0 else hidden_size, hidden_size, bias=bias, device=device,
                 dtype=dtype, **kw)
            for k in range(num_layers)
        ]


class RNN(_Stack):
    """needle's multi-layer Elman RNN over ``X`` (seq_len, bs, input_size); ``rnn_cells`` holds
    the layers."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, nonlinearity="tanh",
                 device=None, dtype="float32"):
        self.nonlinearity = _nonlinearity(nonlinearity)
        self.rnn_cells = self._make(RNNCell, input_size, hidden_size, num_layers, bias, device,
                                    dtype, nonlinearity=nonlinearity)

    def forward(self, X, h0=None):
        """``X`` (seq_len, bs, input_size), ``h0`` (num_layers, bs, hidden) or None; returns
        ``(output (seq_len, bs, hidden), h_n (num_layers, bs, hidden))``."""
        layers = [c._params() for c in self.rnn_cells]
        out, h_n, _ = _native.recurrent("rnn_" + self.nonlinearity, X, layers, h0)
        return out, h_n


class LSTM(_Stack):
    """needle's multi-layer LSTM; ``lstm_cells`` holds the layers."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, device=None,
                 dtype="float32"):
        self.lstm_cells = self._make(LSTMCell, input_size, hidden_size, num_layers, bias, device,
                                     dtype)

    def forward(self, X, h=None):
        """``X`` (seq_len, bs, input_size), ``h`` = ``(h0, c0)`` (num_layers, bs, hidden each)
        or None; returns ``(output, (h_n, c_n))``."""
        h0, c0 = (None, None) if h is None else h
        layers = [c._params() for c in self.lstm_cells]
        out, h_n, c_n = _native.recurrent("lstm", X, layers, h0, c0)
        return out, (h_n, c_n)


class GRU(_Stack):
    """A multi-layer GRU (PyTorch's formula) in needle's style; ``gru_cells`` holds the
    layers."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, device=None,
                 dtype="float32"):
        self.gru_cells = self._make(GRUCell, input_size, hidden_size, num_layers, bias, device,
                                    dtype)

    def forward(self, X, h0=None):
        """``X`` (seq_len, bs, input_size), ``h0`` (num_layers, bs, hidden) or None; returns
        ``(output, h_n)``."""
        layers = [c._params() for c in self.gru_cells]
        out, h_n, _ = _native.recurrent("gru", X, layers, h0)
        return out, h_n


class Embedding(Module):
    """A lookup table ``weight`` (num_embeddings, embedding_dim), rows drawn from N(0, 1)."""

    def __init__(self, num_embeddings, embedding_dim, device=None, dtype="float32"):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.device, self.dtype = device, dtype
        self.weight = Parameter(init.randn(num_embeddings, embedding_dim, device=device,
                                           dtype=dtype))

    def forward(self, x):
        """``x`` holds ids (seq_len, bs) (a float or integer Tensor, an array): returns
        (seq_len, bs, embedding_dim). Ids outside the table raise IndexError."""
        return _native.embedding(self.weight, x)


def _norm(n):
    return (n.weight, n.bias, float(n.eps))


def _check_heads(name, *xs):
    for x, what in zip(xs, "qkv"):
        if len(x.shape) != 4:
            raise ValueError(
                f"{name}: {what} must be (batch, num_head, seq_len, dim_head), got shape {x.shape}"
            )


class MultiHeadAttention(Module):
    """Attention over already split heads: ``softmax(q k^T / sqrt(dim) + mask) v``, dropout on
    the probabilities."""

    def __init__(self, *, dropout=0.0, causal=False, device=None, dtype="float32"):
        super().__init__()
        self.device, self.dtype, self.causal = device, dtype, causal
        self.dropout = Dropout(dropout)

    def forward(self, q, k, v, need_weights=True):
        """q (batch, heads, Lq, dim), k and v (batch, heads, Lk, dim): returns ``(result
        (batch, heads, Lq, dim), probs (batch, heads, Lq, Lk))``. Without active dropout the
        result comes from the fused kernel (no probabilities stored for its backward) and
        ``probs`` is computed beside it only when ``need_weights`` (else None); with dropout,
        ``probs`` are the probabilities before dropout."""
        _check_heads("MultiHeadAttention", q, k, v)
        if q.shape[-1] != k.shape[-1] or k.shape[-1] != v.shape[-1]:
            raise ValueError(
                f"MultiHeadAttention: q, k, v need one dim_head, got shapes {q.shape}, {k.shape},"
                f" {v.shape}"
            )
        p = self.dropout.p
        if self.training and p > 0:
            return _native.multi_head_attention(q, k, v, p, self.causal,
                                                _dropout_seed(p, True))
        result = _native.scaled_dot_product_attention(q, k, v, self.causal)
        probs = _native.attention_probs(q, k, self.causal) if need_weights else None
        return result, probs


class AttentionLayer(Module):
    """needle's AttentionLayer: q, k, v (batch, seq, features) each pass a LayerNorm1d and a
    bias-free projection to ``num_head * dim_head``, then MultiHeadAttention and a bias-free
    out projection to ``out_features``."""

    def __init__(self, q_features, num_head, dim_head, *, k_features=None, v_features=None,
                 out_features=None, dropout=0.0, causal=True, device=None, dtype="float32"):
        super().__init__()
        self.device, self.dtype = device, dtype
        k_features = q_features if k_features is None else k_features
        v_features = q_features if v_features is None else v_features
        out_features = q_features if out_features is None else out_features
        self.q_features, self.k_features = q_features, k_features
        self.v_features, self.out_features = v_features, out_features
        self.num_head, self.dim_head = num_head, dim_head
        kw = dict(device=device, dtype=dtype)
        self.prenorm_q = LayerNorm1d(q_features, **kw)
        self.prenorm_k = LayerNorm1d(k_features, **kw)
        self.prenorm_v = LayerNorm1d(v_features, **kw)
        inner = num_head * dim_head
        self.q_projection = Linear(q_features, inner, bias=False, **kw)
        self.k_projection = Linear(k_features, inner, bias=False, **kw)
        self.v_projection = Linear(v_features, inner, bias=False, **kw)
        self.attn = MultiHeadAttention(dropout=dropout, causal=causal, **kw)
        self.out_projection = Linear(inner, out_features, bias=False, **kw)

    def _params(self):
        norms = (_norm(self.prenorm_q), _norm(self.prenorm_k), _norm(self.prenorm_v))
        return (norms, self.q_projection.weight, self.k_projection.weight,
                self.v_projection.weight, self.out_projection.weight)

    def forward(self, q, k=None, v=None):
        """``q`` (batch, Lq, q_features); ``k``, ``v`` (batch, Lk, ...) default to ``q``;
        returns (batch, Lq, out_features)."""
        k = q if k is None else k
        v = q if v is None else v
        p = self.attn.dropout.p
        training = self.attn.training
        return _native.attention_layer(q, k, v, self._params(), self.num_head, self.dim_head,
                                       p, self.attn.causal, training,
                                       _dropout_seed(p, training))


class TransformerLayer(Module):
    """needle's pre-norm Transformer block on (batch, seq, q_features):
    ``x = x + dropout(attn(x))``, then
    ``x = x + dropout(linear2(dropout(relu(linear1(layernorm1d(x))))))``."""

    def __init__(self, q_features, num_head, dim_head, hidden_size, *, dropout=0.0, causal=True,
                 device=None, dtype="float32"):
        super().__init__()
        self.device, self.dtype = device, dtype
        self.q_features, self.num_head, self.dim_head = q_features, num_head, dim_head
        self.hidden_size, self.causal = hidden_size, causal
        kw = dict(device=device, dtype=dtype)
        self.attn = AttentionLayer(q_features, num_head, dim_head, dropout=dropout,
                                   causal=causal, **kw)
        self.layernorm1d = LayerNorm1d(q_features, **kw)
        self.linear1 = Linear(q_features, hidden_size, **kw)
        self.linear2 = Linear(hidden_size, q_features, **kw)
        self.dropout = Dropout(dropout)

    def _params(self):
        return (self.attn._params(), (self.linear1.weight, self.linear1.bias),
                (self.linear2.weight, self.linear2.bias), _norm(self.layernorm1d))

    def forward(self, x):
        """``x`` (batch, seq, q_features) -> the same shape."""
        p = self.dropout.p
        return _native.transformer_layer(x, self._params(), self.num_head, self.dim_head, p,
                                         self.causal, self.training,
                                         _dropout_seed(p, self.training))


class Transformer(Module):
    """needle's Transformer: a learned positional embedding (``pos_embedding``, one row per
    position up to ``sequence_len``) added to the input, then ``num_layers`` TransformerLayers
    (``layers``). Input and output (seq_len, bs, embedding_size), or (bs, seq_len, ...) when
    ``batch_first``."""

    def __init__(self, embedding_size, hidden_size, num_layers, *, num_head=8, dim_head=32,
                 dropout=0.0, causal=True, device=None, dtype="float32", batch_first=False,
                 sequence_len=2048):
        super().__init__()
        self.device, self.dtype, self.batch_first = device, dtype, batch_first
        self.embedding_size, self.hidden_size, self.num_layers = (
            embedding_size, hidden_size, num_layers)
        self.num_head, self.dim_head, self.causal = num_head, dim_head, causal
        self.sequence_len, self.dropout_p = sequence_len, dropout
        self.pos_embedding = Embedding(sequence_len, embedding_size, device=device, dtype=dtype)
        self.layers = [
            TransformerLayer(embedding_size, num_head, dim_head, hidden_size, dropout=dropout,
                             causal=causal, device=device, dtype=dtype)
            for _ in range(num_layers)
        ]

    def forward(self, x, h=None):
        """Returns ``(output, zeros like output)``: needle's signature, so a LanguageModel can
        treat it like a recurrent model (``h`` is ignored)."""
        p = self.dropout_p
        y = _native.transformer(x, self.pos_embedding.weight, [l._params() for l in self.layers],
                                self.num_head, self.dim_head, p, self.causal, self.batch_first,
                                self.training, _dropout_seed(p, self.training))
        return y, init.zeros_like(y, device=y.device)
