#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Per-peer paths on one machine playing several nodes (FC_NODE per rank):
# ranks of one pretend node talk over shm, ranks of different ones over
# tcp, in one communicator. Every layout runs the collectives with every
# element checked (sweep's quick list: odd counts around the chunks, in
# place and out of place) and says at init which path each class of peer
# takes; uneven nodes and one rank per node included. The node-aware
# algorithms (hier) of allreduce, broadcast, reduce, allgather,
# reduce-scatter and barrier run forced on every layout, and the tuner
# takes the allreduce at 1 MiB on 2 nodes x 2. fc_comm_query_peer names each
# peer's path on every layout. FC_PATHS=single keeps one
# provider; FI_PROVIDER=tcp leaves no shm to take, and says so.
set -u
here=$(cd "$(dirname "$0")" && pwd)
fc_run=${FC_RUN:-$here/../../fc_run}
bindir=${FT_BINDIR:-$here}
perf="$(cd "$(dirname "$fc_run")" && pwd)/fc_perf"
fails=0
check() { # description, expected, actual
    if [ "$2" = "$3" ]; then echo "PASS $1"; else echo "FAIL $1: expected '$2', got '$3'"; fails=$((fails + 1)); fi
}
# layout: a shell expression of $FC_RANK giving its node, e.g. '$((FC_RANK / 2))'
run() { # ranks layout [fc_run arguments...] -- program [arguments...]
    local n=$1 layout=$2; shift 2
    local pre=(); while [ "$1" != -- ]; do pre+=("$1"); shift; done; shift
    "$fc_run" -n "$n" -t 120 -x FI_PROVIDER=shm,tcp -x FC_DEBUG=INFO -x FC_DEBUG_SUBSYS=INIT,NET \
        -x FC_TIMEOUT=30 "${pre[@]}" sh -c "FC_NODE=n$layout exec \"\$@\"" sh "$@" 2>&1
    echo "fc_run: rc=$?"
}
# "ok" when every rank passed (fc_run's status 0), else the last lines
verdict() { grep -q '^fc_run: rc=0$' <<<"$1" && echo ok || { echo "$1" | tail -5; }; }
layouts=('4|$((FC_RANK / 2))|2+2' '5|$((FC_RANK < 3 ? 0 : 1))|3+2'
         '4|$((FC_RANK == 0 ? 0 : FC_RANK < 3 ? 1 : 2))|1+2+1' '6|$((FC_RANK % 3))|2+2+2 interleaved')
for l in "${layouts[@]}"; do
    IFS='|' read -r n expr name <<<"$l"
    out=$(run "$n" "$expr" -x FC_CHUNK_SIZE=4K -- "$bindir/sweep" -q)
    check "$name: sweep over shm and tcp, every element" ok "$(verdict "$out")"
    check "$name: every rank says its paths" "$n" "$(grep -c 'paths: the [0-9]* other rank.* over shm, the [0-9]* of other nodes over tcp' <<<"$out")"
done
for l in "${layouts[@]}"; do
    IFS='|' read -r n expr name <<<"$l"
    out=$(run "$n" "$expr" -- "$bindir/query_peer" paths)
    check "$name: fc_comm_query_peer: shm to the ranks of its node, tcp to the others" ok \
        "$(verdict "$out")"
done
out=$(run 4 '$((FC_RANK / 2))' -- "$bindir/allreduce")
check "2+2 allreduce test" ok "$(verdict "$out")"
check "2+2: rank's node peers over shm" 4 "$(grep -c 'paths: the 1 other rank of node n[01] over shm, the 2 of other nodes over tcp' <<<"$out")"
for l in "${layouts[@]}"; do
    IFS='|' read -r n expr name <<<"$l"
    hier=allreduce:hier,bcast:hier,reduce:hier,allgather:hier,reduce_scatter:hier,barrier:hier
    out=$(run "$n" "$expr" -x FC_ALGO=$hier -x FC_CHUNK_SIZE=4K -- \
        "$bindir/sweep" -q -C allreduce,broadcast,reduce,allgather,reduce_scatter)
    check "$name: the node-aware allreduce, broadcast, reduce, allgather and reduce-scatter (hier), every element" \
        ok "$(verdict "$out")"
    out=$(run "$n" "$expr" -x FC_ALGO=$hier -x FC_DEBUG=TRACE -x FC_DEBUG_SUBSYS=COLL -- \
        "$bindir/barrier")
    check "$name: the node-aware barrier (hier): nobody leaves before the last arrives" ok \
        "$(verdict "$out")"
    check "$name: every rank ran the node-aware barrier" "$n" \
        "$(grep -c 'barrier #0 (hier, 0 x uint8): chosen by FC_ALGO' <<<"$out")"
done
out=$("$fc_run" -n 4 -t 60 -x FI_PROVIDER=shm,tcp -x FC_DEBUG=TRACE -x FC_DEBUG_SUBSYS=COLL \
    sh -c 'FC_NODE=n$((FC_RANK / 2)) exec "$@"' sh "$perf" -b 1M -e 1M -n 1 -w 0 -c 2>&1)
check "2+2, 1 MiB: the tuner takes the node-aware allreduce on every rank" 4 \
    "$(grep -c 'allreduce #0 (hier, 262144 x float32): chosen by cost model' <<<"$out")"
out=$(run 4 '$((FC_RANK))' -- "$bindir/allreduce")
check "one rank per node: the network only, no paths" "0" "$(grep -c 'paths:' <<<"$out")"
out=$(run 4 '$((FC_RANK / 2))' -x FC_PATHS=single -- "$bindir/broadcast")
check "FC_PATHS=single: one provider, no paths" "0" "$(grep -c 'paths:' <<<"$out")"
out=$(run 4 '$((FC_RANK / 2))' -x FC_PATHS=single -- "$bindir/query_peer")
check "FC_PATHS=single: fc_comm_query_peer gives every peer fc_comm_query's path" ok \
    "$(verdict "$out")"
out=$("$fc_run" -n 4 -t 120 -x FI_PROVIDER=tcp -x FC_DEBUG=INFO -x FC_DEBUG_SUBSYS=INIT,NET \
    sh -c 'FC_NODE=n$((FC_RANK / 2)) exec "$@"' sh "$bindir/allgather" 2>&1)
check "FI_PROVIDER=tcp: no shm, and every rank says why" 4 "$(grep -c 'ranks of one node talk over tcp;ofi_rxm too: rank 0 .* has no shm provider (FI_PROVIDER narrows' <<<"$out")"
[ $fails = 0 ] && echo "paths_test: passed" || echo "paths_test: $fails failed"
[ $fails = 0 ]
