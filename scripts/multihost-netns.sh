#!/usr/bin/env bash
# A two-host `quill train --distributed` on one machine: two network namespaces joined by a veth
# pair stand for two hosts, Open MPI runs over TCP only (no shared memory between the "hosts"),
# and the remote rank is started the way ssh would start it, through a plm_rsh_agent that runs
# `ip netns exec`. Checks, in order:
#  1. quill-dist's toy DDP run: 2 ranks across the hosts reach the parameters of 1 rank with the
#     same global batch (the tolerance of crates/quill-dist/tests/mpi.rs);
#  2. `quill train --distributed` across the hosts writes a checkpoint bit-identical to the same
#     2-rank job over loopback, and its gradients really crossed the veth;
#  3. rank 1 killed (SIGKILL) on the remote host mid-training: mpirun exits non-zero naming the
#     rank, no process is left in either namespace, and the checkpoint written before the kill
#     resumes on 1 rank.
# Needs root (namespaces), iproute2, Open MPI, python3. Without root, or where `ip netns add`
# fails, it skips (exit 0) with a message; REQUIRE_NETNS=1 (set by scripts/test-all.sh) makes
# that a failure. QUILL_BIN / QUILL_DIST_CHECK_BIN name prebuilt `--features mpi` binaries;
# otherwise it asks cargo for the test-profile builds test-all.sh makes (a no-op when fresh).
# docs/DISTRIBUTED.md ("Rehearsing a multi-host launch on one machine") has the recipe by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

say() { echo "multihost-netns: $*"; }
fail() {
    echo "multihost-netns: FAILED: $*" >&2
    exit 1
}
skip() {
    if [ "${REQUIRE_NETNS:-0}" = 1 ]; then
        fail "$1 (REQUIRE_NETNS=1 makes this a failure instead of a skip)"
    fi
    say "SKIPPED: $1 (set REQUIRE_NETNS=1 to make this a failure)"
    exit 0
}

[ "$(id -u)" = 0 ] || skip "not root: creating network namespaces needs root"
if ! command -v ip >/dev/null && command -v apt-get >/dev/null; then
    # A clean CI image may lack iproute2; it is the one thing this test adds to install.
    say "installing iproute2 (for 'ip netns')"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q iproute2 >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iproute2 >/dev/null 2>&1; } || true
fi
command -v ip >/dev/null || skip "no 'ip' command (iproute2)"
command -v mpirun >/dev/null || fail "mpirun not found: run scripts/install-mpi.sh"
command -v python3 >/dev/null || fail "python3 not found (it compares the checkpoints)"

target=${CARGO_TARGET_DIR:-$repo/target}
if [ -z "${QUILL_BIN:-}" ]; then
    say "building quill --features mpi (the test-profile build of test-all.sh; no-op when fresh)"
    cargo test -q -p quill-cli --features mpi --test train_distributed --no-run
    QUILL_BIN=$target/debug/quill
fi
if [ -z "${QUILL_DIST_CHECK_BIN:-}" ]; then
    say "building quill-dist-check --features mpi (likewise)"
    cargo test -q -p quill-dist --features mpi --test mpi --no-run
    QUILL_DIST_CHECK_BIN=$target/debug/quill-dist-check
fi
# Absolute paths: the remote rank starts in its own shell, like one started by ssh.
QUILL_BIN=$(realpath "$QUILL_BIN")
QUILL_DIST_CHECK_BIN=$(realpath "$QUILL_DIST_CHECK_BIN")
for bin in "$QUILL_BIN" "$QUILL_DIST_CHECK_BIN"; do
    [ -x "$bin" ] || fail "missing binary: $bin"
done
say "binaries: $QUILL_BIN, $QUILL_DIST_CHECK_BIN"

started=$SECONDS
tmp=$(mktemp -d "${TMPDIR:-/tmp}/quill-multihost.XXXXXX")
# shellcheck source=scripts/lib-netns.sh
. "$repo/scripts/lib-netns.sh"
cleanup() {
    netns_cleanup
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

netns_pair mh 10.213.0
say "created namespaces $ns_a ($ip_a) and $ns_b ($ip_b) joined by veth $if_a <-> $if_b"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 QUILL_DIST_TIMEOUT=30
# `timeout` turns a hang into a failure instead of a stalled CI.
mpirun_ab=(timeout -k 10 120 "${mpirun_ab[@]}")
train=(train --distributed --data "$repo/data/mnist" --threads 1)

# Runs "$@" with its output in log file $1 ($2...: the command); shows the log when it fails.
logged() {
    local log=$1
    shift
    say "\$ $*"
    local rc=0
    "$@" >"$log" 2>&1 || rc=$?
    if [ "$rc" != 0 ]; then
        cat "$log" >&2
        fail "exit code $rc from: $*"
    fi
}
veth_bytes() {
    ip netns exec "$ns_b" cat "/sys/class/net/$if_b/statistics/$1_bytes"
}

say "1/3: toy DDP run (quill-dist-check train, 12 steps of global batch 128): 2 ranks on two hosts vs 1 rank"
logged "$tmp/toy2.log" "${mpirun_ab[@]}" -np 2 "$QUILL_DIST_CHECK_BIN" train "$tmp/toy-np2.txt" 12 128
grep -q "^$ip_b -> $ns_b: .*orted" "$tmp/agent.log" || fail "the agent did not start orted in $ns_b: $(cat "$tmp/agent.log")"
say "rank 1 was launched by the agent in $ns_b ($ip_b)"
logged "$tmp/toy1.log" "${mpirun_ab[@]}" -np 1 "$QUILL_DIST_CHECK_BIN" train "$tmp/toy-np1.txt" 12 128
# Not bitwise: 2 ranks average two 64-sample mean gradients, 1 rank takes one 128-sample mean, and
# the sums round differently (about 1e-7 here); the tolerance is crates/quill-dist/tests/mpi.rs's.
python3 - "$tmp/toy-np1.txt" "$tmp/toy-np2.txt" <<'EOF' || fail "2 ranks across hosts differ from 1 rank"
import sys
a, b = ([float(x) for x in open(p).read().split()] for p in sys.argv[1:])
assert len(a) == len(b) == 8 * 16 + 16 + 16 * 3 + 3, (len(a), len(b))
worst = max(abs(x - y) for x, y in zip(a, b))
assert all(abs(x - y) <= 1e-4 * (1 + abs(x)) for x, y in zip(a, b)), f"largest difference {worst}"
assert sum(abs(x) for x in a) > 1.0, "parameters all near zero: nothing was compared"
print(f"multihost-netns: {len(a)} parameters agree, largest difference {worst:.2g} (tolerance 1e-4 relative)")
EOF

# The MNIST models hold BatchNorm (statistics per rank's batch) and dropout (masks per rank), so
# `quill train` on 2 ranks is not 1 rank's run; what the network must not change is the 2-rank
# result, so the cross-host job is compared with the same job over loopback, bit for bit.
say "2/3: quill train --distributed (600 samples, 2 epochs): two hosts over TCP vs one host over loopback"
rx0=$(veth_bytes rx)
tx0=$(veth_bytes tx)
logged "$tmp/train-ab.log" "${mpirun_ab[@]}" -np 2 "$QUILL_BIN" "${train[@]}" \
    --limit 600 --epochs 2 --out "$tmp/ab"
rx=$(($(veth_bytes rx) - rx0))
tx=$(($(veth_bytes tx) - tx0))
grep -E '^epoch [0-9]+/2:' "$tmp/train-ab.log" | sed 's/^/multihost-netns:   /' || true
if [ "$(grep -c '^epoch 2/2:' "$tmp/train-ab.log")" != 1 ] || ! grep -q '2 ranks x 64' "$tmp/train-ab.log"; then
    fail "expected one 'epoch 2/2:' line (rank 0 alone) and '2 ranks x 64': $(cat "$tmp/train-ab.log")"
fi
# The model's gradients are 4.8 MB a step: less than that each way means they went another path.
if [ "$rx" -lt 4000000 ] || [ "$tx" -lt 4000000 ]; then
    fail "only $rx bytes in, $tx out on $if_b"
fi
say "$ns_b's veth carried $((rx / 1000000)) MB in and $((tx / 1000000)) MB out during the job"
logged "$tmp/train-lo.log" timeout -k 10 120 mpirun --oversubscribe --bind-to none -np 2 \
    "$QUILL_BIN" "${train[@]}" --limit 600 --epochs 2 --out "$tmp/lo"
# Every checkpoint tensor carries its SHA-256 in the metadata: equal digests, equal bits.
python3 - "$tmp/ab/checkpoint.safetensors" "$tmp/lo/checkpoint.safetensors" <<'EOF' || fail "the two-host checkpoint differs from the loopback one"
import json, struct, sys
def digests(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        meta = json.loads(f.read(n))["__metadata__"]
    return {k: v for k, v in meta.items() if k.startswith("sha256.")}
a, b = (digests(p) for p in sys.argv[1:])
assert a and a.keys() == b.keys(), "different tensors"
differ = sorted(k[7:] for k in a if a[k] != b[k])
assert not differ, f"{len(differ)} of {len(a)} tensors differ: {differ[:5]}"
print(f"multihost-netns: all {len(a)} tensors (model and optimizer) bit-identical")
EOF

say "3/3: kill rank 1 on $ns_b with SIGKILL once the first checkpoint is written"
ckpt=$tmp/kill/checkpoint.safetensors
kill_cmd=("${mpirun_ab[@]}" -np 2 "$QUILL_BIN" "${train[@]}" --limit 3000 --epochs 20 --out "$tmp/kill")
say "\$ ${kill_cmd[*]} &"
"${kill_cmd[@]}" >"$tmp/kill.log" 2>&1 &
job=$!
for _ in $(seq 600); do
    [ -f "$ckpt" ] && break
    kill -0 "$job" 2>/dev/null || break
    sleep 0.1
done
[ -f "$ckpt" ] || { cat "$tmp/kill.log" >&2; fail "no checkpoint within 60 s"; }
# Not `pkill -f quill`: network namespaces share the PID namespace, so that would hit every
# quill on the machine (rank 0 too). `ip netns pids` lists just the remote host's processes.
victim=""
for p in $(ip netns pids "$ns_b"); do
    [ "$(ps -o comm= -p "$p" 2>/dev/null)" = quill ] && victim=$p
done
[ -n "$victim" ] || { cat "$tmp/kill.log" >&2; fail "no quill process in $ns_b"; }
say "killing rank 1 (pid $victim in $ns_b)"
kill -9 "$victim"
killed_at=$SECONDS
rc=0
wait "$job" || rc=$?
took=$((SECONDS - killed_at))
say "mpirun exited with code $rc ${took}s after the kill; its message:"
grep -E 'mpirun noticed|exited on signal|Peer host' "$tmp/kill.log" | sed 's/^/multihost-netns:   /' || true
[ "$rc" != 0 ] || fail "mpirun exited 0 after rank 1 was killed"
# mpirun's own code for a rank killed by signal 9 is 137, as is timeout's -k: hence the clock.
if [ "$rc" = 124 ] || [ "$took" -gt 30 ]; then
    cat "$tmp/kill.log" >&2
    fail "mpirun took ${took}s to end the job"
fi
grep -q "process rank 1 .* on node $ip_b exited on signal 9" "$tmp/kill.log" \
    || { cat "$tmp/kill.log" >&2; fail "mpirun's message does not name rank 1 on $ip_b"; }
left=""
for _ in $(seq 100); do
    left=$(ip netns pids "$ns_a"; ip netns pids "$ns_b")
    [ -z "$left" ] && break
    sleep 0.1
done
[ -z "$left" ] || fail "left running after 10 s: $(ps -o pid=,comm= -p "$(echo "$left" | paste -sd,)" | tr '\n' ' ')"
say "no process left in $ns_a or $ns_b"
epoch=$(python3 - "$ckpt" <<'EOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    print(json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))["__metadata__"]["epoch"])
EOF
) || fail "the checkpoint's header does not read"
if [ "$epoch" -lt 1 ] || [ "$epoch" -ge 20 ]; then
    fail "checkpoint at epoch $epoch: the kill was not mid-training"
fi
say "checkpoint at epoch $epoch of 20; resuming it on 1 rank for one more epoch"
logged "$tmp/resume.log" timeout -k 10 120 mpirun -np 1 "$QUILL_BIN" "${train[@]}" \
    --limit 3000 --epochs $((epoch + 1)) --out "$tmp/kill" --resume
if ! grep -q "resumed from" "$tmp/resume.log" || ! grep -q "^epoch $((epoch + 1))/$((epoch + 1)):" "$tmp/resume.log"; then
    fail "the resume did not continue at epoch $((epoch + 1)): $(cat "$tmp/resume.log")"
fi
grep -E '^(resumed from|epoch )' "$tmp/resume.log" | sed 's/^/multihost-netns:   /' || true
say "passed in $((SECONDS - started))s (namespaces and checks, builds excluded)"
