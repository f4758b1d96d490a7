"""How a threaded GEMM's CPU time splits between the threads of a `gemm_bench` build
(`crates/quill-cpu/examples/gemm_bench.rs`): runs one case and prints each thread's CPU ticks
(utime + stime from /proc, Linux only) spent on it, largest first. With two threads, a helper
that does its share shows about as many ticks as the calling thread; a helper near zero means
the caller ran (nearly) every part itself.

    python scripts/gemm_thread_share.py BIN [--kernel avx2] [--threads 2] [--case f32x512x512x512] [--inner 20]
        [--rounds 1] [--idle 0] [--numpy]

With `--rounds R`, R rounds each time the case (after an untimed burst, as `gemm_bench.py`
does), print that round's GF/s (median of three runs) and ticks, then idle `--idle` seconds:
a round at one thread's speed whose helper shows few ticks is one whose helper missed the
product. On the 2-vCPU Zen 4 VM of 2026-11-30, `--case f64x200x512x1000 --inner 1 --kernel
avx2 --rounds 16` came out bimodal, with or without idle: runs of rounds at 90-102 GF/s, runs
at 40-51 (one thread's speed) and some at about 77, while NumPy, timed between the same rounds
by `gemm_bench.py`, kept 83-99. A throwaway build that logged `sched_getcpu` found the helper
on the caller's core in the slow rounds; `quill-par/src/placement.rs` now moves it off.
`--numpy` times NumPy (same threads; OpenBLAS Haswell kernels with `--kernel avx2`) right after quill in
each round, and each round prints the host's steal ticks from /proc/stat: a round slow for both
points at the host, one slow for quill alone at quill.

Diagnostic only; not part of any test run.
"""

import argparse
import glob
import os
import statistics
import subprocess
import time

ap = argparse.ArgumentParser()
ap.add_argument("bin")
ap.add_argument("--kernel", default=None)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--case", default="f32x512x512x512", help="DTYPExMxKxN")
ap.add_argument("--inner", type=int, default=20)
ap.add_argument("--rounds", type=int, default=1)
ap.add_argument("--idle", type=float, default=0.0)
ap.add_argument("--numpy", action="store_true", help="also time NumPy in each round, right after")
args = ap.parse_args()

env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
if args.kernel:
    env["QUILL_MATMUL_KERNEL"] = args.kernel
dt, m, k, n = args.case.split("x")
if args.numpy:
    T = str(args.threads)
    os.environ.update(OPENBLAS_NUM_THREADS=T, OMP_NUM_THREADS=T)
    if args.kernel == "avx2":
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"
    import numpy as np

    rng = np.random.default_rng(0)
    na = rng.standard_normal((int(m), int(k))).astype({"f64": "float64"}.get(dt, "float32"))
    nb = rng.standard_normal((int(k), int(n))).astype({"f64": "float64"}.get(dt, "float32"))
p = subprocess.Popen([args.bin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
assert p.stdout.readline().strip() == "ready"


def steal():
    """All CPUs' steal time (host took the vCPU away), in ticks."""
    return int(open("/proc/stat").readline().split()[8])


def numpy_secs():
    out = []
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(args.inner):
            na @ nb
        out.append(time.perf_counter() - t)
    return out


def ticks():
    out = {}
    for t in glob.glob(f"/proc/{p.pid}/task/*/stat"):
        f = open(t).read().rsplit(")", 1)[1].split()
        out[t.split("/")[4]] = int(f[11]) + int(f[12])
    return out


# One warm-up product starts the pool threads, so that they are counted from the first timing.
p.stdin.write(f"{dt} {m} {k} {n} 1 1\n")
p.stdin.flush()
p.stdout.readline()
for r in range(args.rounds):
    if args.rounds > 1:
        p.stdin.write(f"{dt} {m} {k} {n} 3 {args.inner}\n")
        p.stdin.flush()
        p.stdout.readline()
    before, stolen = ticks(), steal()
    p.stdin.write(f"{dt} {m} {k} {n} 3 {args.inner}\n")
    p.stdin.flush()
    secs = [float(x) for x in p.stdout.readline().split()]
    after, stolen = ticks(), steal() - stolen
    rate = lambda t: 2 * int(m) * int(k) * int(n) * args.inner / t / 1e9  # noqa: E731
    share = sorted((after[t] - before.get(t, 0) for t in after), reverse=True)
    if args.rounds == 1:
        print(
            f"{args.case} kernel {args.kernel or 'best'} {args.threads} threads: "
            f"best {rate(min(secs)):.0f} GF/s, ticks per thread {share}"
        )
    else:
        peer = ""
        if args.numpy:
            numpy_secs()
            peer = f", NumPy {rate(statistics.median(numpy_secs())):.0f} GF/s"
        print(
            f"round {r}: {rate(statistics.median(secs)):.0f} GF/s{peer}, ticks per thread {share}, "
            f"steal {stolen}",
            flush=True,
        )
        time.sleep(args.idle)
p.stdin.close()
p.wait()
