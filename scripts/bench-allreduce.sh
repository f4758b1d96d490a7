#!/usr/bin/env bash
# All-reduce bandwidth of quill-dist's MPI communicator against Open MPI's own MPI_Allreduce on
# the same sizes (4 KiB..64 MiB of f32, sum), both under `mpirun -np 2` on this machine: prints
# bytes, both medians, bus bandwidth (2(n-1)/n * bytes / time) and the ratio of medians.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-mpi.sh
rounds="${1:-20}"
cargo build --release -q -p quill-dist --features mpi --bin quill-dist-check
mkdir -p target/bench
mpicc -O2 -o target/bench/allreduce_peer crates/quill-cli/src/bench/allreduce_peer.c
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun --oversubscribe -np 2 target/release/quill-dist-check bench "$rounds" | grep -v ok > target/bench/quill.txt
mpirun --oversubscribe -np 2 target/bench/allreduce_peer "$rounds" > target/bench/mpi.txt
echo "bytes        quill_ms   mpi_ms   quill_GB/s  mpi_GB/s  quill/mpi_time"
join target/bench/quill.txt target/bench/mpi.txt | awk '{ printf "%-10d %9.3f %8.3f %10.2f %9.2f %10.2f\n", $1, $2*1e3, $3*1e3, $1/$2/1e9, $1/$3/1e9, $2/$3 }'
