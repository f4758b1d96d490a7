# The peer side of `quill bench cuda`: the same cases in PyTorch on GPU 0, each followed by
# torch.cuda.synchronize(). Answers "NAME torch REPS" with the seconds of each rep.
import sys
import time

try:
    import torch

    ok = torch.cuda.is_available()
except Exception:  # noqa: BLE001 - any import failure means "no PyTorch peer"
    torch, ok = None, False

cases = {}
if ok:
    dev = torch.device("cuda:0")
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.rand(1 << 28, device=dev, generator=g)
    y = torch.rand(1 << 28, device=dev, generator=g)
    cube = torch.rand(512, 512, 512, device=dev, generator=g)
    m = torch.rand(8192, 8192, device=dev, generator=g)
    col = torch.rand(8192, 1, device=dev, generator=g)
    a4, b4 = torch.rand(4096, 4096, device=dev), torch.rand(4096, 4096, device=dev)
    a8, b8 = torch.rand(8192, 8192, device=dev), torch.rand(8192, 8192, device=dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    cases = {
        "copy": lambda: x.clone(),
        "compact": lambda: cube.permute(2, 0, 1).contiguous(),
        "add": lambda: x + y,
        "badd": lambda: m + col,
        "exp": lambda: torch.exp(x),
        "sum_last": lambda: m.sum(1),
        "sum_first": lambda: m.sum(0),
        "sgemm_4096": lambda: a4 @ b4,
        "sgemm_8192": lambda: a8 @ b8,
    }
    for f in cases.values():
        f()
    torch.cuda.synchronize()

version = ("torch " + torch.__version__ + " cuda") if ok else "none"
print("ready " + version, flush=True)
for line in sys.stdin:
    name, lib, reps = line.split()
    f = cases.get(name)
    out = []
    for _ in range(int(reps)):
        if f is None:
            break
        t = time.perf_counter()
        f()
        torch.cuda.synchronize()
        out.append(time.perf_counter() - t)
    print(" ".join(f"{v:.9f}" for v in out), flush=True)
