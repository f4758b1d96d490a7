#!/usr/bin/env python3
"""PyTorch peer of `quill train` (MNIST, --model mlp) for scripts/bench-scaling-netns.sh.

The same model as quill's (crates/quill/src/nn/models.rs, crates/quill/src/infer/image.rs):
needle's MLPResNet(784, hidden 512, 3 blocks, 10 classes, dropout 0.1) after a flatten,

    Linear(784, 512) -> ReLU -> 3 x [ReLU(x + BN(Linear(Dropout(ReLU(BN(Linear(x, 256)))), 512)))]
    -> Linear(512, 10)

trained as `quill train` trains it by default: Adam, lr 0.001, weight decay 1e-4 (L2, as
torch.optim.Adam's weight_decay), cosine learning rate over every step to 0, cross-entropy, the
first --limit training samples normalised with MNIST's mean 0.1307 / std 0.3081, shuffled each
epoch, global batch --batch-size (default 128). One thread per process (torch.set_num_threads(1)).

Modes:
  single  one process, batch 128;
  ddp     torch.distributed, backend gloo, init_method tcp://ADDR:PORT (--init), rank and world
          from --rank / --world or RANK / WORLD_SIZE; each rank takes every world-th sample of
          the epoch's shuffled order (DistributedSampler's split) in batches of 128 / world, and
          DistributedDataParallel averages the gradients (default buckets, buffers broadcast from
          rank 0 each forward, as quill's DDP; no SyncBatchNorm, as quill). Set
          GLOO_SOCKET_IFNAME to the interface the ranks should talk over.

Output (rank 0 only), one line per epoch in the form of quill's epoch line, so one parser reads
both: "epoch E/N: ... | T s, S samples/s", where S counts the samples of all ranks over rank 0's
training time of that epoch (the test set is not evaluated: quill's samples/s also leaves its
evaluation out). The bench takes the median of epochs 2..N: epoch 1 is warm-up.
"""
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_mnist(root, limit):
    def find(stem):
        for name in (stem + ".gz", stem):
            p = os.path.join(root, name)
            if os.path.exists(p):
                return p
        sys.exit(f"ddp_torch_peer: no {stem}(.gz) in {root}")

    x = read_idx(find("train-images-idx3-ubyte"))[:limit]
    y = read_idx(find("train-labels-idx1-ubyte"))[:limit]
    x = (x.astype(np.float32) / 255.0 - MNIST_MEAN) / MNIST_STD
    return torch.from_numpy(x.reshape(len(x), 784).copy()), torch.from_numpy(y.astype(np.int64))


class ResidualBlock(nn.Module):
    def __init__(self, dim, hidden, drop):
        super().__init__()
        self.inner = nn.Sequential(
            nn.Linear(dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Dropout(drop),
            nn.Linear(hidden, dim), nn.BatchNorm1d(dim))

    def forward(self, x):
        return F.relu(x + self.inner(x))


def mlp_resnet(dim=784, hidden=512, blocks=3, classes=10, drop=0.1):
    layers = [nn.Flatten(), nn.Linear(dim, hidden), nn.ReLU()]
    layers += [ResidualBlock(hidden, hidden // 2, drop) for _ in range(blocks)]
    layers.append(nn.Linear(hidden, classes))
    return nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["single", "ddp"], default="single")
    ap.add_argument("--data", default="data/mnist")
    ap.add_argument("--limit", type=int, default=12000)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init", default=os.environ.get("INIT_METHOD", "tcp://127.0.0.1:29500"))
    ap.add_argument("--rank", type=int, default=int(os.environ.get("RANK", "0")))
    ap.add_argument("--world", type=int, default=int(os.environ.get("WORLD_SIZE", "1")))
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rank, world = (a.rank, a.world) if a.mode == "ddp" else (0, 1)
    if a.batch_size % world:
        sys.exit(f"ddp_torch_peer: --batch-size {a.batch_size} is not a multiple of {world} ranks")
    local_batch = a.batch_size // world

    t0 = time.perf_counter()
    x, y = load_mnist(a.data, a.limit)
    model = mlp_resnet()
    if a.mode == "ddp":
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=a.init, rank=rank, world_size=world)
        # Same initial weights everywhere (DDP broadcasts rank 0's too).
        model = nn.parallel.DistributedDataParallel(model)
    n = len(x)
    steps = -(-((n + world - 1 - rank) // world) // local_batch)  # this rank's steps per epoch
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps * a.epochs, eta_min=0.0)
    if rank == 0:
        print(f"training torch mlp ({sum(p.numel() for p in model.parameters())} parameters) on "
              f"{a.data} ({n} train samples) with adam, lr {a.lr}, batch {a.batch_size}"
              f"{f' = {world} ranks x {local_batch}' if world > 1 else ''}, "
              f"{torch.get_num_threads()} threads per process, mode {a.mode}; "
              f"torch {torch.__version__}; set up in {time.perf_counter() - t0:.1f} s", flush=True)

    for epoch in range(1, a.epochs + 1):
        g = torch.Generator().manual_seed(a.seed * 1000003 + epoch)
        order = torch.randperm(n, generator=g)[rank::world]
        model.train()
        if a.mode == "ddp":
            dist.barrier()
        t = time.perf_counter()
        loss_sum, correct, seen = 0.0, 0, 0
        for i in range(0, len(order), local_batch):
            idx = order[i:i + local_batch]
            xb, yb = x[idx], y[idx]
            logits = model(xb)
            loss = F.cross_entropy(logits, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.item() * len(idx)
            correct += (logits.argmax(1) == yb).sum().item()
            seen += len(idx)
        secs = time.perf_counter() - t
        if a.mode == "ddp":
            s = torch.tensor([loss_sum, float(correct), float(seen)], dtype=torch.float64)
            dist.all_reduce(s)
            loss_sum, correct, seen = s[0].item(), int(s[1].item()), int(s[2].item())
        if rank == 0:
            print(f"epoch {epoch}/{a.epochs}: train loss {loss_sum / seen:.4f} acc "
                  f"{100.0 * correct / seen:.2f}% | {secs:.1f} s, {seen / secs:.0f} samples/s"
                  f"{f' ({world} ranks)' if world > 1 else ''}", flush=True)
    if a.mode == "ddp":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
