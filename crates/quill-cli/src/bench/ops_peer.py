# The peer side of `quill bench ops`: NumPy, and PyTorch when it imports. Reads "case lib reps"
# lines on stdin, runs the same f32 work as quill and answers with the seconds of each rep, so
# that quill and its peers alternate within one run.
import os
import sys
import time

# Idle worker threads must sleep, not spin: OpenBLAS and OpenMP threads otherwise busy-wait
# after each call and take the cores from quill's next timing (set before the libraries load).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
# The same thread count as quill: RAYON_NUM_THREADS when set, else every core.
THREADS = int(os.environ.get("RAYON_NUM_THREADS") or os.cpu_count() or 1)
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(THREADS))

import numpy as np  # noqa: E402

try:
    import torch

    torch.set_num_threads(THREADS)
except Exception:  # noqa: BLE001 - any import failure means "no PyTorch peer"
    torch = None

rng = np.random.default_rng(0)
N = 1 << 24
x = rng.random(N, dtype=np.float32)
y = rng.random(N, dtype=np.float32)
m = rng.random((4096, 4096), dtype=np.float32)
col = rng.random((4096, 1), dtype=np.float32)
# (m, k, n) of each matmul case; ops.rs lists the same.
shapes = {f"sgemm_{n}": (n, n, n) for n in (64, 128, 256, 512, 1024, 2048, 4096)}
shapes.update(
    {
        "linear_32x512x512": (32, 512, 512),
        "linear_128x784x512": (128, 784, 512),
        "linear_1024x128x384": (1024, 128, 384),
    }
)
mats = {
    name: (rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32))
    for name, (m, k, n) in shapes.items()
}
ba = rng.random((64, 128, 128), dtype=np.float32)
bb = rng.random((64, 128, 128), dtype=np.float32)
into = np.empty_like(x)

np_cases = {
    "add_new": lambda: x + y,
    "add_into": lambda: np.add(x, y, out=into),
    "add_bcast": lambda: m + col,
    "exp": lambda: np.exp(x),
    "sum_last": lambda: m.sum(axis=1),
    "sum_first": lambda: m.sum(axis=0),
    "max_last": lambda: m.max(axis=1),
    "bmm": lambda: ba @ bb,
}


def repeat(f, m, k, n):
    """Runs `f` as many times per timing as ops.rs does for an (m x k) @ (k x n) product."""
    inner = max(1, (1 << 25) // (2 * m * k * n))
    if inner == 1:
        return f

    def run():
        for _ in range(inner):
            f()

    return run


for name, (p, q) in mats.items():
    np_cases[name] = repeat((lambda p, q: lambda: p @ q)(p, q), *shapes[name])

t_cases = {}
if torch is not None:
    tx, ty, tm, tcol = (torch.from_numpy(v) for v in (x, y, m, col))
    tinto = torch.empty_like(tx)
    tba, tbb = torch.from_numpy(ba), torch.from_numpy(bb)
    t_cases = {
        "add_new": lambda: tx + ty,
        "add_into": lambda: torch.add(tx, ty, out=tinto),
        "add_bcast": lambda: tm + tcol,
        "exp": lambda: torch.exp(tx),
        "sum_last": lambda: tm.sum(dim=1),
        "sum_first": lambda: tm.sum(dim=0),
        "max_last": lambda: tm.max(dim=1).values,
        "bmm": lambda: tba @ tbb,
    }
    for name, (p, q) in mats.items():
        f = (lambda p, q: lambda: p @ q)(torch.from_numpy(p), torch.from_numpy(q))
        t_cases[name] = repeat(f, *shapes[name])
    # bf16 products (NumPy has none): the f32 inputs rounded to bf16, as quill's case does.
    bf = {f"bf16_{n}": (n, n, n) for n in (256, 512, 1024)}
    bf.update({"bf16_" + k: v for k, v in shapes.items() if k.startswith("linear_")})
    for name, (m_, k_, n_) in bf.items():
        p = torch.from_numpy(rng.random((m_, k_), dtype=np.float32)).bfloat16()
        q = torch.from_numpy(rng.random((k_, n_), dtype=np.float32)).bfloat16()
        t_cases[name] = repeat((lambda p, q: lambda: torch.matmul(p, q))(p, q), m_, k_, n_)



def conv_case(name):
    """The PyTorch side of a conv case, built from its name (`ConvLayer::key` in ops.rs):
    conv_n{N}_c{C}_o{O}_hw{HW}_k{K}_s{S}_p{P}_d{D}_g{G}_fwd or ..._fwd_bwd."""
    parts = name.split("_")
    v = {}
    for p in parts[1:10]:
        key = p.rstrip("0123456789")
        v[key] = int(p[len(key) :])
    x = torch.rand(v["n"], v["c"], v["hw"], v["hw"], requires_grad=True)
    w = torch.rand(v["o"], v["c"] // v["g"], v["k"], v["k"], requires_grad=True)
    args = dict(stride=v["s"], padding=v["p"], dilation=v["d"], groups=v["g"])
    conv = torch.nn.functional.conv2d
    with torch.no_grad():
        gy = torch.rand_like(conv(x, w, **args))

    def fwd():
        with torch.no_grad():
            return conv(x, w, **args)

    def fwd_bwd():
        conv(x, w, **args).backward(gy)
        x.grad = None
        w.grad = None

    return fwd_bwd if name.endswith("_fwd_bwd") else fwd


version = "numpy " + np.__version__ + (" torch " + torch.__version__ if torch is not None else "")
print("ready " + version, flush=True)
for line in sys.stdin:
    name, lib, reps = line.split()
    if torch is not None and lib == "torch" and name.startswith("conv_") and name not in t_cases:
        t_cases[name] = conv_case(name)
    f = (np_cases if lib == "numpy" else t_cases).get(name)
    out = []
    for _ in range(int(reps)):
        if f is None:
            break
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    print(" ".join(f"{v:.9f}" for v in out), flush=True)
