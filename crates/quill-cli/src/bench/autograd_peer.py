# The peer side of `quill bench autograd`: the same MLP (784-512-512-10, ReLU, cross-entropy,
# batch 128, f32) forward + backward in PyTorch CPU. Reads "case lib reps" lines on stdin and
# answers with the seconds of each rep, so that quill and PyTorch alternate within one run.
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

cases = {}
if torch is not None:
    g = torch.Generator().manual_seed(0)
    sizes = [784, 512, 512, 10]
    params = []
    for i, o in zip(sizes, sizes[1:]):
        params.append((torch.randn(i, o, generator=g) * (2.0 / i) ** 0.5).requires_grad_())
        params.append(torch.zeros(o).requires_grad_())
    x = torch.rand(128, 784, generator=g)
    y = torch.randint(0, 10, (128,), generator=g)

    def step():
        h = x
        for k in range(0, len(params), 2):
            h = h @ params[k] + params[k + 1]
            if k + 2 < len(params):
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h, y)
        for p in params:
            p.grad = None
        loss.backward()

    def forward():
        with torch.no_grad():
            h = x
            for k in range(0, len(params), 2):
                h = h @ params[k] + params[k + 1]
                if k + 2 < len(params):
                    h = torch.relu(h)
            torch.nn.functional.cross_entropy(h, y)

    cases = {"mlp_step": step, "mlp_forward": forward}

version = "numpy " + np.__version__ + (" torch " + torch.__version__ if torch is not None else "")
print("ready " + version, flush=True)
for line in sys.stdin:
    name, lib, reps = line.split()
    f = cases.get(name)
    out = []
    for _ in range(int(reps)):
        if f is None:
            break
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    print(" ".join(f"{v:.9f}" for v in out), flush=True)
