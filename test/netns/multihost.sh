#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Multi-host tests on one machine: every "host" is a network namespace
# with its own hostname (unshare --uts) and a veth link to a "switch"
# namespace; ranks are started in them by hand and meet through
# `fc_run --serve`.
#
#   multihost.sh [-b BUILDDIR] [-c REGEX] [-k] [-v] [-h]
#
#   -b BUILDDIR  where fc_run and test/functional/* are (default: the
#                repository root this script lives in)
#   -c REGEX     run only the cases whose name matches (bash =~), e.g.
#                -c mixed or -c '^4hosts-routed'
#   -k           keep the namespaces (and print their names) for debugging;
#                the ranks and the rendezvous are still stopped
#   -v           verbose: show every rank's stdout/stderr
#
# Topologies: 2 and 4 hosts on one subnet (10.77.0.K/24 behind a bridge in
# the switch namespace) and on distinct subnets (10.77.K.1/24, routed by the
# switch namespace, 10.77.K.254). Two ranks per host, and one uneven job of
# 3 hosts on one subnet with 3, 1 and 2 ranks. The 4-host ones also
# give every host a host-local network (cni0, 10.0.0.1/16 everywhere, as
# docker0/virbr0/cni0 do) that the ranks must not pick.
#
# Cases: allreduce, broadcast and api_program pass on each topology with
# provider tcp;ofi_rxm, N nodes, local size 2 and the veth fabric/domain
# (and on 3 hosts of 3, 1 and 2 ranks, local sizes 3, 1, 2);
# the node-aware algorithms (hier, forced) pass the quick sweep and the
# barrier test on each, every rank saying it reaches its host's other rank
# over shm and the rest over tcp;
# one host with FI_PROVIDER=sockets makes everybody agree on sockets;
# a host whose tcp has only lo (FI_TCP_IFACE=lo) fails every rank promptly;
# FI_PROVIDER=tcp on one host and sockets on another fails on every rank,
# promptly, naming each rank's providers; FI_PROVIDER=shm across 2 hosts
# fails on every rank saying the ranks are on 2 nodes.
#
# Prints one line per case (PASS/FAIL/SKIP) and "N passed, N failed, N
# skipped"; exit 0 when nothing failed, 77 when it cannot run here (not
# root, no network namespaces). FC_* and FI_* variables of the caller are
# not passed on: each case sets what it tests.
set -u

here=$(cd "$(dirname "$0")" && pwd)
builddir=$(cd "$here/../.." && pwd)
keep=0
verbose=0
only=""

usage() { sed -n '3,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; }

while getopts "b:c:kvh" o; do
    case $o in
    b) builddir=$OPTARG ;;
    c) only=$OPTARG ;;
    k) keep=1 ;;
    v) verbose=1 ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -gt 0 ]; then
    usage >&2
    exit 2
fi

fc_run=$builddir/fc_run
tdir=$builddir/test/functional
for f in "$fc_run" "$tdir/allreduce" "$tdir/broadcast" "$tdir/api_program"; do
    if [ ! -x "$f" ]; then
        echo "multihost.sh: $f is missing: build first (make && make check TESTS=), or pass -b BUILDDIR" >&2
        exit 2
    fi
done

if [ "$(id -u)" != 0 ]; then
    echo "SKIP: multihost.sh needs root (network namespaces, veth, unshare --uts)"
    exit 77
fi
for t in ip unshare timeout; do
    if ! command -v $t >/dev/null 2>&1; then
        echo "SKIP: multihost.sh needs '$t' (iproute2, util-linux, coreutils)"
        exit 77
    fi
done

# the ranks get only what each case sets: no FC_*/FI_* from the caller
for v in $(compgen -e); do
    case $v in FC_* | FI_*) unset "$v" ;; esac
done

P=fc$$                       # namespace name prefix: unique per run
wait_s=20                    # FC_TIMEOUT and FC_BOOT_TIMEOUT of the ranks: a rank
                             # left waiting fails by itself, saying for what
work=$(mktemp -d "${TMPDIR:-/tmp}/fc-multihost.XXXXXX")
namespaces=()                # everything we created, for the cleanup
server_pid=""
rank_pids=()
npass=0 nfail=0 nskip=0
t_start=$EPOCHREALTIME

log() { [ $verbose = 1 ] && echo "  $*"; return 0; }

# stop every process we started in a namespace of ours, by its pid
stop_procs() {
    local ns pids p
    for p in "${rank_pids[@]}" $server_pid; do
        kill -TERM "$p" 2>/dev/null
    done
    for ns in "${namespaces[@]}"; do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -n "$pids" ] && kill -TERM $pids 2>/dev/null
    done
    for ns in "${namespaces[@]}"; do
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            pids=$(ip netns pids "$ns" 2>/dev/null)
            [ -z "$pids" ] && break
            sleep 0.1
        done
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    done
    [ -n "$server_pid" ] && wait "$server_pid" 2>/dev/null
    server_pid=""
    rank_pids=()
    return 0
}

del_namespaces() {
    local ns
    for ns in "${namespaces[@]}"; do
        # deleting a namespace deletes the veth ends and the bridge in it
        ip netns del "$ns" 2>/dev/null
    done
    namespaces=()
}

cleanup() {
    trap - EXIT
    trap "" INT TERM HUP    # a second Ctrl-C must not cut the cleanup short
    stop_procs
    if [ $keep = 1 ] && [ ${#namespaces[@]} -gt 0 ]; then
        echo "kept namespaces: ${namespaces[*]} (remove: for n in ${namespaces[*]}; do ip netns del \$n; done)"
        echo "kept rank output: $work"
    else
        del_namespaces
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'echo "multihost.sh: interrupted, cleaning up" >&2; exit 130' INT TERM HUP

# Can we make namespaces and hostnames at all?
if ! err=$(ip netns add "${P}probe" 2>&1); then
    echo "SKIP: multihost.sh: 'ip netns add' is not permitted here: $err"
    rm -rf "$work"
    trap - EXIT
    exit 77
fi
namespaces+=("${P}probe")
if ! err=$(ip netns exec "${P}probe" unshare --uts sh -c 'hostname fcprobe' 2>&1); then
    echo "SKIP: multihost.sh: 'unshare --uts' + hostname is not permitted here: $err"
    exit 77
fi
ip netns del "${P}probe"
namespaces=()

result() { # PASS|FAIL|SKIP name reason
    case $1 in
    PASS) npass=$((npass + 1)) ;;
    FAIL) nfail=$((nfail + 1)) ;;
    SKIP) nskip=$((nskip + 1)) ;;
    esac
    if [ -n "${3:-}" ]; then
        echo "$1: $2 ($3)"
    else
        echo "$1: $2"
    fi
}

# ---- topology ---------------------------------------------------------------
# topo_up NAME NHOSTS MODE [HOSTLOCAL]
#   MODE: flat = one subnet, routed = a subnet per host
#   HOSTLOCAL=1: every host also has cni0, 10.0.0.1/16, a network of its own
#   (like docker0/virbr0/cni0: same subnet and address everywhere, reaching
#   nothing; its name sorts before 10.77.*)
# sets: topo, nhosts, mode, hostlocal, host_ip[k], host_net[k], sw
topo_up() {
    topo=$1 nhosts=$2 mode=$3 hostlocal=${4:-0}
    # ranks per host (a comma list; 2 on every host by default): rank r
    # runs on host rank_host[r] as its local rank rank_local[r]
    local lay=${5:-} k i r=0
    IFS=, read -r -a per_host <<<"${lay:-$(printf '2,%.0s' $(seq 1 "$nhosts"))}"
    per_host=(0 "${per_host[@]}") # 1-based like the hosts
    rank_host=() rank_local=()
    for k in $(seq 1 "$nhosts"); do
        for i in $(seq 0 $((per_host[k] - 1))); do
            rank_host[r]=$k rank_local[r]=$i
            r=$((r + 1))
        done
    done
    jobn=$r
    sw=${P}${topo}sw
    host_ip=() host_net=()
    ip netns add "$sw" || return 1
    namespaces+=("$sw")
    ip -n "$sw" link set lo up || return 1
    if [ "$mode" = flat ]; then
        ip -n "$sw" link add br0 type bridge || return 1
        ip -n "$sw" link set br0 up || return 1
    else
        ip netns exec "$sw" sysctl -qw net.ipv4.ip_forward=1 || return 1
    fi
    local k ns
    for k in $(seq 1 "$nhosts"); do
        ns=${P}${topo}h$k
        ip netns add "$ns" || return 1
        namespaces+=("$ns")
        ip -n "$ns" link set lo up || return 1
        # the veth is made inside the switch namespace with its peer moved
        # straight into the host: nothing appears in the machine's own
        ip -n "$sw" link add "sw$k" type veth peer name veth0 netns "$ns" || return 1
        if [ "$mode" = flat ]; then
            ip -n "$sw" link set "sw$k" master br0 || return 1
            host_ip[k]=10.77.0.$k
            host_net[k]=10.77.0.0/24
            ip -n "$ns" addr add "${host_ip[k]}/24" dev veth0 || return 1
        else
            host_ip[k]=10.77.$k.1
            host_net[k]=10.77.$k.0/24
            ip -n "$sw" addr add "10.77.$k.254/24" dev "sw$k" || return 1
            ip -n "$ns" addr add "${host_ip[k]}/24" dev veth0 || return 1
        fi
        ip -n "$sw" link set "sw$k" up || return 1
        ip -n "$ns" link set veth0 up || return 1
        if [ "$mode" = routed ]; then
            ip -n "$ns" route add default via "10.77.$k.254" || return 1
        fi
        if [ "$hostlocal" = 1 ]; then
            # a veth pair inside the host: up and running, leads nowhere
            ip -n "$ns" link add cni0 type veth peer name cni0p || return 1
            ip -n "$ns" addr add 10.0.0.1/16 dev cni0 || return 1
            ip -n "$ns" link set cni0p up || return 1
            ip -n "$ns" link set cni0 up || return 1
        fi
    done
    links_up || return 1
    # every host reaches the next one (where ping exists)
    if command -v ping >/dev/null 2>&1; then
        for k in $(seq 1 "$nhosts"); do
            local to=$((k % nhosts + 1))
            if ! ip netns exec "${P}${topo}h$k" ping -c1 -W2 "${host_ip[to]}" >/dev/null 2>&1; then
                echo "host$k cannot reach host$to (${host_ip[to]})"
                return 1
            fi
        done
    fi
    return 0
}

# A veth is not running (no carrier) for a moment after `link set up`, and
# libfabric lists only running interfaces: wait until all are up.
links_up() {
    local k st dev devs=veth0
    [ "$hostlocal" = 1 ] && devs="veth0 cni0"
    for k in $(seq 1 "$nhosts"); do
        for dev in $devs; do
            for _ in $(seq 1 100); do
                st=$(ip netns exec "${P}${topo}h$k" cat /sys/class/net/$dev/operstate 2>/dev/null)
                [ "$st" = up ] && break
                sleep 0.05
            done
            if [ "$st" != up ]; then
                echo "$dev of host$k is not up after 5 s (operstate '$st')"
                return 1
            fi
        done
    done
    return 0
}

topo_down() {
    stop_procs
    [ $keep = 1 ] || del_namespaces
}

# ---- one job ----------------------------------------------------------------
# run_job CASE LIMIT PROG [per-host extra env: "k:VAR=VALUE" ...]
# Starts the rendezvous in host 1, 2 ranks per host, waits (at most LIMIT
# seconds each); leaves rc[r], secs[r], out/err files in $work/CASE.
run_job() {
    local cname=$1 limit=$2 prog=$3
    shift 3
    local extra=("$@")
    local d=$work/$cname
    mkdir -p "$d"
    local n=$jobn
    # the rendezvous: host 1, advertising its veth address
    ip netns exec "${P}${topo}h1" unshare --uts sh -c 'hostname host1; exec "$@"' sh \
        "$fc_run" --serve --address "${host_ip[1]}" -t $((limit + 10)) >"$d/server.out" 2>"$d/server.err" &
    server_pid=$!
    local root="" secret=""
    for _ in $(seq 1 50); do
        root=$(sed -n 's/^FC_ROOT_ADDR=//p' "$d/server.out" 2>/dev/null)
        secret=$(sed -n 's/^FC_JOB_SECRET=//p' "$d/server.out" 2>/dev/null)
        [ -n "$root" ] && [ -n "$secret" ] && break
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$root" ] || [ -z "$secret" ]; then
        jobfail="the rendezvous did not start: $(head -c 300 "$d/server.err")"
        stop_procs
        return 1
    fi
    log "$cname: rendezvous $root"
    local k r e envs
    rank_pids=()
    for k in $(seq 1 "$nhosts"); do
        envs=()
        for e in "${extra[@]}"; do
            [ "${e%%:*}" = "$k" ] && envs+=("${e#*:}")
        done
        for r in $(seq 0 $((n - 1))); do
            [ "${rank_host[r]}" = "$k" ] || continue
            (
                t0=$EPOCHREALTIME
                timeout -k 3 "$limit" ip netns exec "${P}${topo}h$k" \
                    unshare --uts sh -c 'hostname "$0"; exec env "$@"' "host$k" \
                    FC_RANK=$r FC_SIZE=$n FC_ROOT_ADDR="$root" FC_JOB_SECRET="$secret" \
                    FC_DEBUG=INFO FC_TIMEOUT=$wait_s FC_BOOT_TIMEOUT=$wait_s "${envs[@]}" "$prog" >"$d/$r.out" 2>"$d/$r.err" </dev/null
                echo "$? $t0 $EPOCHREALTIME" >"$d/$r.rc"
            ) &
            rank_pids+=($!)
        done
    done
    wait "${rank_pids[@]}"
    rank_pids=()
    kill -TERM "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
    server_pid=""
    rc=() secs=()
    for r in $(seq 0 $((n - 1))); do
        local a b c
        read -r a b c <"$d/$r.rc" 2>/dev/null || { a=255 b=0 c=0; }
        rc[r]=$a
        secs[r]=$(awk -v b="$b" -v c="$c" 'BEGIN { printf "%.1f", c - b }')
        if [ $verbose = 1 ]; then
            echo "  --- $cname rank $r (host${rank_host[r]}): exit ${rc[r]} after ${secs[r]} s"
            sed 's/^/  | /' "$d/$r.out" "$d/$r.err"
        fi
    done
    return 0
}

# the world communicator's INFO line of rank r
info_line() { # dir rank n
    grep -m1 "comm .* rank $2 of $3: provider " "$1/$2.err"
}

# the per-peer paths INFO line of a rank on host k of an n-rank job
paths_line() {
    local o=$((per_host[$1] - 1))
    echo "paths: the $o other rank$([ $o = 1 ] || echo s) of node host$1 over shm, the $(($2 - o - 1)) of other nodes over tcp"
}

# check_pass CASE PROVIDER: every rank exited 0 and said the right things
check_pass() {
    local cname=$1 want_prov=$2 d=$work/$1 n=$jobn r line k why=""
    for r in $(seq 0 $((n - 1))); do
        k=${rank_host[r]}
        if [ "${rc[r]}" = 77 ]; then
            result SKIP "$cname" "rank $r: $(tail -n1 "$d/$r.err" | head -c 200)"
            return
        fi
        if [ "${rc[r]}" = 124 ] || [ "${rc[r]}" = 137 ]; then
            local ok=0 q
            for q in $(seq 0 $((n - 1))); do [ "${rc[q]}" = 0 ] && ok=$((ok + 1)); done
            why="rank $r (host$k) hung: killed after ${secs[r]} s ($ok of $n ranks exited 0); its last line: $(tail -n1 "$d/$r.err" | cut -d' ' -f4- | head -c 300)"
            break
        fi
        if [ "${rc[r]}" != 0 ]; then
            why="rank $r (host$k) exited ${rc[r]}: $(grep -v ' INFO ' "$d/$r.err" | tail -n2 | tr '\n' ' ' | head -c 400)"
            break
        fi
        line=$(info_line "$d" "$r" "$n")
        if [ -z "$line" ]; then
            why="rank $r (host$k): no 'comm ... provider' INFO line on stderr"
            break
        fi
        local prov fab dom nn lr ls
        prov=$(sed -n 's/.*: provider \([^ ]*\) (tier.*/\1/p' <<<"$line")
        fab=$(sed -n 's/.*, fabric \([^,]*\), domain .*/\1/p' <<<"$line")
        dom=$(sed -n 's/.*, domain \([^)]*\)); .*/\1/p' <<<"$line")
        nn=$(sed -n 's/.*); \([0-9]*\) nodes\{0,1\}, local rank.*/\1/p' <<<"$line")
        lr=$(sed -n 's/.* local rank \([0-9]*\) of [0-9]*[ ;].*/\1/p' <<<"$line")
        ls=$(sed -n 's/.* local rank [0-9]* of \([0-9]*\)[ ;].*/\1/p' <<<"$line")
        if [ "$prov" != "$want_prov" ]; then
            why="rank $r (host$k): provider '$prov', expected '$want_prov'"
        elif [ "$nn" != "$nhosts" ]; then
            why="rank $r (host$k): $nn nodes, expected $nhosts"
        elif [ "$ls" != "${per_host[k]}" ] || [ "$lr" != "${rank_local[r]}" ]; then
            why="rank $r (host$k): local rank $lr of $ls, expected ${rank_local[r]} of ${per_host[k]}"
        elif [ "$dom" != veth0 ] || [ "$fab" != "${host_net[k]}" ]; then
            why="rank $r (host$k): fabric $fab, domain $dom; expected fabric ${host_net[k]}, domain veth0"
        elif [ "$want_paths" = 1 ] && ! grep -q "$(paths_line "$k" "$n")" "$d/$r.err"; then
            why="rank $r (host$k): no '$(paths_line "$k" "$n")' line"
        elif [ -n "$want_algo" ] && ! grep -q "$want_algo" "$d/$r.err"; then
            why="rank $r (host$k): no '$want_algo' line (FC_ALGO not taken)"
        fi
        [ -n "$why" ] && break
    done
    if [ -z "$why" ] && [ "$(basename "$3")" = api_program ]; then
        if ! grep -q "^api_program: OK ($n ranks, provider $want_prov, $nhosts nodes)" "$d"/*.out; then
            why="no 'api_program: OK ($n ranks, provider $want_prov, $nhosts nodes)' line: $(cat "$d"/0.out | head -c 200)"
        fi
    fi
    if [ -n "$why" ]; then
        result FAIL "$cname" "$why"
    else
        result PASS "$cname" "$n ranks on $nhosts hosts, $want_prov, fabric ${host_net[1]}$([ "$mode" = routed ] && echo ' etc.') on veth0$([ "$hostlocal" = 1 ] && echo ', not the host-local cni0')"
    fi
}

# check_fail CASE MAXSECS PATTERN...: every rank exited nonzero (not a
# timeout) within MAXSECS and every PATTERN (grep -F) is in its stderr
check_fail() {
    local cname=$1 maxs=$2 d=$work/$1 n=$jobn r k why="" p slow=0
    shift 2
    for r in $(seq 0 $((n - 1))); do
        k=${rank_host[r]}
        if [ "${rc[r]}" = 0 ]; then
            why="rank $r (host$k) exited 0: $(info_line "$d" "$r" "$n" | sed 's/.*: provider/provider/' | head -c 200)"
        elif [ "${rc[r]}" = 124 ] || [ "${rc[r]}" = 137 ]; then
            why="rank $r (host$k) hung: killed after ${secs[r]} s"
        elif awk -v s="${secs[r]}" -v m="$maxs" 'BEGIN { exit !(s > m) }'; then
            why="rank $r (host$k) took ${secs[r]} s to fail (limit $maxs s)"
        else
            for p in "$@"; do
                if ! grep -qF -- "$p" "$d/$r.err"; then
                    why="rank $r (host$k): stderr lacks '$p': $(tail -n1 "$d/$r.err" | head -c 400)"
                    break
                fi
            done
        fi
        [ -n "$why" ] && break
        awk -v s="${secs[r]}" -v m="$slow" 'BEGIN { exit !(s > m) }' && slow=${secs[r]}
    done
    if [ -n "$why" ]; then
        result FAIL "$cname" "$why"
    else
        result PASS "$cname" "all $n ranks failed within $slow s with the expected error"
    fi
}

# what check_pass also asks of every rank: its per-peer paths INFO line
# (1) and a line of stderr (grep) naming the algorithm a case forces
want_paths=0
want_algo=""

# ---- the cases ----------------------------------------------------------------
# Each case: a topology (built on its first selected case), a job, a check.
topo_state=""   # "" (none), up, broken

in_topology() { # NAME NHOSTS MODE: make it the current one
    if [ "$topo_state" != "" ] && [ "$topo" = "$1" ]; then
        return
    fi
    [ "$topo_state" != "" ] && topo_down
    if topo_up "$@" >"$work/topo-$1.err" 2>&1; then
        topo_state=up
    else
        topo_state=broken
    fi
    topo=$1
}

selected() { [ -z "$only" ] || [[ $1 =~ $only ]]; }

# pass_case NAME LIMIT PROG PROVIDER [K:VAR=VALUE...]
pass_case() {
    local cname=$where-$1 limit=$2 prog=$3 prov=$4
    shift 4
    selected "$cname" || return 0
    in_topology "${spec[@]}"
    if [ "$topo_state" = broken ]; then
        result FAIL "$cname" "building the namespaces: $(tr '\n' ' ' <"$work/topo-$topo.err" | head -c 300)"
    elif run_job "$cname" "$limit" "$tdir/$prog" "$@"; then
        check_pass "$cname" "$prov" "$prog"
    else
        result FAIL "$cname" "$jobfail"
    fi
}

# fail_case NAME LIMIT PROG MAXSECS [K:VAR=VALUE...] -- PATTERN...
fail_case() {
    local cname=$where-$1 limit=$2 prog=$3 maxs=$4
    shift 4
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        envs+=("$1")
        shift
    done
    shift
    selected "$cname" || return 0
    in_topology "${spec[@]}"
    if [ "$topo_state" = broken ]; then
        result FAIL "$cname" "building the namespaces: $(tr '\n' ' ' <"$work/topo-$topo.err" | head -c 300)"
    elif run_job "$cname" "$limit" "$tdir/$prog" "${envs[@]}"; then
        check_fail "$cname" "$maxs" "$@"
    else
        result FAIL "$cname" "$jobfail"
    fi
}

for s in "flat2 2 flat 0" "flat4 4 flat 1" "routed2 2 routed 0" "routed4 4 routed 1" \
    "uneven3 3 flat 0 3,1,2"; do
    read -r -a spec <<<"$s"
    t=${spec[0]} nh=${spec[1]}
    where="${nh}hosts-$([ "${spec[2]}" = flat ] && echo samesubnet || echo routed)"
    [ -n "${spec[4]:-}" ] && where="${nh}hosts-${spec[4]//,/-}ranks"
    for prog in allreduce broadcast api_program; do
        pass_case "$prog" 45 "$prog" "tcp;ofi_rxm"
    done
    # the node-aware (hier) algorithms, forced, over per-peer paths (shm on
    # a host, tcp across): every element of the sweep's quick list, and the
    # barrier's ordering
    hier=allreduce:hier,bcast:hier,reduce:hier,allgather:hier,reduce_scatter:hier,barrier:hier
    env=()
    for k in $(seq 1 "$nh"); do
        env+=("$k:FC_ALGO=$hier" "$k:FT_SWEEP=quick" "$k:FC_DEBUG_SUBSYS=INIT,COLL" "$k:FC_CHUNK_SIZE=4K")
    done
    want_paths=1
    pass_case hier-sweep 120 sweep "tcp;ofi_rxm" "${env[@]}"
    want_algo="barrier #0 (hier, 0 x uint8): chosen by FC_ALGO"
    env2=()
    for k in $(seq 1 "$nh"); do env2+=("$k:FC_ALGO=$hier" "$k:FC_DEBUG=TRACE" "$k:FC_DEBUG_SUBSYS=INIT,COLL"); done
    pass_case hier-barrier 60 barrier "tcp;ofi_rxm" "${env2[@]}"
    want_paths=0 want_algo=""
    if [ "$t" = flat2 ] || [ "$t" = routed4 ]; then
        # host 2 offers only sockets, the others everything: sockets for all
        pass_case mixed-sockets 45 api_program sockets "2:FI_PROVIDER=sockets"
        # nothing in common: every rank fails, promptly, naming what each has
        fail_case no-common-provider 40 api_program 20 "1:FI_PROVIDER=tcp" "2:FI_PROVIDER=sockets" \
            -- "no libfabric provider is usable by all $((nh * 2)) ranks" \
            "rank 0 (host1): tcp;ofi_rxm" "rank 2 (host2): sockets"
    fi
    if [ "$t" = flat2 ] || [ "$t" = routed2 ]; then
        # shm cannot cross hosts
        env=()
        for k in $(seq 1 "$nh"); do env+=("$k:FI_PROVIDER=shm"); done
        fail_case shm-across-hosts 40 api_program 20 "${env[@]}" -- "shm: ranks on $nh nodes" "shm cannot be used across nodes"
    fi
    if [ "$t" = flat2 ]; then
        # host 2's tcp sees only lo (as when its interface is down or not up
        # yet; FI_TCP_IFACE=lo stands in for that, the rendezvous still
        # needs veth0): every rank must fail promptly saying so, not open lo
        # on host 2 and fail or hang in the connectivity check
        fail_case tcp-only-on-lo-on-host2 40 api_program 20 "1:FI_PROVIDER=tcp" \
            "2:FI_PROVIDER=tcp" "2:FI_TCP_IFACE=lo" -- "rank 2 (host host2) has it only on loopback"
    fi
done
[ "$topo_state" != "" ] && topo_down

t=$(awk -v a="$t_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }')
echo "$npass passed, $nfail failed, $nskip skipped ($t s)"
[ $nfail = 0 ]
