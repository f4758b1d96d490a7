"""Replays quill's recurrent layers in PyTorch (optional; not part of the test run).

    cargo run -p quill --example rnn_reference_dump -- /tmp/rnn.safetensors
    python crates/quill/tests/reference/rnn_torch.py /tmp/rnn.safetensors

Loads quill's parameters by name into torch.nn.RNN / LSTM / GRU (f64), runs the same input and
initial states, and compares the outputs, final states and every gradient.
"""
import json
import struct
import sys

import numpy as np
import torch

DTYPES = {"F64": np.float64, "F32": np.float32, "I64": np.int64}


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(body[a:b], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
    return out


def main(path):
    t = load(path)
    worst = 0.0
    for kind in ["rnn_tanh", "rnn_relu", "lstm", "gru"]:
        g = {k[len(kind) + 1 :]: torch.from_numpy(v.copy()) for k, v in t.items() if k.startswith(kind + ".")}
        params = {k[len("param.") :]: v for k, v in g.items() if k.startswith("param.")}
        i, h = params["weight_ih_l0"].shape[1], params["weight_hh_l0"].shape[1]
        layers = sum(1 for k in params if k.startswith("weight_ih_l"))
        if kind == "lstm":
            m = torch.nn.LSTM(i, h, num_layers=layers)
        elif kind == "gru":
            m = torch.nn.GRU(i, h, num_layers=layers)
        else:
            m = torch.nn.RNN(i, h, num_layers=layers, nonlinearity=kind.split("_")[1])
        m = m.double()
        m.load_state_dict(params)
        x = g["x"].clone().requires_grad_(True)
        if kind == "lstm":
            y, (hn, cn) = m(x, (g["h0"], g["c0"]))
            loss = (y * g["w"]).sum() + hn.sum() + cn.sum()
        else:
            y, hn = m(x, g["h0"])
            loss = (y * g["w"]).sum() + hn.sum()
        loss.backward()
        checks = [("out", y), ("h_n", hn), ("grad.x", x.grad)]
        if kind == "lstm":
            checks.append(("c_n", cn))
        for name, p in m.named_parameters():
            checks.append(("grad." + name, p.grad))
        for name, v in checks:
            d = (v.detach() - g[name]).abs().max().item()
            worst = max(worst, d)
            status = "ok" if d < 1e-9 else "MISMATCH"
            print(f"{kind:9s} {name:22s} max|diff| {d:.2e} {status}")
    print(f"worst {worst:.2e}: {'PASS' if worst < 1e-9 else 'FAIL'}")
    return 0 if worst < 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "rnn_reference.safetensors"))
