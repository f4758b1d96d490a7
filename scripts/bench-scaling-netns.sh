#!/usr/bin/env bash
# Scaling across two "hosts" (issue 54, item 3): quill's 2-rank throughput over TCP relative to
# its own one process, next to PyTorch DDP's (gloo) ratio in the same setup, in one run.
#
# Two network namespaces joined by a veth pair stand for two hosts (as in
# scripts/multihost-netns.sh, whose setup this copies). Each round measures, in an order that
# alternates between rounds:
#   quill 1 process       quill train --threads 1 (in host A's namespace)
#   quill 2 ranks         mpirun across the namespaces, Open MPI over TCP only (pml ob1,
#                         btl tcp,self), rank 1 started through an rsh agent running
#                         `ip netns exec`, --threads 1 per rank
#   torch 1 process       scripts/ddp_torch_peer.py --mode single (in host A's namespace)
#   torch DDP 2 ranks     scripts/ddp_torch_peer.py --mode ddp, gloo, init tcp://A:port, one rank
#                         in each namespace with GLOO_SOCKET_IFNAME = that namespace's veth
# The job is the same everywhere: MLPResNet (784-512, 3 blocks, BatchNorm, dropout 0.1), Adam,
# global batch 128 (2 x 64 on 2 ranks), the first LIMIT training samples, EPOCHS epochs, 1 thread
# per process. A run's number is the median samples/s of its epochs 2..EPOCHS (epoch 1 is
# warm-up; samples/s is training time only, quill's epoch line and the peer's alike); the table
# gives the median over ROUNDS runs and the ratio of each 2-rank setup to its own 1 process.
# The last lines compare the two ratios two ways: the ratio of the medians (the table's) and the
# median of the per-round ratios (2 ranks / 1 process of the same round, run next to each other).
#
# Environment: ROUNDS (default 3), LIMIT (12000), EPOCHS (5), QUILL_BIN (default
# target/release/quill, built with --features mpi when missing), PYTHON (default
# .bench-venv/bin/python, else python3; needs torch and numpy). Needs root (namespaces),
# iproute2, Open MPI; without root, or where `ip netns add` fails, it says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

say() { echo "bench-scaling: $*"; }
fail() {
    echo "bench-scaling: FAILED: $*" >&2
    exit 1
}
skip() {
    say "SKIPPED: $1"
    exit 0
}

rounds=${ROUNDS:-3}
limit=${LIMIT:-12000}
epochs=${EPOCHS:-5}
[ "$epochs" -ge 2 ] || fail "EPOCHS must be at least 2 (epoch 1 is not timed)"

[ "$(id -u)" = 0 ] || skip "not root: creating network namespaces needs root"
command -v ip >/dev/null || skip "no 'ip' command (iproute2)"
command -v mpirun >/dev/null || fail "mpirun not found: run scripts/install-mpi.sh"
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$repo/.bench-venv/bin/python" ]; then PYTHON=$repo/.bench-venv/bin/python; else PYTHON=python3; fi
fi
"$PYTHON" -c 'import torch, numpy, torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
    fail "$PYTHON cannot import torch (with gloo) and numpy: set PYTHON"
if [ -z "${QUILL_BIN:-}" ]; then
    QUILL_BIN=${CARGO_TARGET_DIR:-$repo/target}/release/quill
    if [ ! -x "$QUILL_BIN" ]; then
        say "building quill --release --features mpi"
        cargo build -q --release -p quill-cli --features mpi
    fi
fi
QUILL_BIN=$(realpath "$QUILL_BIN")
[ -x "$QUILL_BIN" ] || fail "missing binary: $QUILL_BIN"
peer=$repo/scripts/ddp_torch_peer.py
data=$repo/data/mnist

started=$SECONDS
tmp=$(mktemp -d "${TMPDIR:-/tmp}/quill-scaling.XXXXXX")
# shellcheck source=scripts/lib-netns.sh
. "$repo/scripts/lib-netns.sh"
cleanup() {
    netns_cleanup
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

netns_pair sc 10.214.0
say "hosts: $ns_a ($ip_a, $if_a) and $ns_b ($ip_b, $if_b), joined by a veth pair"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 QUILL_DIST_TIMEOUT=60
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
limit_s=$((60 + epochs * limit / 200)) # generous: a hang fails instead of stalling
train=(train --data "$data" --threads 1 --limit "$limit" --epochs "$epochs" --batch-size 128)

veth_bytes() { ip netns exec "$ns_b" cat "/sys/class/net/$if_b/statistics/rx_bytes"; }

# The median samples/s of epochs 2..E in log $1 (quill's epoch lines and the peer's share a form).
timed_rate() {
    grep -E '^epoch [0-9]+/[0-9]+:' "$1" | grep -v '^epoch 1/' |
        sed -E 's/.* ([0-9.]+) samples\/s.*/\1/' | sort -n |
        awk '{a[NR]=$1} END {if (NR == 0) exit 1; print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'
}

# run_setup NAME ROUND: runs one setup, appends "NAME rate" to $tmp/results.
run_setup() {
    local name=$1 round=$2 log="$tmp/$1-$2.log" rc=0 rx0 mb
    rx0=$(veth_bytes)
    case $name in
    quill-1)
        timeout -k 10 "$limit_s" ip netns exec "$ns_a" "$QUILL_BIN" "${train[@]}" \
            --out "$tmp/out-$name-$round" >"$log" 2>&1 || rc=$?
        ;;
    quill-2)
        timeout -k 10 "$limit_s" "${mpirun_ab[@]}" -np 2 "$QUILL_BIN" "${train[@]}" --distributed \
            --out "$tmp/out-$name-$round" >"$log" 2>&1 || rc=$?
        ;;
    torch-1)
        timeout -k 10 "$limit_s" ip netns exec "$ns_a" "$PYTHON" "$peer" --mode single \
            --data "$data" --limit "$limit" --epochs "$epochs" --batch-size 128 >"$log" 2>&1 || rc=$?
        ;;
    torch-2)
        local port=$((29600 + round)) pid1
        local common=(--mode ddp --world 2 --init "tcp://$ip_a:$port" --data "$data"
            --limit "$limit" --epochs "$epochs" --batch-size 128)
        ip netns exec "$ns_b" env GLOO_SOCKET_IFNAME="$if_b" timeout -k 10 "$limit_s" \
            "$PYTHON" "$peer" "${common[@]}" --rank 1 >"$log.rank1" 2>&1 &
        pid1=$!
        ip netns exec "$ns_a" env GLOO_SOCKET_IFNAME="$if_a" timeout -k 10 "$limit_s" \
            "$PYTHON" "$peer" "${common[@]}" --rank 0 >"$log" 2>&1 || rc=$?
        local rc1=0
        wait "$pid1" || rc1=$?
        if [ "$rc1" != 0 ]; then
            cat "$log.rank1" >>"$log"
            [ "$rc" != 0 ] || rc=$rc1
        fi
        ;;
    esac
    if [ "$rc" != 0 ]; then
        cat "$log" >&2
        fail "$name (round $round) exited with code $rc"
    fi
    mb=$((($(veth_bytes) - rx0) / 1000000))
    case $name in *-2) [ "$mb" -ge 10 ] || fail "$name: only $mb MB crossed the veth" ;; esac
    local rate
    rate=$(timed_rate "$log") || { cat "$log" >&2; fail "$name: no epoch lines"; }
    say "round $round: $name $rate samples/s (median of epochs 2-$epochs; $mb MB into $if_b)"
    echo "$name $rate" >>"$tmp/results"
}

say "quill: $QUILL_BIN; torch: $("$PYTHON" -c 'import torch; print(torch.__version__)') ($PYTHON)"
say "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(getconf _NPROCESSORS_ONLN) cores; $rounds rounds of MLPResNet," \
    "$limit samples, $epochs epochs, global batch 128, 1 thread per process"
order=(quill-1 quill-2 torch-1 torch-2)
for round in $(seq "$rounds"); do
    if [ $((round % 2)) = 1 ]; then seq_=("${order[@]}"); else seq_=(torch-2 torch-1 quill-2 quill-1); fi
    for name in "${seq_[@]}"; do run_setup "$name" "$round"; done
done
grep -h -E '^training ' "$tmp/quill-2-1.log" "$tmp/torch-2-1.log" | sed 's/^/bench-scaling:   /'

median_of() {
    awk -v k="$1" '$1 == k {print $2}' "$tmp/results" | sort -n |
        awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'
}
range_of() {
    awk -v k="$1" '$1 == k {printf "%.0f\n", $2}' "$tmp/results" | sort -n | sed -n '1p;$p' | paste -sd- -
}
# The ratio of setups $1 / $2 within each round (neighbours in time), rounds in order.
round_ratios() {
    paste -d' ' <(awk -v k="$1" '$1 == k {print $2}' "$tmp/results") \
        <(awk -v k="$2" '$1 == k {print $2}' "$tmp/results") |
        awk '{printf "%s%.3f", (NR > 1 ? " " : ""), $1 / $2} END {print ""}'
}
q1=$(median_of quill-1)
q2=$(median_of quill-2)
t1=$(median_of torch-1)
t2=$(median_of torch-2)
echo
echo "MLPResNet, $limit samples, $epochs epochs (epochs 2-$epochs timed), global batch 128, 1 thread per process:"
printf '| %-42s | %24s | %22s |\n' "setup" "samples/s median (range)" "ratio to its 1 process"
printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' $(seq 44))" "$(printf -- '-%.0s' $(seq 25))-:" "$(printf -- '-%.0s' $(seq 23))-:"
row() { printf '| %-42s | %8.0f (%13s) | %22s |\n' "$1" "$2" "$3" "$4"; }
row "quill, 1 process" "$q1" "$(range_of quill-1)" "1.00"
row "quill, 2 ranks on two hosts (MPI over TCP)" "$q2" "$(range_of quill-2)" "$(awk -v a="$q2" -v b="$q1" 'BEGIN {printf "%.2f", a / b}')"
row "PyTorch, 1 process" "$t1" "$(range_of torch-1)" "1.00"
row "PyTorch DDP, 2 ranks on two hosts (gloo)" "$t2" "$(range_of torch-2)" "$(awk -v a="$t2" -v b="$t1" 'BEGIN {printf "%.2f", a / b}')"
echo
rq_rounds=$(round_ratios quill-2 quill-1)
rt_rounds=$(round_ratios torch-2 torch-1)
say "ratio per round (2 ranks / 1 process of the same round): quill $rq_rounds; PyTorch $rt_rounds"
# Two readings of "quill's ratio >= PyTorch DDP's": the ratio of the medians (the table) and the
# median of the per-round ratios (each from runs next to each other in time).
med() { tr ' ' '\n' | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
awk -v q1="$q1" -v q2="$q2" -v t1="$t1" -v t2="$t2" -v mq="$(med <<<"$rq_rounds")" \
    -v mt="$(med <<<"$rt_rounds")" 'BEGIN {
    rq = q2 / q1; rt = t2 / t1
    printf "bench-scaling: ratio of medians: quill %.3f %s PyTorch DDP %.3f; median of per-round ratios: quill %.3f %s PyTorch DDP %.3f\n",
        rq, (rq >= rt ? ">=" : "<"), rt, mq, (mq >= mt ? ">=" : "<"), mt
    n = (rq >= rt) + (mq >= mt)
    print "bench-scaling: target (quill'"'"'s 2-host ratio >= PyTorch DDP'"'"'s): " \
        (n == 2 ? "met on both readings" : n == 1 ? "met on one reading only: within the noise" : "NOT met")
}'
say "done in $((SECONDS - started))s (ranges in parentheses: min-max over $rounds rounds)"
