# The peer side of `quill bench lstm`: one training step of the same model in PyTorch CPU with
# 2 threads: torch.nn.LSTM(64, 128, num_layers=2) (and torch.nn.GRU, the same sizes) over
# (seq 32, batch 32, 64) inputs, a Linear 128 -> 10 head and cross-entropy over every step's
# output, Adam lr 1e-3. Answers "step torch N" (LSTM) and "gru torch N" with the seconds of
# each of N steps.
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

try:
    import torch
    from torch import nn

    torch.set_num_threads(2)
except Exception:  # noqa: BLE001 - any import failure means "no PyTorch peer"
    torch = None

cases = {}
if torch is not None:
    torch.manual_seed(0)
    seq, batch, inp, hidden, classes = 32, 32, 64, 128, 10
    x = torch.randn(seq, batch, inp)
    y = torch.randint(0, classes, (seq * batch,))

    def trainer(rnn):
        head = nn.Linear(hidden, classes)
        opt = torch.optim.Adam(list(rnn.parameters()) + list(head.parameters()), lr=1e-3)

        def step():
            out, _ = rnn(x)
            loss = nn.functional.cross_entropy(head(out.reshape(-1, hidden)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

        return step

    cases = {
        "step": trainer(nn.LSTM(inp, hidden, num_layers=2)),
        "gru": trainer(nn.GRU(inp, hidden, num_layers=2)),
    }

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
