# The peer side of `quill bench train`: one epoch of the main job's default model (needle's
# MLPResNet: 784 -> 512, 3 residual blocks of 512 -> 256 -> 512 with BatchNorm1d and dropout
# 0.1, -> 10) or, when MODEL = "cnn" is prepended, of quill's `small_cnn` (conv3x3 1->16 no
# bias, BatchNorm2d, ReLU, maxpool 2; conv3x3 16->32 the same; 1568 -> 128 ReLU dropout 0.25
# -> 10), Adam lr 1e-3 weight decay 1e-4, batch 128, shuffled, normalised MNIST, in PyTorch
# CPU with 2 threads. Answers "epoch torch 1" with the seconds of the epoch, and
# "epoch_bf16 torch 1" for an epoch of a second model (same seed) whose forward and loss run
# under torch.autocast(device, torch.bfloat16), as `quill bench train --precision bf16` does.
import gzip
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


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


cases = {}
if torch is not None:
    torch.manual_seed(0)
    # `quill bench train --device cuda` prepends DEVICE = "cuda:0"; the data then lives there
    # (as quill's batches do after to_device) and each epoch ends with a synchronize.
    dev = torch.device(globals().get("DEVICE", "cpu"))
    x = torch.from_numpy((idx("data/mnist/train-images-idx3-ubyte.gz").astype(np.float32) / 255.0 - 0.1307) / 0.3081).reshape(-1, 784)
    y = torch.from_numpy(idx("data/mnist/train-labels-idx1-ubyte.gz").astype(np.int64))
    x, y = x.to(dev), y.to(dev)

    def block(dim, hidden):
        inner = nn.Sequential(nn.Linear(dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(0.1), nn.Linear(hidden, dim), nn.BatchNorm1d(dim))
        return inner

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Linear(784, 512)
            self.blocks = nn.ModuleList([block(512, 256) for _ in range(3)])
            self.out = nn.Linear(512, 10)

        def forward(self, h):
            h = torch.relu(self.inp(h))
            for b in self.blocks:
                h = torch.relu(h + b(h))
            return self.out(h)

    def small_cnn():
        def stage(i, o):
            return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(), nn.MaxPool2d(2, 2)]

        return nn.Sequential(*stage(1, 16), *stage(16, 32), nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10))

    cnn = globals().get("MODEL", "mlp") == "cnn"
    if cnn:
        x = x.reshape(-1, 1, 28, 28)

    def make_epoch(bf16):
        # Each precision trains its own model from the same initial weights.
        torch.manual_seed(0)
        model = (small_cnn() if cnn else Net()).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)

        def epoch():
            model.train()
            perm = torch.randperm(x.shape[0], device=dev)
            for i in range(0, x.shape[0], 128):
                idx_ = perm[i : i + 128]
                with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
                    loss = nn.functional.cross_entropy(model(x[idx_]), y[idx_])
                opt.zero_grad()
                loss.backward()
                opt.step()
            if dev.type == "cuda":
                torch.cuda.synchronize()

        return epoch

    cases = {"epoch": make_epoch(False), "epoch_bf16": make_epoch(True)}

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
