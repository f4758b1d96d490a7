# shellcheck shell=bash disable=SC2154,SC2034 # $tmp, say and skip come from the caller; the caller reads what this sets
# Sourced by scripts/multihost-netns.sh and scripts/bench-scaling-netns.sh: two "hosts" on this
# machine, network namespaces joined by a veth pair, and what mpirun needs to start a rank in
# each over TCP only. The caller defines `say` and `skip` and an existing temp dir in $tmp.
#
# netns_pair TAG NET: namespaces quill-TAG-{a,b}-PID with veths qTAG{a,b}PID and addresses
# NET.1 / NET.2 (a /24 that exists only inside them), loopback up; skips (through the caller's
# `skip`) where namespaces cannot be made. Sets ns_a ns_b if_a if_b ip_a ip_b subnet, writes
# $tmp/rsh-agent and $tmp/hosts, and the array mpirun_ab (prefix a command with it, then -np N).
# netns_cleanup kills what is left in the namespaces and deletes them (for the caller's trap).

netns_cleanup() {
    local ns p
    for ns in ${ns_a:-} ${ns_b:-}; do
        # Only this run's processes live in these namespaces (a failed check may leave some).
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
}

netns_pair() {
    local tag=$1 net=$2 err ns
    # The PID in every name, so parallel runs do not collide.
    ns_a=quill-$tag-a-$$
    ns_b=quill-$tag-b-$$
    if_a=q${tag}a$$
    if_b=q${tag}b$$
    ip_a=$net.1
    ip_b=$net.2
    subnet=$net.0/24
    if ! err=$(ip netns add "$ns_a" 2>&1); then
        ns_a=
        skip "cannot create a network namespace: $err"
    fi
    ip netns add "$ns_b"
    ip link add "$if_a" netns "$ns_a" type veth peer name "$if_b" netns "$ns_b"
    ip -n "$ns_a" addr add "$ip_a/24" dev "$if_a"
    ip -n "$ns_b" addr add "$ip_b/24" dev "$if_b"
    for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
    ip -n "$ns_a" link set "$if_a" up
    ip -n "$ns_b" link set "$if_b" up

    # mpirun calls the agent as it would call ssh: `agent HOST ARGS...`. ssh joins ARGS into
    # one string for the remote shell, and Open MPI quotes for that shell (its URIs hold ';'),
    # so the agent hands them to `sh -c` too. It logs each launch to $tmp/agent.log, so that a
    # caller can show where a rank ran.
    cat >"$tmp/rsh-agent" <<AGENT
#!/bin/sh
host=\$1
shift
case \$host in
$ip_a) ns=$ns_a ;;
$ip_b) ns=$ns_b ;;
*) echo "rsh-agent: no namespace for host \$host" >&2; exit 255 ;;
esac
echo "\$host -> \$ns: \$*" >>"$tmp/agent.log"
exec ip netns exec "\$ns" /bin/sh -c "\$*"
AGENT
    chmod +x "$tmp/rsh-agent"
    printf '%s slots=1\n%s slots=1\n' "$ip_a" "$ip_b" >"$tmp/hosts"

    # pml ob1 because a UCX pml would pick its own transports (shared memory among them) and
    # ignore the btl list; btl tcp,self keeps vader (shared memory, which works across network
    # namespaces) out; --bind-to none because each "host" sees the same cores, and binding
    # would put rank 0 and rank 1 both on core 0.
    # shellcheck disable=SC2054 # tcp,self is one argument
    mpirun_ab=(ip netns exec "$ns_a" mpirun --hostfile "$tmp/hosts"
        --mca plm_rsh_agent "$tmp/rsh-agent" --mca pml ob1 --mca btl tcp,self
        --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet"
        --bind-to none -x QUILL_DIST_TIMEOUT)
}
