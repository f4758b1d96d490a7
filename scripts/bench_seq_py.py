"""Optional benchmark (not part of any test run): quill.nn.LSTM / quill.nn.Transformer from
Python (the Rust layers behind them) against the same LSTM written op by op in Python over
quill Tensors (needle's way: one graph of primitive ops per step) and, when importable,
torch; forward+backward, float32.
Run from the repository root after building the wheel, e.g.
`RAYON_NUM_THREADS=2 /work/main/.bench-venv/bin/python scripts/bench_seq_py.py`."""
import sys
import time

import numpy as np

sys.path.insert(0, "crates/quill-py/python")
import quill as ndl  # noqa: E402
import quill.nn as nn  # noqa: E402


def bench(f, reps=5):
    f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts) * 1e3


def lstm_op_by_op(X, cells):
    """needle's LSTM in Python: per step, matmuls and gate math as separate Tensor ops."""
    S, B, _ = X.shape
    seq = [X[t] for t in range(S)]
    for c in cells:
        H = c.hidden_size
        h = ndl.Tensor(np.zeros((B, H), np.float32), requires_grad=False)
        cs = ndl.Tensor(np.zeros((B, H), np.float32), requires_grad=False)
        bias = (c.bias_ih + c.bias_hh).reshape((1, 4 * H)).broadcast_to((B, 4 * H))
        out = []
        for x in seq:
            g = x @ c.W_ih + h @ c.W_hh + bias
            i, f, gg, o = (g[:, k * H:(k + 1) * H] for k in range(4))
            cs = i.sigmoid() * gg.tanh() + f.sigmoid() * cs
            h = o.sigmoid() * cs.tanh()
            out.append(h)
        seq = out
    return ndl.ops.stack(seq, 0)


S, B, I, H, L = 40, 16, 64, 128, 2
np.random.seed(0)
X = ndl.Tensor(np.random.randn(S, B, I).astype(np.float32), requires_grad=False)
lstm = nn.LSTM(I, H, L)
rows = {
    "quill.nn.LSTM (Rust fused layers)": lambda: lstm(X)[0].sum().backward(),
    "same LSTM op by op in Python": lambda: lstm_op_by_op(X, lstm.lstm_cells).sum().backward(),
}
tr = nn.Transformer(128, 256, 2, num_head=4, dim_head=32, sequence_len=S)
Xt = ndl.Tensor(np.random.randn(S, B, 128).astype(np.float32), requires_grad=False)
rows["quill.nn.Transformer E128 2 layers"] = lambda: tr(Xt)[0].sum().backward()
try:
    import torch

    torch.set_num_threads(2)
    tl = torch.nn.LSTM(I, H, L)
    tx = torch.tensor(X.numpy())
    rows["torch.nn.LSTM"] = lambda: tl(tx)[0].sum().backward()
except ImportError:
    pass
print(f"LSTM seq {S} batch {B} input {I} hidden {H} layers {L}, forward+backward, f32:", flush=True)
for name, f in rows.items():
    print(f"  {name}: {bench(f):.1f} ms", flush=True)
