#!/usr/bin/env bash
# All-reduce bandwidth of quill-dist's MPI communicator against Open MPI's own MPI_Allreduce on
# the same sizes (4 KiB..64 MiB of f32, sum), all under `mpirun -np 2` on this machine: prints
# bytes, the medians of quill, of MPI_Allreduce and of MPI_Iallreduce polled by MPI_Test (how
# quill drives it, for its deadline), the algorithm bandwidth (bytes / time) and the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-mpi.sh
rounds="${1:-20}"
cargo build --release -q -p quill-dist --features mpi --bin quill-dist-check
mkdir -p target/bench
mpicc -O2 -o target/bench/allreduce_peer crates/quill-cli/src/bench/allreduce_peer.c
mpicc -O2 -DNONBLOCKING -o target/bench/allreduce_peer_nb crates/quill-cli/src/bench/allreduce_peer.c
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun --oversubscribe -np 2 target/release/quill-dist-check bench "$rounds" | grep -v ok > target/bench/quill.txt
mpirun --oversubscribe -np 2 target/bench/allreduce_peer "$rounds" > target/bench/mpi.txt
mpirun --oversubscribe -np 2 target/bench/allreduce_peer_nb "$rounds" > target/bench/mpi_nb.txt
echo "bytes        quill_us  mpi_us  mpi_nb_us  quill_GB/s  mpi_GB/s  quill/mpi  quill/mpi_nb"
join target/bench/quill.txt target/bench/mpi.txt | join - target/bench/mpi_nb.txt |
    awk '{ printf "%-10d %9.1f %7.1f %9.1f %11.2f %9.2f %10.2f %12.2f\n", $1, $2*1e6, $3*1e6, $4*1e6, $1/$2/1e9, $1/$3/1e9, $2/$3, $2/$4 }'
