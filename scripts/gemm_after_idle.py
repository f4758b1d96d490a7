"""Round-by-round two-thread GEMM speed of one gemm_bench build, each round a few single
products (as `gemm_bench.py` times every product from 256^3 up, one product being over its
2^25-flop budget) followed by `--idle` seconds of idle. A question for the fork-join in
`crates/quill-cpu/src/matmul/par.rs`, where the caller runs whatever parts a helper has not
claimed yet, so a helper the scheduler runs late (or on the caller's core) costs the product
its second thread.

    python scripts/gemm_after_idle.py --bin target/release/examples/gemm_bench \
        [--idle 0.3] [--rounds 12] [--shape 200x512x1000] [--dtype f64] [--kernel avx2]

Prints each round's GF/s (median of three single products). On the 2-vCPU Zen 4 VM of
2026-11-30, f64 200 x 512 x 1000 on the AVX2 kernel came out bimodal, with or without idle:
runs of rounds at 90-102 GF/s (both threads), runs at 40-51 (one thread's speed) and some at
about 77, while NumPy, timed between the same rounds by `gemm_bench.py`, kept 83-99 GF/s.
In the slow rounds the helper ran on the caller's core (logged with `sched_getcpu`).
"""

import argparse
import os
import statistics
import subprocess
import time

ap = argparse.ArgumentParser()
ap.add_argument("--bin", required=True, help="a gemm_bench build")
ap.add_argument("--idle", type=float, default=0.3)
ap.add_argument("--rounds", type=int, default=12)
ap.add_argument("--shape", default="200x512x1000")
ap.add_argument("--dtype", default="f64")
ap.add_argument("--kernel", default=None)
args = ap.parse_args()
os.environ["RAYON_NUM_THREADS"] = "2"
if args.kernel:
    os.environ["QUILL_MATMUL_KERNEL"] = args.kernel
m, k, n = (int(x) for x in args.shape.split("x"))
p = subprocess.Popen([args.bin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
assert p.stdout.readline().strip() == "ready"
line = f"{args.dtype} {m} {k} {n} 3 1\n"
rates = []
for _ in range(args.rounds):
    for _ in range(2):  # an untimed burst first, as gemm_bench.py does
        p.stdin.write(line)
        p.stdin.flush()
        t = statistics.median(float(x) for x in p.stdout.readline().split())
    rates.append(f"{2 * m * k * n / t / 1e9:.0f}")
    time.sleep(args.idle)
p.stdin.close()
p.wait()
print(f"{args.dtype} {args.shape}, 2 threads, idle {args.idle} s between rounds: GF/s " + " ".join(rates))
