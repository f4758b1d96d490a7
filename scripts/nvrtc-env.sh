#!/usr/bin/env bash
# Provide NVRTC (libnvrtc.so.13) on a machine without a CUDA toolkit, so CI can compile every
# quill-cuda kernel source (crates/quill-cuda/tests/nvrtc_compile.rs) with no GPU.
#
# Creates (once) the venv `.nvrtc-venv` in the repository root, installs NVIDIA's NVRTC wheel
# into it, and prints ONLY the directory that holds libnvrtc.so.13 on stdout; progress goes to
# stderr. Usage:
#   export LD_LIBRARY_PATH="$(scripts/nvrtc-env.sh):${LD_LIBRARY_PATH:-}"
#   REQUIRE_NVRTC=1 cargo test -p quill-cuda --test nvrtc_compile
#
# The version is pinned to CUDA 13.0 to match the GPU machine's driver (a newer NVRTC may emit
# PTX with an ISA version that a 13.0 driver refuses to JIT).
set -euo pipefail

NVRTC_VERSION="${NVRTC_VERSION:-13.0.88}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.nvrtc-venv"
PY="${PYTHON:-python3}"

log() { echo "nvrtc-env: $*" >&2; }

if [ ! -x "$VENV/bin/python" ]; then
    log "creating venv $VENV"
    "$PY" -m venv "$VENV" >&2
fi

# The installed version, empty when the wheel is absent; skip pip (and the network) when current.
have="$("$VENV/bin/python" -m pip show nvidia-cuda-nvrtc 2>/dev/null | sed -n 's/^Version: //p' || true)"
if [ "$have" != "$NVRTC_VERSION" ]; then
    log "installing nvidia-cuda-nvrtc==$NVRTC_VERSION"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        "nvidia-cuda-nvrtc==$NVRTC_VERSION" >&2
else
    log "nvidia-cuda-nvrtc $have already installed"
fi

# Locate the library rather than hard-coding the wheel layout (nvidia/cu13/lib for 13.x).
lib="$(find "$VENV" -name 'libnvrtc.so.13' -print -quit 2>/dev/null || true)"
if [ -z "$lib" ]; then
    log "error: libnvrtc.so.13 not found under $VENV after install"
    exit 1
fi
dir="$(cd "$(dirname "$lib")" && pwd)"
log "libnvrtc.so.13 is in $dir"
echo "$dir"
