#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# fabcoll vs Open MPI across hosts, side by side, in one run on this machine.
# Network namespaces make H hosts of L ranks each on one bridge (as
# test/netns does); one mpirun launches every configuration through an rsh
# agent that enters a host's namespace under its own hostname, so both
# libraries see the same nodes:
#   fabcoll-paths   fabcoll as a cluster runs it: shm between the ranks of a
#                   host, tcp between hosts (FC_PATHS=auto, per-peer paths)
#   fabcoll-flat    fabcoll with one provider for every peer and flat
#                   algorithms: FC_PATHS=single, FI_PROVIDER=tcp, and every
#                   rank its own node (FC_NODE), so no node-aware algorithm
#                   takes part: the baseline without per-peer paths and
#                   hierarchy
#   ompi            Open MPI with vader inside a host and tcp across
#                   (--mca btl self,vader,tcp), contrib/bench/mpi_bench.c
# Both sides time as nccl-tests does (warm-up, a barrier, N calls back to
# back, total/N, the largest over ranks). Configurations alternate round by
# round, so machine noise hits them alike. Prints busbw per size, the ratios
# paths/ompi and paths/flat, and writes busbw.png (report.py --hosts).
#
# With -s RATE (e.g. -s 1gbit) the switch's port toward each host is shaped
# to RATE (tc tbf; with -d DELAY and where the kernel has sch_netem, netem
# adds DELAY), so the link and not the CPUs bounds large messages: what a
# host receives comes at RATE, and with 2 hosts, what one sends to the
# other is what that one receives, so each host's link runs at RATE each
# way. With more hosts, a host that sends to several at once may send
# above RATE in all. SHAPE_AT=both also shapes each host's own egress (a
# second tbf in series on every path). On this machine's kernel that adds
# stalls of 10-45 ms to some calls of 256 KiB-2 MiB: data the sending TCP
# has already sent reaches the receiving socket tens of milliseconds later,
# delivered from ksoftirqd (tcp:tcp_probe); one tbf per path has almost
# none (0-1 of 107 calls at 512 KiB, against 6-15).
# Then a last stage runs a few 32 MiB allreduces per configuration and
# reads host 1's link counters: the bytes one call sends and receives
# across a host's link, against S (the message size), and the time per
# call against the time those bytes need at RATE; a first row, plain-tcp,
# sends S each way between hosts 1 and 2 at once over plain sockets: what
# these links give at best. TBF_LATENCY (default 50ms) sets tbf's queue,
# TBF_BURST (default 1mb) its bucket: with a bucket of 64kb, half a
# millisecond at 1 Gbit/s, the timer that refills it runs late on a busy
# 2-core machine and even plain TCP loses a quarter of the rate or more,
# with retransmissions; a larger bucket keeps the same average rate.
#
# Usage: compare_hosts.sh [-b BUILDDIR] [-H HOSTS] [-L RANKS_PER_HOST|R1,R2,...]
#            [-e MAXBYTES] [-f FACTOR] [-i ITERS] [-w WARMUP] [-r ROUNDS]
#            [-s RATE] [-d DELAY] [-x VAR=VALUE]... [-o OUTDIR]
# -L with a comma list gives each host its own number of ranks (an uneven
# job, e.g. -L 3,1,2: 3 hosts, ranks 0-2 on the first); -H is then the
# list's length. -x passes a setting to both fabcoll configurations
# (repeatable). fabcoll runs with FC_SPIN=1 as Open MPI runs with
# mpi_yield_when_idle 1: each namespace host believes it has this
# machine's CPUs to itself, so neither library would otherwise yield
# while 4 ranks share 2 cores.
# Defaults: 2 hosts x 2 ranks, 8 B to 32 MiB by x4, 20 calls after 5
# warm-up calls, 1 round, no shaping, output in bench-hosts/.
# Needs root (ip netns, tc), Open MPI (mpicc, mpirun), python3; a fabcoll
# build (fc_perf). Removes its namespaces on exit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$here/../.." && pwd)
hosts=2 local=2 maxb=32M factor=4 iters=20 warm=5 rounds=1 rate="" delay="" out=bench-hosts
fcenv=(-x FC_SPIN=1)
while getopts "b:H:L:e:f:i:w:r:s:d:x:o:h" o; do
    case $o in
    b) build=$(cd "$OPTARG" && pwd) ;;
    H) hosts=$OPTARG ;;
    L) local=$OPTARG ;;
    e) maxb=$OPTARG ;;
    f) factor=$OPTARG ;;
    i) iters=$OPTARG ;;
    w) warm=$OPTARG ;;
    r) rounds=$OPTARG ;;
    s) rate=$OPTARG ;;
    d) delay=$OPTARG ;;
    x) fcenv+=(-x "$OPTARG") ;;
    o) out=$OPTARG ;;
    *) awk 'NR > 2 && !/^#/ { exit } NR > 2 { sub(/^# ?/, ""); print }' "$0"; exit 2 ;;
    esac
done
IFS=, read -r -a per_host <<<"$local"
if [ ${#per_host[@]} -gt 1 ]; then
    hosts=${#per_host[@]}
else
    per_host=()
    for _ in $(seq 1 "$hosts"); do per_host+=("$local"); done
fi
for l in "${per_host[@]}"; do
    [[ "$l" =~ ^[1-9][0-9]*$ ]] || { echo "compare_hosts: -L wants a rank count per host, got '$local'" >&2; exit 2; }
done
shape_at=${SHAPE_AT:-switch}
case $shape_at in
switch | both) ;;
*) echo "compare_hosts: SHAPE_AT is switch or both, not '$shape_at'" >&2; exit 2 ;;
esac
for tool in mpicc mpirun python3 ip tc unshare; do
    command -v $tool >/dev/null || { echo "compare_hosts: $tool is missing (contrib/ci/install-deps.sh --full)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "compare_hosts: needs root (network namespaces)" >&2; exit 1; }
perf=$build/fc_perf
[ -x "$perf" ] || { echo "compare_hosts: build fabcoll first ($perf is missing)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
mpicc -O2 -o "$out/mpi_bench" "$here/mpi_bench.c"

# ---- the hosts ------------------------------------------------------------------
P=fcb$$
net=10.66.0
sw=${P}sw
namespaces=()
cleanup() {
    for ns in "${namespaces[@]}"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
        rm -rf "/etc/netns/$ns"
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$sw"
namespaces+=("$sw")
ip -n "$sw" link set lo up
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 up
ip -n "$sw" addr add "$net.254/24" dev br0
hostsfile="127.0.0.1 localhost
$net.254 ${P}sw"
for k in $(seq 1 "$hosts"); do
    ns=${P}h$k
    ip netns add "$ns"
    namespaces+=("$ns")
    ip -n "$ns" link set lo up
    ip -n "$sw" link add "sw$k" type veth peer name veth0 netns "$ns"
    ip -n "$sw" link set "sw$k" master br0
    ip -n "$ns" addr add "$net.$k/24" dev veth0
    ip -n "$sw" link set "sw$k" up
    ip -n "$ns" link set veth0 up
    hostsfile="$hostsfile
$net.$k $ns"
done
for ns in "${namespaces[@]}"; do
    mkdir -p "/etc/netns/$ns"
    printf '%s\n' "$hostsfile" >"/etc/netns/$ns/hosts"
done
for k in $(seq 1 "$hosts"); do # libfabric lists only running interfaces
    for _ in $(seq 1 100); do
        [ "$(ip netns exec "${P}h$k" cat /sys/class/net/veth0/operstate)" = up ] && break
        sleep 0.05
    done
done
shaped="no (the CPUs bound every size)"
if [ -n "$rate" ]; then
    netem=0
    if [ -n "$delay" ] && ip netns exec "$sw" tc qdisc add dev lo root netem delay 1us 2>/dev/null; then
        ip netns exec "$sw" tc qdisc del dev lo root
        netem=1
    fi
    for k in $(seq 1 "$hosts"); do # switch -> host on swK; host -> switch on veth0
        sides=("$sw sw$k")
        [ "$shape_at" = both ] && sides+=("${P}h$k veth0")
        for side in "${sides[@]}"; do
            set -- $side
            if [ $netem = 1 ]; then
                ip netns exec "$1" tc qdisc add dev "$2" root netem delay "$delay" rate "$rate" limit 10000
            else
                ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$rate" burst "${TBF_BURST:-1mb}" latency "${TBF_LATENCY:-50ms}"
            fi
        done
    done
    if [ "$shape_at" = both ]; then
        shaped="every host's link at $rate each way, shaped at the host and at the switch"
    elif [ "$hosts" = 2 ]; then
        shaped="every host's link at $rate each way"
    else
        shaped="every host's link at $rate into the host"
    fi
    if [ $netem = 1 ]; then
        shaped="$shaped, $delay delay (netem)"
    elif [ -n "$delay" ]; then
        shaped="$shaped (no delay: this kernel has no sch_netem)"
    fi
fi

cat >"$out/nsagent" <<'A'
#!/bin/bash
# rsh agent: "nsagent [options] HOST COMMAND..." runs COMMAND in HOST's namespace under its name
while [[ "$1" == -* ]]; do shift; done
h=$1; shift
exec ip netns exec "$h" unshare --uts bash -c "hostname $h; $*"
A
chmod +x "$out/nsagent"
hostlist="" n=0
for k in $(seq 1 "$hosts"); do
    hostlist="$hostlist${hostlist:+,}${P}h$k:${per_host[k - 1]}"
    n=$((n + per_host[k - 1]))
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun_=(mpirun --host "$hostlist" -n "$n" --bind-to none --mca plm_rsh_agent "$out/nsagent"
    --mca oob_tcp_if_include "$net.0/24" --mca btl_tcp_if_include "$net.0/24"
    --mca mpi_yield_when_idle 1 -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM)
launch() { # mpirun runs in the switch's namespace, which reaches every host
    ip netns exec "$sw" unshare --uts bash -c 'hostname "$0"; exec "$@"' "${P}sw" "$@"
}
run_cfg() { # name, then fc_perf / mpi_bench options
    local c=$1
    shift
    case $c in
    fabcoll-paths) launch "${mpirun_[@]}" "${fcenv[@]}" -x FC_PATHS=auto "$perf" --csv "$@" ;;
    fabcoll-flat) launch "${mpirun_[@]}" "${fcenv[@]}" -x FC_PATHS=single -x FI_PROVIDER=tcp \
        sh -c 'FC_NODE=rank$OMPI_COMM_WORLD_RANK exec "$0" "$@"' "$perf" --csv "$@" ;;
    ompi) launch "${mpirun_[@]}" --mca pml ob1 --mca btl self,vader,tcp "$out/mpi_bench" "$@" -l ompi ;;
    esac
}
cfgs=(fabcoll-paths fabcoll-flat ompi)
echo "compare_hosts: $hosts hosts x $local ranks, links: $shaped" | tee "$out/setup.txt" >&2

# ---- the sweep --------------------------------------------------------------------
sweep=(-C allreduce,bcast -b 8 -e "$maxb" -f "$factor" -n "$iters" -w "$warm")
for c in "${cfgs[@]}"; do : >"$out/$c.csv"; done
for r in $(seq 1 "$rounds"); do
    for c in "${cfgs[@]}"; do
        echo "compare_hosts: round $r/$rounds: $c" >&2
        if ! run_cfg "$c" "${sweep[@]}" >"$out/$c.round$r.csv" 2>"$out/$c.round$r.err"; then
            echo "compare_hosts: $c failed:" >&2
            tail -5 "$out/$c.round$r.err" >&2
        fi
        cat "$out/$c.round$r.csv" >>"$out/$c.csv"
    done
done
python3 "$here/report.py" --hosts "$out" "${cfgs[@]}" | tee "$out/report.txt"

# ---- bytes across a host's link ---------------------------------------------------
if [ -n "$rate" ]; then
    S=$((32 << 20)) calls_n=8 calls_w=2
    rate_bps=$(python3 -c "
import re, sys
m = re.fullmatch(r'([0-9.]+)([kmgt]?)bit', sys.argv[1].lower())
print(float(m.group(1)) * {'': 1, 'k': 1e3, 'm': 1e6, 'g': 1e9, 't': 1e12}[m.group(2)] if m else 0)" "$rate")
    {
        echo
        echo "32 MiB allreduce across host 1's link ($shaped): bytes per call each way,"
        echo "as a multiple of S = $S bytes, and the time per call against the time those"
        echo "bytes need at the link's rate (${calls_w} warm-up + ${calls_n} timed calls; counters include"
        echo "the job's start-up, a few KiB)"
        printf '%-14s %10s %10s %12s %12s %8s\n' config "sent/S" "recv/S" "time_ms" "wire_ms" ratio
    } | tee -a "$out/report.txt"
    cat >"$out/row.py" <<'PY'
import sys
c, tx0, tx1, rx0, rx1, t_us, S, rate, calls = sys.argv[1], *map(float, sys.argv[2:])
sent, recv = (tx1 - tx0) / calls, (rx1 - rx0) / calls
wire_ms = max(sent, recv) * 8 / rate * 1e3 if rate else 0
t_ms = t_us / 1e3
print(f"{c:<14} {sent / S:10.3f} {recv / S:10.3f} {t_ms:12.1f} {wire_ms:12.1f} "
      + (f"{t_ms / wire_ms:7.2f}x" if wire_ms and t_ms else f"{'-':>8}"))
PY
    # what plain TCP does on these links: S bytes each way between hosts 1
    # and 2 at once, the time until both ends have sent and received them
    cat >"$out/duplex.py" <<'PY'
import socket, sys, threading, time
me, peer, size, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((me, 5799))
srv.listen(1)
def rx():
    c, _ = srv.accept()
    n = 0
    while n < size:
        b = c.recv(1 << 20)
        if not b:
            break
        n += len(b)
th = threading.Thread(target=rx)
th.start()
while time.time() < start:
    time.sleep(0.001)
for _ in range(100):
    try:
        o = socket.create_connection((peer, 5799))
        break
    except OSError:
        time.sleep(0.01)
buf = b"x" * (1 << 20)
t0 = time.time()
for _ in range(size >> 20):
    o.sendall(buf)
th.join()
o.close()
print(f"{(time.time() - t0) * 1e3:.1f}")
PY
    if [ "$hosts" -ge 2 ]; then
        tx0=$(ip netns exec "${P}h1" cat /sys/class/net/veth0/statistics/tx_bytes)
        rx0=$(ip netns exec "${P}h1" cat /sys/class/net/veth0/statistics/rx_bytes)
        go=$(python3 -c 'import time; print(time.time() + 1)')
        ip netns exec "${P}h2" python3 "$out/duplex.py" "$net.2" "$net.1" "$S" "$go" >"$out/duplex2.txt" &
        ip netns exec "${P}h1" python3 "$out/duplex.py" "$net.1" "$net.2" "$S" "$go" >"$out/duplex1.txt"
        wait
        tx1=$(ip netns exec "${P}h1" cat /sys/class/net/veth0/statistics/tx_bytes)
        rx1=$(ip netns exec "${P}h1" cat /sys/class/net/veth0/statistics/rx_bytes)
        t_ms=$(sort -n "$out/duplex1.txt" "$out/duplex2.txt" | tail -1)
        python3 - "plain-tcp" "$tx0" "$tx1" "$rx0" "$rx1" "$(python3 -c "print($t_ms * 1000)")" "$S" \
            "$rate_bps" 1 <"$out/row.py" | tee -a "$out/report.txt"
    fi
    for c in "${cfgs[@]}"; do
        tx0=$(ip netns exec "${P}h1" cat /sys/class/net/veth0/statistics/tx_bytes)
        rx0=$(ip netns exec "${P}h1" cat /sys/class/net/veth0/statistics/rx_bytes)
        run_cfg "$c" -C allreduce -b "$S" -e "$S" -n $calls_n -w $calls_w >"$out/$c.link.csv" 2>"$out/$c.link.err" ||
            { echo "compare_hosts: $c (link stage) failed" >&2; tail -5 "$out/$c.link.err" >&2; }
        tx1=$(ip netns exec "${P}h1" cat /sys/class/net/veth0/statistics/tx_bytes)
        rx1=$(ip netns exec "${P}h1" cat /sys/class/net/veth0/statistics/rx_bytes)
        t_us=$(awk -F, '$1 == "allreduce" { print $9 }' "$out/$c.link.csv" | tail -1)
        python3 - "$c" "$tx0" "$tx1" "$rx0" "$rx1" "${t_us:-0}" "$S" "$rate_bps" $((calls_n + calls_w)) \
            <"$out/row.py" | tee -a "$out/report.txt"
    done
fi
echo "compare_hosts: results in $out (report.txt, busbw.png)" >&2
