# The peer side of `quill bench transformer`: one training step (forward, MSE loss, backward,
# Adam) of a 2-layer needle-style pre-norm Transformer (embedding 128, 4 heads x 32, hidden
# 256, causal, no dropout, learned positions) on (16, 64, 128) float32 input, PyTorch CPU,
# 2 threads. Answers "step torch REPS" with each rep's seconds, and "step_bf16 torch REPS" for a
# second model (same seed) whose forward and loss run under torch.autocast("cpu",
# torch.bfloat16), as `quill bench transformer --precision bf16` does.
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

try:
    import torch
    from torch import nn
    import torch.nn.functional as F

    torch.set_num_threads(2)
except Exception:  # noqa: BLE001 - any import failure means "no PyTorch peer"
    torch = None

E, H, DH, HID, L, B, SEQ = 128, 4, 32, 256, 2, 16, 64
cases = {}
if torch is not None:
    torch.manual_seed(0)

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.nq, self.nk, self.nv = nn.LayerNorm(E), nn.LayerNorm(E), nn.LayerNorm(E)
            self.q = nn.Linear(E, H * DH, bias=False)
            self.k = nn.Linear(E, H * DH, bias=False)
            self.v = nn.Linear(E, H * DH, bias=False)
            self.o = nn.Linear(H * DH, E, bias=False)

        def forward(self, x):
            b, s, _ = x.shape
            split = lambda t: t.reshape(b, s, H, DH).transpose(1, 2)  # noqa: E731
            q, k, v = split(self.q(self.nq(x))), split(self.k(self.nk(x))), split(self.v(self.nv(x)))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o(o.transpose(1, 2).reshape(b, s, H * DH))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = Attn()
            self.norm = nn.LayerNorm(E)
            self.lin_in, self.lin_out = nn.Linear(E, HID), nn.Linear(HID, E)

        def forward(self, x):
            x = x + self.attn(x)
            return x + self.lin_out(torch.relu(self.lin_in(self.norm(x))))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.pos = nn.Embedding(SEQ, E)
            self.layers = nn.ModuleList([Layer() for _ in range(L)])

        def forward(self, x):
            x = x + self.pos(torch.arange(x.shape[1]))
            for layer in self.layers:
                x = layer(x)
            return x

    x = torch.randn(B, SEQ, E)
    y = torch.randn(B, SEQ, E)

    def make_step(bf16):
        # Each precision trains its own model from the same initial weights.
        torch.manual_seed(0)
        model = Net()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

        return step

    cases = {"step": make_step(False), "step_bf16": make_step(True)}

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
