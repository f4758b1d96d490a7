"""needle-style training through ``import quill`` against the same model in PyTorch, in one
process, alternating rounds (medians, ratio): the main job's MLPResNet (784 -> 512, 3 residual
blocks of 512 -> 256 -> 512 with BatchNorm1d, ReLU and Dropout(0.1), -> 10) written with
needle's ``nn`` classes (``quill.apps.MLPResNet``), ``nn.SoftmaxLoss``, ``optim.Adam`` (lr 1e-3,
weight decay 1e-4), batch 128 of MNIST-shaped data, one training step = forward, backward,
optimizer step, as needle's ``epoch`` does it.

    .py-venv/bin/python crates/quill-py/bench/needle_train.py [--rounds N] [--steps K]

PyTorch is looked up in this interpreter, then through ``$QUILL_BENCH_PYTHON`` /
``.bench-venv`` is not tried (one process is the point); without it only quill's figure is
printed. Threads: 2 for both (``RAYON_NUM_THREADS`` and ``torch.set_num_threads``).
"""
import os
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "2")

import numpy as np  # noqa: E402

import quill as ndl  # noqa: E402
from quill import apps, nn, optim  # noqa: E402

try:
    import torch

    torch.set_num_threads(2)
except Exception:  # noqa: BLE001 - any import failure means "no PyTorch in this process"
    torch = None

BATCH, HIDDEN, BLOCKS = 128, 512, 3


def batches(n, rng):
    x = rng.random((n, BATCH, 784), dtype=np.float32)
    y = rng.integers(0, 10, (n, BATCH)).astype(np.int64)
    return x, y


def quill_steps(xs, ys):
    np.random.seed(0)
    model = apps.MLPResNet(784, HIDDEN, num_blocks=BLOCKS, drop_prob=0.1)
    opt = optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    loss_fn = nn.SoftmaxLoss()
    model.train()
    data = [(ndl.Tensor(x, requires_grad=False), ndl.Tensor(y, requires_grad=False))
            for x, y in zip(xs, ys)]

    def run():
        for x, y in data:
            opt.reset_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
        return float(loss.numpy())

    return run


def torch_steps(xs, ys):
    torch.manual_seed(0)
    tnn = torch.nn

    def block(d, h):
        return tnn.Sequential(
            Residual(tnn.Sequential(tnn.Linear(d, h), tnn.BatchNorm1d(h), tnn.ReLU(),
                                    tnn.Dropout(0.1), tnn.Linear(h, d), tnn.BatchNorm1d(d))),
            tnn.ReLU(),
        )

    class Residual(tnn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, x):
            return self.fn(x) + x

    model = tnn.Sequential(tnn.Linear(784, HIDDEN), tnn.ReLU(),
                           *[block(HIDDEN, HIDDEN // 2) for _ in range(BLOCKS)],
                           tnn.Linear(HIDDEN, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    loss_fn = tnn.CrossEntropyLoss()
    model.train()
    data = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in zip(xs, ys)]

    def run():
        for x, y in data:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
        return float(loss)

    return run


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def main():
    args = sys.argv[1:]
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 7
    steps = int(args[args.index("--steps") + 1]) if "--steps" in args else 20
    xs, ys = batches(steps, np.random.default_rng(0))
    runners = {"quill": quill_steps(xs, ys)}
    if torch is not None:
        runners["PyTorch"] = torch_steps(xs, ys)
    for f in runners.values():   # warm-up round (allocator pools, first-call setup)
        f()
    times = {k: [] for k in runners}
    for _ in range(rounds):
        for k, f in runners.items():
            t = time.perf_counter()
            f()
            times[k].append((time.perf_counter() - t) / steps * 1e3)
    peer = f"PyTorch {torch.__version__}" if torch is not None else "no PyTorch in this process"
    print(f"needle-style MLPResNet 784-{HIDDEN}x{BLOCKS}-10 training step, Adam, batch {BATCH}, "
          f"2 threads, {rounds} rounds of {steps} steps, medians; peer: {peer}")
    print("| case | quill ms/step | PyTorch ms/step | quill speed-up |")
    print("|---|---|---|---|")
    q = median(times["quill"])
    t = median(times["PyTorch"]) if "PyTorch" in times else None
    print(f"| train step | {q:.2f} | {'-' if t is None else f'{t:.2f}'} | "
          f"{'-' if t is None else f'{t / q:.2f}x'} |")


if __name__ == "__main__":
    main()
