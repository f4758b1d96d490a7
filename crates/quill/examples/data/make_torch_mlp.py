"""Writes examples/data/torch_mlp.safetensors for `cargo run --example torch_import`: a PyTorch
Sequential(Linear(4, 8), ReLU(), Linear(8, 3)) state_dict, a fixed input and PyTorch's output
for it, in the safetensors format (written here by hand: an 8-byte little-endian header
length, a JSON header, the raw little-endian tensor bytes). Needs torch; run once:
    python crates/quill/examples/data/make_torch_mlp.py
"""
import json
import pathlib
import struct

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
x = torch.randn(5, 4)
with torch.no_grad():
    y = model(x)
tensors = dict(model.state_dict())
tensors["input"] = x
tensors["expected_output"] = y

header, blobs, offset = {}, [], 0
for name, t in tensors.items():
    data = t.detach().contiguous().to(torch.float32).numpy().tobytes()
    header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
    blobs.append(data)
    offset += len(data)
header["__metadata__"] = {"format": "pt", "source": f"torch {torch.__version__}"}
raw = json.dumps(header, separators=(",", ":")).encode()
raw += b" " * (-len(raw) % 8)
out = pathlib.Path(__file__).with_name("torch_mlp.safetensors")
out.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))
print(f"wrote {out} ({out.stat().st_size} bytes)")
