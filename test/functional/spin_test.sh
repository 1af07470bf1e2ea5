#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# FC_SPIN's auto default: ranks that outnumber the CPUs they may run on (the
# union of their affinity masks) yield at once (spin 1); ranks with a CPU
# each poll 2000 times first; an explicit FC_SPIN holds either way. Read
# from the INFO line each rank logs at init; the runs must also succeed.
# The same ratio reaches the cost model, and a repeated call keeps its
# algorithm (checked at the end).
set -u
here=$(cd "$(dirname "$0")" && pwd)
fc_run=${FC_RUN:-$here/../../fc_run}
bindir=${FT_BINDIR:-$here}
prog="$bindir/api_program"
fails=0
check() { # description, expected, actual
    if [ "$2" = "$3" ]; then echo "PASS $1"; else echo "FAIL $1: expected '$2', got '$3'"; fails=$((fails + 1)); fi
}
command -v taskset >/dev/null || { echo "SKIP: no taskset (util-linux)"; exit 77; }
spins() { # fc_run arguments: the spin each rank logged, sorted, one line
    "$@" 2>&1 | grep -o 'INFO INIT [a-z_]*: comm .* spin [0-9]*' | grep -o 'spin [0-9]*$' |
        sort | uniq -c | awk '{printf "%s x%s ", $3, $1}' | sed 's/ $//'
}
check "2 ranks on 1 CPU (taskset -c 0): spin 1 on each" "1 x2" \
    "$(spins taskset -c 0 "$fc_run" -n 2 -p shm -t 60 -x FC_DEBUG=INFO "$prog")"
check "the same, the INFO line says why" 2 \
    "$(taskset -c 0 "$fc_run" -n 2 -p tcp -t 60 -x FC_DEBUG=INFO "$prog" 2>&1 |
        grep -c 'more ranks than CPUs here: waits yield at once')"
check "2 ranks on 1 CPU with FC_SPIN=500: spin 500" "500 x2" \
    "$(spins taskset -c 0 "$fc_run" -n 2 -p shm -t 60 -x FC_DEBUG=INFO -x FC_SPIN=500 "$prog")"
check "1 rank: spin 2000" "2000 x1" \
    "$(spins "$fc_run" -n 1 -p shm -t 60 -x FC_DEBUG=INFO "$prog")"
if [ "$(nproc)" -ge 2 ]; then
    check "2 ranks on 2 CPUs (taskset -c 0,1): spin 2000" "2000 x2" \
        "$(spins taskset -c 0,1 "$fc_run" -n 2 -p shm -t 60 -x FC_DEBUG=INFO "$prog")"
    check "2 ranks on 2 CPUs: the cost model is told of no shared CPUs" 0 \
        "$(taskset -c 0,1 "$fc_run" -n 2 -p shm -t 60 -x FC_DEBUG=INFO "$prog" 2>&1 |
            grep -c 'ranks per CPU on a node')"
fi
# The cost model hears of the shared CPUs (every rank, the same ratio) and
# leans to trees: a 1 MiB broadcast at 4 ranks takes the binomial tree,
# where with a CPU per rank it takes scatter + allgather (test_sim.c)
check "4 ranks on 1 CPU: each logs 4 ranks per CPU for the cost model" 4 \
    "$(taskset -c 0 "$fc_run" -n 4 -p shm -t 60 -x FC_DEBUG=INFO -x FC_DEBUG_SUBSYS=TUNE "$prog" 2>&1 |
        grep -c 'up to 4 ranks per CPU on a node')"
perf="$(cd "$(dirname "$fc_run")" && pwd)/fc_perf"
check "4 ranks on 1 CPU: a 1 MiB broadcast takes the binomial tree on every rank" "binomial x4" \
    "$(taskset -c 0 "$fc_run" -n 4 -p shm -t 60 -x FC_DEBUG=TRACE -x FC_DEBUG_SUBSYS=COLL \
        "$perf" -C bcast -b 1M -e 1M -n 1 -w 0 2>&1 | grep -o 'bcast #[0-9]* ([a-z_]*' |
        grep -o '([a-z_]*' | tr -d '(' | sort | uniq -c | awk '{printf "%s x%s ", $2, $1}' |
        sed 's/ $//')"
# A call repeated with the same arguments keeps its first choice without
# running the cost functions again: 3 + 1 warm-up 8-byte allreduces per
# rank, the first chosen by the cost model, the others "the same call
# before", one algorithm throughout
choices="$("$fc_run" -n 2 -p shm -t 60 -x FC_DEBUG=TRACE -x FC_DEBUG_SUBSYS=COLL \
    "$perf" -b 8 -e 8 -n 3 -w 1 2>&1 | grep -o 'allreduce #[0-9]* ([a-z_]*, 2 x float32): chosen by [a-z ]*')"
check "2 ranks, 4 identical 8-byte allreduces: chosen by the cost model once per rank" \
    "2 cost model, 6 the same call before" \
    "$(echo "$choices" | grep -o 'chosen by .*' | sed 's/chosen by //' | sort | uniq -c |
        awk '{n=$1; $1=""; printf "%s%s,", n, $0}' | sed 's/,$//; s/,/, /g')"
check "the same, one algorithm throughout" 1 \
    "$(echo "$choices" | grep -o '([a-z_]*' | sort -u | wc -l)"
[ $fails = 0 ] && echo "spin_test: passed" || echo "spin_test: $fails failed"
[ $fails = 0 ]
