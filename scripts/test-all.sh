#!/usr/bin/env bash
# Every test of quill (the README's test command; .ci/run calls it):
#  0. formatting (`cargo fmt --check`), lints (`cargo clippy -D warnings`, with and without the
#     `cuda` feature, including the workspace's: every unsafe operation in its own `unsafe`
#     block with a `// SAFETY:` comment) and the API docs (`cargo doc`, warnings denied): about
#     a minute, first, so stale text or a lint fails fast;
#  1. the workspace on the CPU, then quill-dist with MPI (Open MPI installed by
#     scripts/install-mpi.sh when missing) and with NCCL (built without CUDA), and
#     scripts/multihost-netns.sh: `quill train --distributed` across two network namespaces over
#     TCP (needs root; REQUIRE_NETNS=1 here, so a skip fails CI);
#  2. the `cuda` feature built and its GPU tests run (each skips cleanly without a GPU;
#     REQUIRE_CUDA=1 turns a skip into a failure on GPU machines);
#  3. every CUDA kernel source compiled by NVRTC for sm_80 and sm_90, with NVRTC from NVIDIA's
#     pip wheel (scripts/nvrtc-env.sh), so a kernel that does not compile fails CI without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "cargo not found: install Rust (https://rustup.rs)" >&2; exit 1; }
for tool in fmt clippy; do
    if ! cargo "$tool" --version >/dev/null 2>&1; then
        component=$([ "$tool" = fmt ] && echo rustfmt || echo clippy)
        command -v rustup >/dev/null && rustup component add "$component" || {
            echo "cargo $tool is missing: install it with 'rustup component add $component'" >&2
            exit 1
        }
    fi
done
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy -p quill-array -p quill-cuda -p quill --features cuda --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace
cargo test --workspace
# The lessons in crates/quill/examples, each run (the training ones for a few steps).
for ex in views broadcasting autograd torch_import; do
    cargo run -q -p quill --profile test --example "$ex" >/dev/null
done
cargo run -q -p quill --profile test --example mnist_mlp -- 30 >/dev/null
cargo run -q -p quill --profile test --example mnist_cnn -- 10 >/dev/null
cargo run -q -p quill --profile test --example char_lm -- 3 >/dev/null
# Data-parallel training over MPI: Open MPI installed if missing, then quill-dist's tests, which
# launch `mpirun --oversubscribe -np 2` (and 3) over loopback.
scripts/install-mpi.sh
cargo test -p quill-dist --features mpi
cargo test -p quill-cli --features mpi --test train_distributed
# Two "hosts" on this machine: network namespaces joined by a veth pair, Open MPI over TCP only,
# the remote rank started through `ip netns exec` as mpirun's rsh agent: parameters against
# 1 rank and against loopback, a remote rank killed mid-training. Reuses the two binaries just
# built (about 15 s).
target_dir="${CARGO_TARGET_DIR:-target}"
REQUIRE_NETNS=1 QUILL_BIN="$target_dir/debug/quill" QUILL_DIST_CHECK_BIN="$target_dir/debug/quill-dist-check" \
    scripts/multihost-netns.sh
# The NCCL communicator: built with no CUDA installed (cudarc loads CUDA and NCCL at run time);
# its GPU tests skip without a GPU and libnccl, and fail instead under REQUIRE_CUDA=1.
cargo test -p quill-dist --features nccl,mpi --test nccl
cargo test -p quill --features cuda --test cuda
nvrtc_dir="$(scripts/nvrtc-env.sh)"
LD_LIBRARY_PATH="$nvrtc_dir:${LD_LIBRARY_PATH:-}" REQUIRE_NVRTC=1 \
    cargo test -p quill-cuda --test nvrtc_compile --test kernel_abi
# 4. The Python package: built into .py-venv with maturin, tested with pytest (NumPy as the
#    oracle, hypothesis for random view chains).
if [ ! -x .py-venv/bin/python ]; then
    python3 -m venv .py-venv
fi
.py-venv/bin/pip install -q "maturin>=1.9,<2" numpy pytest hypothesis
(cd crates/quill-py && VIRTUAL_ENV="$PWD/../../.py-venv" ../../.py-venv/bin/maturin develop --release -q)
.py-venv/bin/python -m pytest crates/quill-py/tests -q
