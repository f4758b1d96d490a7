# The NumPy side of `quill bench`: reads "case reps" lines on stdin, runs the same work as quill
# and answers with the seconds of each rep, so both sides alternate in one run.
import os
import sys
import time

# Idle OpenBLAS threads must sleep, not spin, or they take the cores from quill's next timing.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

a = np.arange(256 ** 3, dtype=np.float32).reshape(256, 256, 256)
cases = {
    "compact_permuted": lambda: np.ascontiguousarray(a.transpose(2, 0, 1)),
    "compact_stepped": lambda: np.ascontiguousarray(a[::2, 1::3, ::-1]),
    "copy_contiguous": lambda: a.copy(),
    "fill": lambda: a.fill(1.0),
}
print("ready numpy " + np.__version__, flush=True)
for line in sys.stdin:
    name, reps = line.split()
    out = []
    for _ in range(int(reps)):
        t = time.perf_counter()
        cases[name]()
        out.append(time.perf_counter() - t)
    print(" ".join(f"{x:.9f}" for x in out), flush=True)
