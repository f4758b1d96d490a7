"""quill.nn's sequence and Transformer modules and quill.models against NumPy references
written here from the formulas (per step, per layer, per head), using each module's own
parameter values. Gradients are checked against central differences of those NumPy references
in float64, so the reference for every gradient is independent of quill's backward."""
import math

import numpy as np
import pytest

import quill as ndl
import quill.nn as nn
from quill.models import LanguageModel, ResNet9


# ----------------------------------------------------------------------------- references
def sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def cell_ref(kind, x, h, c, W_ih, W_hh, b_ih, b_hh):
    """One step in needle's layout: W_ih (I, G*H), W_hh (H, G*H)."""
    H = W_hh.shape[0]
    gx = x @ W_ih + (0 if b_ih is None else b_ih)
    gh = h @ W_hh + (0 if b_hh is None else b_hh)
    if kind in ("tanh", "relu"):
        a = gx + gh
        return (np.tanh(a) if kind == "tanh" else np.maximum(a, 0)), None
    if kind == "lstm":
        a = gx + gh
        i, f, g, o = (a[:, k * H:(k + 1) * H] for k in range(4))
        c2 = sig(f) * c + sig(i) * np.tanh(g)
        return sig(o) * np.tanh(c2), c2
    r = sig(gx[:, :H] + gh[:, :H])
    z = sig(gx[:, H:2 * H] + gh[:, H:2 * H])
    n = np.tanh(gx[:, 2 * H:] + r * gh[:, 2 * H:])
    return (1 - z) * n + z * h, None


def stack_ref(kind, X, layers, h0=None, c0=None):
    """layers: list of (W_ih, W_hh, b_ih, b_hh); returns output, h_n, c_n."""
    T, B, _ = X.shape
    H = layers[0][1].shape[0]
    seq = X
    hn, cn = [], []
    for k, p in enumerate(layers):
        h = np.zeros((B, H)) if h0 is None else h0[k]
        c = np.zeros((B, H)) if c0 is None else c0[k]
        outs = []
        for t in range(T):
            h, c2 = cell_ref(kind, seq[t], h, c, *p)
            c = c2 if c2 is not None else c
            outs.append(h)
        seq = np.stack(outs)
        hn.append(h)
        cn.append(c)
    return seq, np.stack(hn), np.stack(cn)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def attention_ref(q, k, v, causal):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        lq, lk = s.shape[-2:]
        s = np.where(np.arange(lk)[None, :] <= np.arange(lq)[:, None], s, -np.inf)
    p = softmax(s)
    return p @ v, p


def layernorm_ref(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    var = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(var + eps) * w + b


def attn_layer_ref(q, k, v, P, num_head, dim_head, causal):
    """P: dict of the AttentionLayer's parameter values."""
    def heads(x):
        b, l, _ = x.shape
        return x.reshape(b, l, num_head, dim_head).transpose(0, 2, 1, 3)

    qn = layernorm_ref(q, P["nq_w"], P["nq_b"], 1e-5)
    kn = layernorm_ref(k, P["nk_w"], P["nk_b"], 1e-5)
    vn = layernorm_ref(v, P["nv_w"], P["nv_b"], 1e-5)
    o, _ = attention_ref(heads(qn @ P["wq"]), heads(kn @ P["wk"]), heads(vn @ P["wv"]), causal)
    b, l = q.shape[:2]
    return o.transpose(0, 2, 1, 3).reshape(b, l, num_head * dim_head) @ P["wo"]


def attn_params(layer):
    return {
        "nq_w": layer.prenorm_q.weight, "nq_b": layer.prenorm_q.bias,
        "nk_w": layer.prenorm_k.weight, "nk_b": layer.prenorm_k.bias,
        "nv_w": layer.prenorm_v.weight, "nv_b": layer.prenorm_v.bias,
        "wq": layer.q_projection.weight, "wk": layer.k_projection.weight,
        "wv": layer.v_projection.weight, "wo": layer.out_projection.weight,
    }


def tlayer_params(layer):
    d = {"attn." + k: v for k, v in attn_params(layer.attn).items()}
    d.update({
        "ln_w": layer.layernorm1d.weight, "ln_b": layer.layernorm1d.bias,
        "l1_w": layer.linear1.weight, "l1_b": layer.linear1.bias,
        "l2_w": layer.linear2.weight, "l2_b": layer.linear2.bias,
    })
    return d


def tlayer_ref(x, P, num_head, dim_head, causal):
    A = {k[5:]: v for k, v in P.items() if k.startswith("attn.")}
    x = x + attn_layer_ref(x, x, x, A, num_head, dim_head, causal)
    y = layernorm_ref(x, P["ln_w"], P["ln_b"], 1e-5)
    y = np.maximum(y @ P["l1_w"] + P["l1_b"], 0) @ P["l2_w"] + P["l2_b"]
    return x + y


# ----------------------------------------------------------------------------- helpers
def T(a, requires_grad=True, dtype="float64"):
    return ndl.Tensor(np.asarray(a), dtype=dtype, requires_grad=requires_grad)


def val(d):
    """Parameter tensors -> NumPy values (None stays None)."""
    if isinstance(d, dict):
        return {k: val(v) for k, v in d.items()}
    if isinstance(d, (list, tuple)):
        return type(d)(val(v) for v in d)
    return None if d is None else d.numpy().astype(np.float64)


def numgrad(f, arrays, eps=1e-6):
    """Central differences of the scalar f() over every entry of each array in ``arrays``
    (perturbed in place)."""
    grads = []
    for a in arrays:
        g = np.zeros_like(a)
        it = np.nditer(a, flags=["multi_index"])
        for _ in it:
            i = it.multi_index
            old = a[i]
            a[i] = old + eps
            up = f()
            a[i] = old - eps
            down = f()
            a[i] = old
            g[i] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


def rng(seed):
    return np.random.default_rng(seed)


def cell_params(cell):
    return [cell.W_ih, cell.W_hh, cell.bias_ih, cell.bias_hh]


KINDS = ["tanh", "relu", "lstm", "gru"]


def make_stack(kind, I, H, L, bias=True, dtype="float64"):
    if kind in ("tanh", "relu"):
        m = nn.RNN(I, H, L, bias=bias, nonlinearity=kind, dtype=dtype)
        return m, m.rnn_cells
    if kind == "lstm":
        m = nn.LSTM(I, H, L, bias=bias, dtype=dtype)
        return m, m.lstm_cells
    m = nn.GRU(I, H, L, bias=bias, dtype=dtype)
    return m, m.gru_cells


def make_cell(kind, I, H, bias=True, dtype="float64"):
    if kind in ("tanh", "relu"):
        return nn.RNNCell(I, H, bias=bias, nonlinearity=kind, dtype=dtype)
    return (nn.LSTMCell if kind == "lstm" else nn.GRUCell)(I, H, bias=bias, dtype=dtype)


# ----------------------------------------------------------------------------- parameters
@pytest.mark.parametrize("kind", KINDS)
def test_cell_parameters_follow_needle(kind):
    np.random.seed(0)
    I, H = 5, 7
    g = {"tanh": 1, "relu": 1, "lstm": 4, "gru": 3}[kind]
    c = make_cell(kind, I, H, dtype="float32")
    assert c.W_ih.shape == (I, g * H) and c.W_hh.shape == (H, g * H)
    assert c.bias_ih.shape == (g * H,) and c.bias_hh.shape == (g * H,)
    assert c.W_ih.dtype == "float32"
    ps = c.parameters()
    assert len(ps) == 4 and all(isinstance(p, nn.Parameter) for p in ps)
    k = 1 / math.sqrt(H)
    for p in ps:
        a = p.numpy()
        assert np.all(np.abs(a) <= k) and a.std() > 0.2 * k
    assert len(make_cell(kind, I, H, bias=False).parameters()) == 2


@pytest.mark.parametrize("kind", KINDS)
def test_stack_parameters_and_layers(kind):
    m, cells = make_stack(kind, 3, 4, 3)
    assert len(cells) == 3
    assert cells[0].W_ih.shape[0] == 3 and cells[1].W_ih.shape[0] == 4
    assert len(m.parameters()) == 12
    assert len({id(p) for p in m.parameters()}) == 12


# ----------------------------------------------------------------------------- cells
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bias", [True, False])
def test_cell_forward_and_grad_match_reference(kind, bias):
    r = rng(1)
    B, I, H = 3, 4, 5
    cell = make_cell(kind, I, H, bias=bias)
    x = r.normal(size=(B, I))
    h = r.normal(size=(B, H))
    c = r.normal(size=(B, H))
    xt, ht, ct = T(x), T(h), T(c)
    if kind == "lstm":
        h2, c2 = cell(xt, (ht, ct))
    else:
        h2, c2 = cell(xt, ht), None
    P = list(val(cell_params(cell)))
    rh, rc = cell_ref(kind, x, h, c, *P)
    np.testing.assert_allclose(h2.numpy(), rh, rtol=1e-10, atol=1e-12)
    if kind == "lstm":
        np.testing.assert_allclose(c2.numpy(), rc, rtol=1e-10, atol=1e-12)
    # gradients of a random projection of the new state
    wh, wc = r.normal(size=(B, H)), r.normal(size=(B, H))
    loss = (h2 * T(wh, False)).sum()
    if kind == "lstm":
        loss = loss + (c2 * T(wc, False)).sum()
    loss.backward()
    params = [p for p in P if p is not None]  # perturbed in place, so f sees the changes
    qparams = [p for p in cell_params(cell) if p is not None]

    def f():
        a, b = cell_ref(kind, x, h, c, *P)
        return (a * wh).sum() + ((b * wc).sum() if kind == "lstm" else 0)

    arrays = [x, h] + ([c] if kind == "lstm" else []) + params
    ng = numgrad(f, arrays)
    got = [xt.grad, ht.grad] + ([ct.grad] if kind == "lstm" else []) + [q.grad for q in qparams]
    for g, n in zip(got, ng):
        np.testing.assert_allclose(g.numpy(), n, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kind", KINDS)
def test_cell_zero_state_default(kind):
    r = rng(2)
    cell = make_cell(kind, 3, 4)
    x = r.normal(size=(2, 3))
    out = cell(T(x))
    h = out[0] if kind == "lstm" else out
    z = np.zeros((2, 4))
    np.testing.assert_allclose(h.numpy(), cell_ref(kind, x, z, z, *val(cell_params(cell)))[0],
                               rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- stacks
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("L", [1, 2])
def test_stack_forward_and_grad_match_reference(kind, L):
    r = rng(3)
    S, B, I, H = 4, 2, 3, 4
    m, cells = make_stack(kind, I, H, L)
    X = r.normal(size=(S, B, I))
    h0, c0 = r.normal(size=(L, B, H)), r.normal(size=(L, B, H))
    Xt, h0t, c0t = T(X), T(h0), T(c0)
    if kind == "lstm":
        out, (hn, cn) = m(Xt, (h0t, c0t))
    else:
        (out, hn), cn = m(Xt, h0t), None
    assert out.shape == (S, B, H) and hn.shape == (L, B, H)
    P = [list(val(cell_params(c))) for c in cells]
    ro, rh, rc = stack_ref(kind, X, P, h0, c0 if kind == "lstm" else None)
    np.testing.assert_allclose(out.numpy(), ro, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hn.numpy(), rh, rtol=1e-10, atol=1e-12)
    if kind == "lstm":
        np.testing.assert_allclose(cn.numpy(), rc, rtol=1e-10, atol=1e-12)

    wo, wh, wc = r.normal(size=ro.shape), r.normal(size=rh.shape), r.normal(size=rh.shape)
    loss = (out * T(wo, False)).sum() + (hn * T(wh, False)).sum()
    if kind == "lstm":
        loss = loss + (cn * T(wc, False)).sum()
    loss.backward()

    def f():
        o, h, c = stack_ref(kind, X, P, h0, c0 if kind == "lstm" else None)
        return (o * wo).sum() + (h * wh).sum() + ((c * wc).sum() if kind == "lstm" else 0)

    arrays = [X, h0] + ([c0] if kind == "lstm" else []) + [a for p in P for a in p]
    got = [Xt.grad, h0t.grad] + ([c0t.grad] if kind == "lstm" else [])
    got += [q.grad for c in cells for q in cell_params(c)]
    for g, n in zip(got, numgrad(f, arrays)):
        np.testing.assert_allclose(g.numpy(), n, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kind", KINDS)
def test_stack_non_contiguous_inputs(kind):
    """Input as a reversed, transposed view; h0 a broadcast (stride 0) view; a size-1 batch."""
    r = rng(4)
    S, B, I, H, L = 5, 3, 2, 3, 2
    m, cells = make_stack(kind, I, H, L)
    base = r.normal(size=(B, 2 * S, I))
    Xt = T(base)[:, ::-2, :].permute([1, 0, 2])  # (S, B, I), negative step + permute
    X = base[:, ::-2, :].transpose(1, 0, 2)
    hrow = r.normal(size=(1, 1, H))
    h0t = T(hrow).broadcast_to((L, B, H))
    h0 = np.broadcast_to(hrow, (L, B, H))
    P = [list(val(cell_params(c))) for c in cells]
    if kind == "lstm":
        out, (hn, _) = m(Xt, (h0t, h0t))
        ro, rh, _ = stack_ref(kind, X, P, h0, h0)
    else:
        out, hn = m(Xt, h0t)
        ro, rh, _ = stack_ref(kind, X, P, h0)
    np.testing.assert_allclose(out.numpy(), ro, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(hn.numpy(), rh, rtol=1e-10, atol=1e-12)
    out1 = m(Xt[:, 1:2, :])[0]
    np.testing.assert_allclose(out1.numpy(), stack_ref(kind, X[:, 1:2], P)[0], rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_stack_float32_matches_float64_reference(kind):
    np.random.seed(5)
    r = rng(5)
    m, cells = make_stack(kind, 6, 8, 2, dtype="float32")
    X = r.normal(size=(7, 4, 6)).astype(np.float32)
    out = m(ndl.Tensor(X))[0]
    assert out.dtype == "float32"
    ro = stack_ref(kind, X.astype(np.float64), [list(val(cell_params(c))) for c in cells])[0]
    np.testing.assert_allclose(out.numpy(), ro, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_optimizer_updates_reach_the_rust_layer(kind):
    """An SGD step changes the Parameters in place; the next forward must use the new values."""
    r = rng(6)
    m, cells = make_stack(kind, 3, 4, 1)
    X = r.normal(size=(3, 2, 3))
    out = m(T(X, False))[0]
    (out * out).sum().backward()
    ndl.optim.SGD(m.parameters(), lr=0.5).step()
    P = [list(val(cell_params(c))) for c in cells]
    np.testing.assert_allclose(m(T(X, False))[0].numpy(), stack_ref(kind, X, P)[0],
                               rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kind", KINDS)
def test_stack_bad_inputs(kind):
    m, cells = make_stack(kind, 3, 4, 2)
    with pytest.raises(ValueError):
        m(T(np.zeros((5, 2, 4))))  # input_size 4 != 3
    with pytest.raises(ValueError):
        m(T(np.zeros((5, 3))))  # not (seq, bs, input)
    bad_h = T(np.zeros((1, 2, 4)))  # one layer's state for two layers
    with pytest.raises(ValueError):
        m(T(np.zeros((5, 2, 3))), (bad_h, bad_h) if kind == "lstm" else bad_h)
    cells[1].W_hh = nn.Parameter(T(np.zeros((4, 5))))  # not (H, G*H)
    with pytest.raises(ValueError, match="W_hh"):
        m(T(np.zeros((5, 2, 3))))


@pytest.mark.parametrize("kind", KINDS)
def test_cell_bad_inputs(kind):
    c = make_cell(kind, 3, 4)
    with pytest.raises(ValueError):
        c(T(np.zeros((2, 5))))
    bad = T(np.zeros((2, 3)))  # hidden 3 != 4
    with pytest.raises(ValueError):
        c(T(np.zeros((2, 3))), (bad, bad) if kind == "lstm" else bad)


def test_bad_constructor_arguments():
    with pytest.raises(ValueError):
        nn.RNNCell(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError):
        nn.RNN(3, 4, num_layers=0)
    with pytest.raises(ValueError):
        nn.LSTM(3, 0)
    with pytest.raises(ValueError):
        LanguageModel(4, 10, 8, seq_model="cnn")


# ----------------------------------------------------------------------------- embedding
def test_embedding_lookup_and_grad():
    np.random.seed(7)
    e = nn.Embedding(6, 3, dtype="float64")
    assert e.weight.shape == (6, 3) and isinstance(e.weight, nn.Parameter)
    ids = np.array([[0, 5, 2], [2, 2, 1]])  # (seq_len, bs), repeats
    W = val(e.weight)
    for x in (ndl.Tensor(ids.astype(np.float32), requires_grad=False), ids,
              ndl.Tensor(ids, requires_grad=False)):
        out = e(x)
        assert out.shape == (2, 3, 3)
        np.testing.assert_allclose(out.numpy(), W[ids])
    g = rng(7).normal(size=(2, 3, 3))
    e.weight.grad = None
    (e(ids) * T(g, False)).sum().backward()
    ref = np.zeros_like(W)
    np.add.at(ref, ids, g)
    np.testing.assert_allclose(e.weight.grad.numpy(), ref, rtol=1e-12)
    # non-contiguous ids: a transposed view
    idt = ndl.Tensor(ids, requires_grad=False).transpose()
    np.testing.assert_allclose(e(idt).numpy(), W[ids.T])


def test_embedding_bad_ids():
    e = nn.Embedding(4, 2)
    with pytest.raises(IndexError):
        e(np.array([[1, 4]]))
    with pytest.raises(ValueError):
        e(ndl.Tensor(np.array([[0.5, 1.0]]), requires_grad=False))


# ----------------------------------------------------------------------------- attention
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lk", [5, 3])
def test_multi_head_attention_matches_reference(causal, lk):
    r = rng(8)
    B, Hh, Lq, D = 2, 3, 4, 5
    q, k, v = r.normal(size=(B, Hh, Lq, D)), r.normal(size=(B, Hh, lk, D)), r.normal(size=(B, Hh, lk, D))
    qt, kt, vt = T(q), T(k), T(v)
    m = nn.MultiHeadAttention(causal=causal, dtype="float64")
    out, probs = m(qt, kt, vt)
    ro, rp = attention_ref(q, k, v, causal)
    np.testing.assert_allclose(out.numpy(), ro, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(probs.numpy(), rp, rtol=1e-10, atol=1e-12)
    w = r.normal(size=ro.shape)
    (out * T(w, False)).sum().backward()
    ng = numgrad(lambda: (attention_ref(q, k, v, causal)[0] * w).sum(), [q, k, v])
    for g, n in zip([qt.grad, kt.grad, vt.grad], ng):
        np.testing.assert_allclose(g.numpy(), n, rtol=1e-5, atol=1e-7)


def test_multi_head_attention_dropout_and_eval():
    np.random.seed(9)
    r = rng(9)
    q = T(r.normal(size=(1, 2, 6, 4)))
    m = nn.MultiHeadAttention(dropout=0.5, dtype="float64")
    out, probs = m(q, q, q)
    ro, rp = attention_ref(q.numpy(), q.numpy(), q.numpy(), False)
    np.testing.assert_allclose(probs.numpy(), rp, rtol=1e-10)  # before dropout
    assert not np.allclose(out.numpy(), ro)  # dropout changed the result
    m.eval()
    out, _ = m(q, q, q)
    np.testing.assert_allclose(out.numpy(), ro, rtol=1e-10, atol=1e-12)


def test_multi_head_attention_bad_shapes():
    m = nn.MultiHeadAttention()
    with pytest.raises(ValueError):
        m(T(np.zeros((2, 3, 4))), T(np.zeros((2, 3, 4))), T(np.zeros((2, 3, 4))))
    with pytest.raises(ValueError):
        a = T(np.zeros((1, 2, 3, 4)))
        m(a, T(np.zeros((1, 2, 3, 5))), a)


def test_ops_scaled_dot_product_attention_non_contiguous():
    r = rng(10)
    base = r.normal(size=(2, 6, 3, 4))  # (B, L, heads, D) -> permuted to (B, heads, L, D)
    qt = T(base).permute([0, 2, 1, 3])
    out = ndl.ops.scaled_dot_product_attention(qt, qt[:, :, ::-1, :], qt, causal=True)
    q = base.transpose(0, 2, 1, 3)
    np.testing.assert_allclose(out.numpy(), attention_ref(q, q[:, :, ::-1], q, True)[0],
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_layer_matches_reference(causal):
    np.random.seed(11)
    r = rng(11)
    B, L, F, nh, dh = 2, 4, 6, 2, 3
    layer = nn.AttentionLayer(F, nh, dh, causal=causal, dtype="float64")
    for n in (layer.prenorm_q, layer.prenorm_k, layer.prenorm_v):  # non-trivial norms
        n.weight.data = r.normal(size=F)
        n.bias.data = r.normal(size=F)
    x = r.normal(size=(B, L, F))
    xt = T(x)
    out = layer(xt)
    assert out.shape == (B, L, F)
    P = val(attn_params(layer))
    np.testing.assert_allclose(out.numpy(), attn_layer_ref(x, x, x, P, nh, dh, causal),
                               rtol=1e-9, atol=1e-11)
    w = r.normal(size=(B, L, F))
    (out * T(w, False)).sum().backward()
    names = list(P)
    ng = numgrad(lambda: (attn_layer_ref(x, x, x, P, nh, dh, causal) * w).sum(),
                 [x] + [P[k] for k in names])
    got = [xt.grad] + [attn_params(layer)[k].grad for k in names]
    for g, n in zip(got, ng):
        np.testing.assert_allclose(g.numpy(), n, rtol=1e-5, atol=1e-7)


def test_attention_layer_cross_attention_shapes():
    np.random.seed(12)
    r = rng(12)
    layer = nn.AttentionLayer(4, 2, 3, k_features=5, v_features=6, out_features=7,
                              causal=False, dtype="float64")
    q, k, v = r.normal(size=(2, 3, 4)), r.normal(size=(2, 5, 5)), r.normal(size=(2, 5, 6))
    out = layer(T(q), T(k), T(v))
    assert out.shape == (2, 3, 7)
    np.testing.assert_allclose(out.numpy(), attn_layer_ref(q, k, v, val(attn_params(layer)), 2,
                                                           3, False), rtol=1e-9, atol=1e-11)
    with pytest.raises(ValueError):
        layer(T(q), T(q), T(v))  # k has 4 features, not 5


def test_transformer_layer_matches_reference():
    np.random.seed(13)
    r = rng(13)
    B, L, F, nh, dh, hid = 2, 5, 4, 2, 3, 7
    layer = nn.TransformerLayer(F, nh, dh, hid, dtype="float64")
    x = r.normal(size=(B, L, F))
    xt = T(x)
    out = layer(xt)
    P = val(tlayer_params(layer))
    P["l1_b"], P["l2_b"] = P["l1_b"].reshape(-1), P["l2_b"].reshape(-1)
    np.testing.assert_allclose(out.numpy(), tlayer_ref(x, P, nh, dh, True), rtol=1e-9,
                               atol=1e-11)
    w = r.normal(size=x.shape)
    (out * T(w, False)).sum().backward()
    names = list(P)
    ng = numgrad(lambda: (tlayer_ref(x, P, nh, dh, True) * w).sum(), [x] + [P[k] for k in names])
    got = [xt.grad] + [tlayer_params(layer)[k].grad for k in names]
    for g, n in zip(got, ng):
        np.testing.assert_allclose(g.numpy().reshape(n.shape), n, rtol=1e-5, atol=1e-7)
    assert len(layer.parameters()) == 16


@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_matches_reference(batch_first):
    np.random.seed(14)
    r = rng(14)
    S, B, E, hid, nl = 4, 2, 4, 6, 2
    m = nn.Transformer(E, hid, nl, num_head=2, dim_head=2, dtype="float64",
                       batch_first=batch_first, sequence_len=8)
    x = r.normal(size=(B, S, E) if batch_first else (S, B, E))
    out, h = m(T(x))
    assert out.shape == x.shape and h.shape == x.shape and not h.numpy().any()
    y = x if batch_first else x.transpose(1, 0, 2)
    y = y + val(m.pos_embedding.weight)[:S]
    for layer in m.layers:
        P = val(tlayer_params(layer))
        P["l1_b"], P["l2_b"] = P["l1_b"].reshape(-1), P["l2_b"].reshape(-1)
        y = tlayer_ref(y, P, 2, 2, True)
    y = y if batch_first else y.transpose(1, 0, 2)
    np.testing.assert_allclose(out.numpy(), y, rtol=1e-9, atol=1e-11)
    assert len(m.parameters()) == 1 + nl * 16
    with pytest.raises(ValueError):
        m(T(np.zeros((9, 2, E)) if not batch_first else np.zeros((2, 9, E))))  # > sequence_len
    with pytest.raises(ValueError):
        m(T(np.zeros((S, B, E + 1))))


def test_transformer_dropout_is_random_in_training_only():
    np.random.seed(15)
    m = nn.Transformer(4, 8, 1, num_head=2, dim_head=2, dropout=0.3, sequence_len=8)
    x = ndl.Tensor(np.random.randn(3, 2, 4), requires_grad=False)
    a, b = m(x)[0].numpy(), m(x)[0].numpy()
    assert not np.allclose(a, b)
    m.eval()
    a, b = m(x)[0].numpy(), m(x)[0].numpy()
    np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------- models
@pytest.mark.parametrize("seq_model", ["rnn", "lstm", "gru", "transformer"])
def test_language_model_learns_tiny_corpus(seq_model):
    """A periodic token stream is fully predictable from context: the loss must fall well
    below its starting value (about ln(vocab))."""
    np.random.seed(16)
    vocab, bptt, bs = 7, 6, 4
    corpus = [i % vocab for i in range(bs * 30)]
    batches = ndl.data.batchify(corpus, bs)
    model = LanguageModel(16, vocab, 16, num_layers=2 if seq_model != "transformer" else 1,
                          seq_model=seq_model, seq_len=bptt)
    opt = ndl.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = nn.SoftmaxLoss()
    losses = []
    for _ in range(6):
        h = None
        for i in range(0, len(batches) - 1, bptt):
            x, y = ndl.data.get_batch(batches, i, bptt)
            opt.reset_grad()
            logits, h = model(x, h)
            assert logits.shape == (x.shape[0] * bs, vocab)
            loss = loss_fn(logits, y)
            loss.backward()
            opt.step()
            h = tuple(s.detach() for s in h) if isinstance(h, tuple) else h.detach()
            losses.append(loss.numpy().item())
    assert losses[0] > 0.7 * math.log(vocab), losses[0]
    assert np.mean(losses[-4:]) < 0.25 * np.mean(losses[:4]), losses


def test_language_model_state_shapes():
    np.random.seed(17)
    x = ndl.Tensor(np.random.randint(0, 9, size=(5, 3)).astype(np.float32), requires_grad=False)
    logits, h = LanguageModel(8, 9, 6, num_layers=2, seq_model="lstm")(x)
    assert logits.shape == (15, 9) and h[0].shape == (2, 3, 6) and h[1].shape == (2, 3, 6)
    logits, h = LanguageModel(8, 9, 6, num_layers=2, seq_model="rnn")(x)
    assert h.shape == (2, 3, 6)
    logits, h = LanguageModel(8, 9, 6, seq_model="transformer", seq_len=5)(x)
    assert logits.shape == (15, 9) and h.shape == (5, 3, 8)
    with pytest.raises(ValueError):
        LanguageModel(8, 9, 6)(ndl.Tensor(np.zeros((5, 3, 1)), requires_grad=False))


def test_resnet9_shapes_and_gradients():
    np.random.seed(18)
    m = ResNet9()
    x = ndl.Tensor(np.random.randn(2, 3, 32, 32).astype(np.float32), requires_grad=False)
    out = m(x)
    assert out.shape == (2, 10) and out.dtype == "float32"
    # float64 data with float32 weights computes in float64 (NumPy's promotion, as needle's
    # NumPy-backed ops), to the same values.
    out64 = m(ndl.Tensor(x.numpy().astype(np.float64), requires_grad=False))
    assert out64.dtype == "float64"
    np.testing.assert_allclose(out64.numpy(), out.numpy(), rtol=1e-3, atol=1e-4)
    out.sum().backward()
    ps = m.parameters()
    # 8 ConvBN (conv weight, bias, bn weight, bias) + 2 Linear (weight, bias)
    assert len(ps) == 8 * 4 + 4
    assert all(p.grad is not None and p.grad.shape == p.shape for p in ps)
    m.eval()
    assert m(x).shape == (2, 10)


def test_batchnorm2d_matches_reference():
    r = rng(19)
    bn = nn.BatchNorm2d(3, dtype="float64")
    bn.weight.data = r.normal(size=3)
    bn.bias.data = r.normal(size=3)
    x = r.normal(size=(4, 3, 2, 5))
    out = bn(T(x))
    m, v = x.mean((0, 2, 3)), x.var((0, 2, 3))
    ref = (x - m[:, None, None]) / np.sqrt(v[:, None, None] + 1e-5)
    ref = ref * val(bn.weight)[:, None, None] + val(bn.bias)[:, None, None]
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-9, atol=1e-11)
    n = 4 * 2 * 5
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * m, rtol=1e-10)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * v * n / (n - 1), rtol=1e-10)
    bn.eval()
    ref = (x - bn.running_mean.numpy()[:, None, None]) / np.sqrt(
        bn.running_var.numpy()[:, None, None] + 1e-5)
    ref = ref * val(bn.weight)[:, None, None] + val(bn.bias)[:, None, None]
    np.testing.assert_allclose(bn(T(x)).numpy(), ref, rtol=1e-9, atol=1e-11)
    with pytest.raises(ValueError):
        bn(T(np.zeros((4, 2, 2, 2))))
