"""Optional benchmark (not part of any test run): times quill.ops.conv (native NHWC op) against the previous path (NCHW Conv2d::functional
between permutes) and, when torch is importable, torch.nn.functional.conv2d; forward and
forward+backward, float32.
Run from the repository root after building the wheel, e.g.
`RAYON_NUM_THREADS=2 /work/main/.bench-venv/bin/python scripts/bench_conv_hw4.py`."""
import sys, time
import numpy as np
sys.path.insert(0, "crates/quill-py/python")
import quill as ndl
from quill import ops
from quill._native import conv2d

def old_conv(a, b, stride, padding):
    return conv2d(a.permute([0, 3, 1, 2]), b.permute([3, 2, 0, 1]), None, stride, padding).permute([0, 2, 3, 1])

def bench(f, reps=5):
    f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return min(ts) * 1e3

for (n, h, c, o, k, s, p) in [(32, 32, 16, 32, 3, 1, 1), (32, 32, 16, 32, 3, 2, 1), (8, 64, 32, 64, 5, 1, 2)]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, h, h, c)).astype(np.float32)
    w = rng.standard_normal((k, k, c, o)).astype(np.float32)
    row = f"N{n} H{h} C{c}->{o} k{k} s{s} p{p}:"
    for name, fn in [("ops.conv", ops.conv), ("old permute+conv2d", old_conv)]:
        xt, wt = ndl.Tensor(x, requires_grad=True), ndl.Tensor(w, requires_grad=True)
        fwd = bench(lambda: fn(xt, wt, s, p).numpy())
        fb = bench(lambda: fn(xt, wt, s, p).sum().backward())
        row += f"  {name}: fwd {fwd:.1f} ms, fwd+bwd {fb:.1f} ms;"
    try:
        import torch
        torch.set_num_threads(2)
        xt = torch.tensor(x).permute(0, 3, 1, 2).contiguous().requires_grad_()
        wt = torch.tensor(w).permute(3, 2, 0, 1).contiguous().requires_grad_()
        f = lambda: torch.nn.functional.conv2d(xt, wt, stride=s, padding=p)
        fwd = bench(lambda: f().detach())
        fb = bench(lambda: f().sum().backward())
        row += f"  torch: fwd {fwd:.1f} ms, fwd+bwd {fb:.1f} ms"
    except ImportError:
        pass
    print(row, flush=True)
