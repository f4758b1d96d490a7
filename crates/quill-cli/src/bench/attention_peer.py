# The peer side of `quill bench attention`: forward + backward of
# torch.nn.functional.scaled_dot_product_attention on (8, L, 64) float32 q, k, v (no mask), in
# PyTorch CPU with 2 threads. Answers "sdpa-L torch REPS" with each rep's seconds.
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

try:
    import torch

    torch.set_num_threads(2)
except Exception:  # noqa: BLE001 - any import failure means "no PyTorch peer"
    torch = None

inputs = {}


def sdpa(n):
    if n not in inputs:
        g = torch.Generator().manual_seed(0)
        mk = lambda: torch.randn(8, n, 64, generator=g).requires_grad_()  # noqa: E731
        inputs[n] = (mk(), mk(), mk(), torch.ones(8, n, 64))
    q, k, v, go = inputs[n]

    def step():
        for t in (q, k, v):
            t.grad = None
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        out.backward(go)

    return step


version = "numpy " + np.__version__ + (" torch " + torch.__version__ if torch is not None else "")
print("ready " + version, flush=True)
for line in sys.stdin:
    name, lib, reps = line.split()
    out = []
    if torch is not None and name.startswith("sdpa-"):
        f = sdpa(int(name[5:]))
        f()
        for _ in range(int(reps)):
            t = time.perf_counter()
            f()
            out.append(time.perf_counter() - t)
    print(" ".join(f"{v:.9f}" for v in out), flush=True)
