#!/usr/bin/env bash
# Installs what `--features mpi` needs: Open MPI (mpicc, mpirun, headers: Debian's
# libopenmpi-dev and openmpi-bin) and libclang (rsmpi's mpi-sys generates its bindings with
# bindgen). Does nothing when both are present; uses sudo when not root; fails with a clear
# message when it cannot install.
set -euo pipefail
have_libclang() {
    ldconfig -p 2>/dev/null | grep -q 'libclang' || ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1
}
if command -v mpicc >/dev/null && command -v mpirun >/dev/null && have_libclang; then
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "install-mpi.sh: no apt-get here; install an MPI library with mpicc and mpirun (Open MPI or MPICH) and libclang by hand" >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null; then sudo="sudo"; else
        echo "install-mpi.sh: not root and no sudo: install libopenmpi-dev openmpi-bin libclang-dev as root" >&2
        exit 1
    fi
fi
$sudo apt-get update -q || { echo "install-mpi.sh: apt-get update failed" >&2; exit 1; }
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q libopenmpi-dev openmpi-bin libclang-dev \
    || { echo "install-mpi.sh: could not install libopenmpi-dev openmpi-bin libclang-dev" >&2; exit 1; }
