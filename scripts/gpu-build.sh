#!/usr/bin/env bash
# Builds, on a machine without CUDA, what a GPU machine runs (../shared/GPU.md): the release
# test binaries of the `cuda` feature and the quill binary with CUDA, stripped, into .gpu-bin/
# (git-ignored). On the GPU machine:
#   export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/nvidia/lib64:$LD_LIBRARY_PATH
#   for t in .gpu-bin/test-*; do REQUIRE_CUDA=1 $t --test-threads=1 || exit 1; done
#   .gpu-bin/quill train --device cuda --epochs 1
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu-bin && mkdir -p .gpu-bin
cargo test --release -p quill -p quill-cuda --features quill/cuda --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys, shutil, os
for line in sys.stdin:
    m = json.loads(line)
    exe = m.get("executable")
    if m.get("reason") == "compiler-artifact" and exe and m["profile"]["test"]:
        name = "test-" + os.path.basename(exe).rsplit("-", 1)[0]
        shutil.copy(exe, ".gpu-bin/" + name)
        print(name)
'
cargo build --release -p quill-cli --features cuda
cp target/release/quill .gpu-bin/quill
strip .gpu-bin/* 2>/dev/null || true
du -sh .gpu-bin
