"""GEMM timings of one or more builds of `crates/quill-cpu/examples/gemm_bench.rs` (say before and
after a change) against NumPy (f32) and PyTorch (f32 and bf16), alternating case by case and
round by round in one process so that the machine's drifting load hits all alike. Reports
GFLOP/s medians and the median over rounds of each round's time ratio (>1: quill faster; with
several builds, also each later build against the first).

    python scripts/gemm_bench.py --bin before=/tmp/base/gemm_bench --bin after=target/release/examples/gemm_bench \
        [--threads 2] [--rounds 7] [--kernel avx2] [--only f32|bf16|f64] [--shapes 64x512x512,...]
        [--layout at|bt]

--kernel avx2 forces quill's AVX2 kernel (QUILL_MATMUL_KERNEL) and OpenBLAS's Haswell kernels
(OPENBLAS_CORETYPE), a like-for-like AVX2 comparison on an AVX-512 machine. Optional; not part of
any test run.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--bin", action="append", required=True, help="NAME=PATH of a gemm_bench build")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--rounds", type=int, default=7)
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--kernel", default=None)
ap.add_argument("--only", default=None)
ap.add_argument("--shapes", default=None, help="comma-separated MxKxN list replacing the default cases")
ap.add_argument(
    "--layout", default="", choices=["", "at", "bt"], help="A (at) or B (bt) stored transposed, read as a view"
)
args = ap.parse_args()

T = str(args.threads)
os.environ.update(OPENBLAS_NUM_THREADS=T, OMP_NUM_THREADS=T, MKL_NUM_THREADS=T, RAYON_NUM_THREADS=T)
if args.kernel:
    os.environ["QUILL_MATMUL_KERNEL"] = args.kernel
    if args.kernel == "avx2":
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"

import numpy as np  # noqa: E402

try:
    import torch

    torch.set_num_threads(args.threads)
except Exception:  # noqa: BLE001
    torch = None

F32 = [(n, n, n) for n in (64, 128, 256, 512, 1024)] + [(32, 512, 512), (128, 784, 512), (1024, 128, 384)]
BF16 = [(n, n, n) for n in (64, 128, 256, 512, 1024)] + [(32, 512, 512), (128, 784, 512), (1024, 128, 384)]
if args.shapes:
    custom = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    F32, BF16 = custom, custom
cases = [("f32", s) for s in F32] * (args.only in (None, "f32")) + [("bf16", s) for s in BF16] * (
    args.only in (None, "bf16")
)
# f64 (NumPy's default dtype) only when asked for: the figures are f32 and bf16.
cases += [("f64", s) for s in F32] * (args.only == "f64")

bins = []
for spec in args.bin:
    name, path = spec.split("=", 1)
    p = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready", name
    bins.append((name, p))


def quill(p, dt, m, k, n, inner):
    p.stdin.write(f"{dt}{args.layout} {m} {k} {n} {args.reps} {inner}\n")
    p.stdin.flush()
    return [float(x) for x in p.stdout.readline().split()]


def timed(f, inner):
    f()
    out = []
    for _ in range(args.reps):
        t = time.perf_counter()
        for _ in range(inner):
            f()
        out.append(time.perf_counter() - t)
    return out


rng = np.random.default_rng(0)
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(
    f"CPU {cpu}, {args.threads} threads, kernel {args.kernel or 'best'}, "
    f"numpy {np.__version__}{' (OPENBLAS_CORETYPE=Haswell)' if args.kernel == 'avx2' else ''}, "
    f"torch {torch.__version__ if torch else '-'}; "
    f"{args.rounds} rounds x {args.reps} reps{', A transposed' if args.layout == 'at' else ''}{', B transposed' if args.layout == 'bt' else ''}"
)
names = [b[0] for b in bins]
hdr = ["case"] + [f"{n} GF/s" for n in names] + ["NumPy GF/s", "torch GF/s"]
hdr += [f"{n}/NumPy" for n in names] + [f"{n}/torch" for n in names]
hdr += [f"{n}/{names[0]}" for n in names[1:]]
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
for dt, (m, k, n) in cases:
    inner = max(1, (1 << 25) // (2 * m * k * n))
    flops = 2.0 * m * k * n * inner
    fl = np.float64 if dt == "f64" else np.float32
    a = rng.random((k, m), dtype=fl).T if args.layout == "at" else rng.random((m, k), dtype=fl)
    b = rng.random((n, k), dtype=fl).T if args.layout == "bt" else rng.random((k, n), dtype=fl)
    peers = {}
    if dt in ("f32", "f64"):
        peers["NumPy"] = lambda: a @ b
        if torch is not None:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            peers["torch"] = lambda: ta @ tb
    elif torch is not None:
        ta, tb = torch.from_numpy(a).bfloat16(), torch.from_numpy(b).bfloat16()
        peers["torch"] = lambda: torch.matmul(ta, tb)
    times = {x: [] for x in names + list(peers)}
    ratios = {}
    for r in range(args.rounds):
        med = {}
        # The builds take turns going first, and each runs one untimed burst before its timed
        # runs: the first timing after the peers' pause found a cold core and ran up to 14 %
        # slower, which an A/B of two identical builds in fixed order read as a speed-up.
        for name, p in bins[r % len(bins) :] + bins[: r % len(bins)]:
            quill(p, dt, m, k, n, inner)
            ts = quill(p, dt, m, k, n, inner)
            times[name] += ts
            med[name] = statistics.median(ts)
        for pn, f in peers.items():
            ts = timed(f, inner)
            times[pn] += ts
            med[pn] = statistics.median(ts)
            # The peers' worker threads spin a while after each call (their default); let them
            # go idle before the next timing so they take no core from it.
            time.sleep(0.3)
        for x in names:
            for pn in peers:
                ratios.setdefault((x, pn), []).append(med[pn] / med[x])
        for x in names[1:]:
            ratios.setdefault(("ab", x), []).append(med[names[0]] / med[x])
    gf = lambda x: f"{flops / statistics.median(times[x]) / 1e9:.1f}" if times.get(x) else "-"  # noqa: E731
    rr = lambda key: f"{statistics.median(ratios[key]):.2f}x" if key in ratios else "-"  # noqa: E731
    row = [f"{dt} {m}x{k}x{n}"] + [gf(x) for x in names] + [gf("NumPy"), gf("torch")]
    row += [rr((x, "NumPy")) for x in names] + [rr((x, "torch")) for x in names]
    row += [rr(("ab", x)) for x in names[1:]]
    print("| " + " | ".join(row) + " |", flush=True)
for _, p in bins:
    p.stdin.close()
    p.wait()
