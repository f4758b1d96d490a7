"""Optional cross-check of quill.nn's sequence modules against PyTorch (not part of the pytest
run: the test venv has no torch). Copies each quill module's parameters into the PyTorch
module (needle's ``W_ih`` is PyTorch's ``weight_ih`` transposed), runs both in float64 on the
same input and compares outputs and every gradient. Prints one line per case and exits 1 on a
mismatch.

Run with a Python that has torch and sees the built quill package, e.g.
    PYTHONPATH=crates/quill-py/python /work/main/.bench-venv/bin/python \
        crates/quill-py/tests/reference/torch_sequence.py
"""
import sys

import numpy as np
import torch

import quill as ndl
import quill.nn as nn

torch.set_default_dtype(torch.float64)
FAILED = []


def close(name, a, b, tol=1e-9):
    a, b = np.asarray(a), np.asarray(b)
    err = float(np.max(np.abs(a - b))) if a.size else 0.0
    ok = a.shape == b.shape and err <= tol * max(1.0, float(np.max(np.abs(b))))
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max abs diff {err:.2e}")
    if not ok:
        FAILED.append(name)


def qt(a, rg=True):
    return ndl.Tensor(a, dtype="float64", requires_grad=rg)


def copy_layer(tm, cells):
    with torch.no_grad():
        for k, c in enumerate(cells):
            getattr(tm, f"weight_ih_l{k}").copy_(torch.tensor(c.W_ih.numpy().T))
            getattr(tm, f"weight_hh_l{k}").copy_(torch.tensor(c.W_hh.numpy().T))
            getattr(tm, f"bias_ih_l{k}").copy_(torch.tensor(c.bias_ih.numpy()))
            getattr(tm, f"bias_hh_l{k}").copy_(torch.tensor(c.bias_hh.numpy()))


def check_stack(kind):
    rng = np.random.default_rng(0)
    S, B, I, H, L = 6, 3, 4, 5, 2
    X = rng.normal(size=(S, B, I))
    h0, c0 = rng.normal(size=(L, B, H)), rng.normal(size=(L, B, H))
    if kind == "lstm":
        m, tm = nn.LSTM(I, H, L, dtype="float64"), torch.nn.LSTM(I, H, L)
        cells = m.lstm_cells
    elif kind == "gru":
        m, tm = nn.GRU(I, H, L, dtype="float64"), torch.nn.GRU(I, H, L)
        cells = m.gru_cells
    else:
        m = nn.RNN(I, H, L, nonlinearity=kind, dtype="float64")
        tm, cells = torch.nn.RNN(I, H, L, nonlinearity=kind), m.rnn_cells
    copy_layer(tm, cells)
    Xq, hq, cq = qt(X), qt(h0), qt(c0)
    Xt = torch.tensor(X, requires_grad=True)
    ht, ct = torch.tensor(h0, requires_grad=True), torch.tensor(c0, requires_grad=True)
    if kind == "lstm":
        out, (hn, cn) = m(Xq, (hq, cq))
        tout, (thn, tcn) = tm(Xt, (ht, ct))
        close(f"{kind} c_n", cn.numpy(), tcn.detach().numpy())
    else:
        out, hn = m(Xq, hq)
        tout, thn = tm(Xt, ht)
    close(f"{kind} output", out.numpy(), tout.detach().numpy())
    close(f"{kind} h_n", hn.numpy(), thn.detach().numpy())
    w = rng.normal(size=(S, B, H))
    (out * qt(w, False)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    close(f"{kind} dX", Xq.grad.numpy(), Xt.grad.numpy())
    close(f"{kind} dh0", hq.grad.numpy(), ht.grad.numpy())
    for k, c in enumerate(cells):
        close(f"{kind} dW_ih l{k}", c.W_ih.grad.numpy(), getattr(tm, f"weight_ih_l{k}").grad.numpy().T)
        close(f"{kind} dW_hh l{k}", c.W_hh.grad.numpy(), getattr(tm, f"weight_hh_l{k}").grad.numpy().T)
        close(f"{kind} dbias_ih l{k}", c.bias_ih.grad.numpy(), getattr(tm, f"bias_ih_l{k}").grad.numpy())
        close(f"{kind} dbias_hh l{k}", c.bias_hh.grad.numpy(), getattr(tm, f"bias_hh_l{k}").grad.numpy())


def check_attention(causal):
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(2, 3, 7, 8)) for _ in range(3))
    qq, kq, vq = qt(q), qt(k), qt(v)
    out, probs = nn.MultiHeadAttention(causal=causal, dtype="float64")(qq, kq, vq)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
    close(f"attention causal={causal} output", out.numpy(), tout.detach().numpy())
    w = rng.normal(size=out.shape)
    (out * qt(w, False)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    for name, a, b in (("dq", qq, tq), ("dk", kq, tk), ("dv", vq, tv)):
        close(f"attention causal={causal} {name}", a.grad.numpy(), b.grad.numpy())


def check_embedding():
    e = nn.Embedding(10, 4, dtype="float64")
    te = torch.nn.Embedding(10, 4)
    with torch.no_grad():
        te.weight.copy_(torch.tensor(e.weight.numpy()))
    ids = np.random.default_rng(2).integers(0, 10, size=(5, 3))
    out, tout = e(ids), te(torch.tensor(ids))
    close("embedding output", out.numpy(), tout.detach().numpy())
    out.sum().backward()
    tout.sum().backward()
    close("embedding dweight", e.weight.grad.numpy(), te.weight.grad.numpy())


for kind in ("tanh", "relu", "lstm", "gru"):
    check_stack(kind)
for causal in (False, True):
    check_attention(causal)
check_embedding()
print(f"torch {torch.__version__}: {'all agree' if not FAILED else f'{len(FAILED)} mismatches'}")
sys.exit(1 if FAILED else 0)
