"""How a threaded GEMM's CPU time splits between the threads of a `gemm_bench` build
(`crates/quill-cpu/examples/gemm_bench.rs`): runs one case and prints each thread's CPU ticks
(utime + stime from /proc, Linux only) spent on it, largest first. With two threads, a helper
that does its share shows about as many ticks as the calling thread; a helper near zero means
the caller ran (nearly) every part itself.

    python scripts/gemm_thread_share.py BIN [--kernel avx2] [--threads 2] [--case f32x512x512x512] [--inner 20]

Diagnostic only; not part of any test run.
"""

import argparse
import glob
import os
import subprocess

ap = argparse.ArgumentParser()
ap.add_argument("bin")
ap.add_argument("--kernel", default=None)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--case", default="f32x512x512x512", help="DTYPExMxKxN")
ap.add_argument("--inner", type=int, default=20)
args = ap.parse_args()

env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
if args.kernel:
    env["QUILL_MATMUL_KERNEL"] = args.kernel
dt, m, k, n = args.case.split("x")
p = subprocess.Popen([args.bin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
assert p.stdout.readline().strip() == "ready"


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
before = ticks()
p.stdin.write(f"{dt} {m} {k} {n} 3 {args.inner}\n")
p.stdin.flush()
secs = [float(x) for x in p.stdout.readline().split()]
after = ticks()
gflops = 2 * int(m) * int(k) * int(n) * args.inner / min(secs) / 1e9
share = sorted((after[t] - before.get(t, 0) for t in after), reverse=True)
print(f"{args.case} kernel {args.kernel or 'best'} {args.threads} threads: best {gflops:.0f} GF/s, ticks per thread {share}")
p.stdin.close()
p.wait()
