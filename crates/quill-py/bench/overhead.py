"""Python call overhead of quill against NumPy, alternating in one run (medians, ratios):
``a + b`` on 100 float32 values (the cost of a call) and on (1024, 1024) float32 (the work).

    .py-venv/bin/python crates/quill-py/bench/overhead.py [--rounds N]
"""
import sys
import timeit

import numpy as np

import quill.backend_ndarray as nd


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 15
    cases = []
    for name, shape, number in [("a + b, 100 float32", (100,), 20000),
                                ("a + b, (1024, 1024) float32", (1024, 1024), 50)]:
        x = np.random.rand(*shape).astype(np.float32)
        y = np.random.rand(*shape).astype(np.float32)
        qa, qb = nd.NDArray(x), nd.NDArray(y)
        assert np.array_equal((qa + qb).numpy(), x + y)
        cases.append((name, number, lambda qa=qa, qb=qb: qa + qb, lambda x=x, y=y: x + y))
    print(f"quill vs NumPy {np.__version__}, {rounds} rounds, medians per call")
    print("| case | quill | NumPy | quill / NumPy time |")
    print("|---|---|---|---|")
    for name, number, q, n in cases:
        tq, tn = [], []
        for _ in range(rounds):
            tq.append(timeit.timeit(q, number=number) / number)
            tn.append(timeit.timeit(n, number=number) / number)
        mq, mn = median(tq), median(tn)
        unit, scale = ("us", 1e6) if mq < 1e-3 else ("ms", 1e3)
        print(f"| {name} | {mq * scale:.2f} {unit} | {mn * scale:.2f} {unit} | {mq / mn:.2f}x |")


if __name__ == "__main__":
    main()
