# The NumPy side of `quill bench linalg`: the same matrices as quill (a symmetric positive-
# definite 512 x 512 f64 built the same way, a right-hand side of 512 x 16), each case timed
# per rep and answered as seconds, alternating with quill in one run.
import os
import sys
import time

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

N = 512
i = np.arange(N * N, dtype=np.float64).reshape(N, N)
g = np.sin(i * 0.37) + np.cos(i.T * 0.11)
a = g @ g.T / N + np.eye(N)
b = np.cos(np.arange(N * 16, dtype=np.float64)).reshape(N, 16)
z = (g[:256, :256] + 1j * a[:256, :256]).copy()
z64 = z.astype(np.complex64)
flat = g.reshape(-1)[:65536]
sig = flat + 1j * flat[::-1]
rows = g.reshape(64, 4096).copy()
big64 = (np.tile(g, (2, 2)) + 1j * np.tile(a, (2, 2))).astype(np.complex64)
image = np.tile(g, (4, 4))
long = image.reshape(-1)[: 1 << 20]
long = (long + 1j * long[::-1]).astype(np.complex64)
cases = {
    "solve": lambda: np.linalg.solve(a, b),
    "inv": lambda: np.linalg.inv(a),
    "det": lambda: np.linalg.slogdet(a),
    "cholesky": lambda: np.linalg.cholesky(a),
    "qr": lambda: np.linalg.qr(a),
    "eigh": lambda: np.linalg.eigh(a),
    "svd": lambda: np.linalg.svd(g),
    "svdvals": lambda: np.linalg.svd(g, compute_uv=False),
    "cmatmul": lambda: z @ z,
    "cmatmul64": lambda: z64 @ z64,
    "fft": lambda: np.fft.fft(sig),
    "rfft": lambda: np.fft.rfft(rows),
    "cmatmul1024": lambda: big64 @ big64,
    "fft20": lambda: np.fft.fft(long),
    "rfft2": lambda: np.fft.rfftn(image),
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
