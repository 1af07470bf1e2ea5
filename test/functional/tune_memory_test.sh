#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# FC_TUNE_MEMORY: device tuning gives small allreduces (n vectors of at most
# 32 KiB) to gather, the fused device path's algorithm, on every rank or on
# none: the ranks agree at init, so one rank asking for it changes nothing.
# Read from the TRACE line of each call ("chosen by ...") and the INFO line
# at init; every run also checks its results (fc_perf -c). Last, the
# pipeline chunk: host keeps the provider's, where a GPU would cut 512 KiB.
set -u
here=$(cd "$(dirname "$0")" && pwd)
fc_run=${FC_RUN:-$here/../../fc_run}
perf="$(cd "$(dirname "$fc_run")" && pwd)/fc_perf"
fails=0
check() { # description, expected, actual
    if [ "$2" = "$3" ]; then echo "PASS $1"; else echo "FAIL $1: expected '$2', got '$3'"; fails=$((fails + 1)); fi
}
picks() { # fc_run arguments (before the program) -- fc_perf arguments: "algo (why) xN, ..."
    local pre=() ; while [ "$1" != -- ]; do pre+=("$1"); shift; done; shift
    "$fc_run" -t 60 -x FC_DEBUG=TRACE -x FC_DEBUG_SUBSYS=COLL "${pre[@]}" "$perf" -c -n 1 -w 0 "$@" 2>&1 |
        grep -o 'allreduce #0 ([a-z_]*, [0-9]* x float32): chosen by [^,]*' |
        sed 's/allreduce #0 (\([a-z_]*\), [0-9]* x float32): chosen by \(.*\)/\1 (\2)/' |
        sort | uniq -c | awk '{n=$1; $1=""; printf "%s%s x%s, ", substr($0,2), "", n}' | sed 's/, $//'
}
dev='gather (device tuning (FC_TUNE_MEMORY: one GPU trip)) x4'
check "4 ranks, 2 KiB, FC_TUNE_MEMORY=device: gather on every rank" "$dev" \
    "$(picks -n 4 -p shm -x FC_TUNE_MEMORY=device -- -b 2K -e 2K)"
check "the same at 8 KiB (4 x 8 KiB: the whole range) over tcp" "$dev" \
    "$(picks -n 4 -p tcp -x FC_TUNE_MEMORY=device -- -b 8K -e 8K)"
# (which algorithm the cost model takes depends on the CPUs: not checked)
check "16 KiB at 4 ranks is past the range: the cost model" "(cost model) x4" \
    "$(picks -n 4 -p shm -x FC_TUNE_MEMORY=device -- -b 16K -e 16K | sed 's/^[a-z_]* //')"
check "FC_TUNE_MEMORY=host: the cost model" "(cost model) x4" \
    "$(picks -n 4 -p shm -x FC_TUNE_MEMORY=host -- -b 2K -e 2K | sed 's/^[a-z_]* //')"
check "FC_ALGO still decides" "ring (FC_ALGO) x4" \
    "$(picks -n 4 -p shm -x FC_TUNE_MEMORY=device -x FC_ALGO=allreduce:ring -- -b 2K -e 2K)"
# one rank alone asking: everyone stays on the host model, one algorithm
# (a mismatch would hang or fail the call), and that rank says why
out=$("$fc_run" -n 4 -p shm -t 60 -x FC_DEBUG=TRACE -x FC_DEBUG_SUBSYS=COLL,TUNE \
    -x FC_TUNE_MEMORY=host sh -c \
    '[ "$FC_RANK" = 2 ] && export FC_TUNE_MEMORY=device; exec "$0" -c -n 1 -w 0 -b 2K -e 2K' \
    "$perf" 2>&1)
check "only rank 2 asks: one algorithm by the cost model on every rank, results right" "4 1 1" \
    "$(echo "$out" | grep -c 'allreduce #0 ([a-z_]*, 512 x float32): chosen by cost model') $(echo "$out" |
        grep -o 'allreduce #0 ([a-z_]*' | sort -u | wc -l) $(echo "$out" | grep -c '# all results correct')"
check "... and rank 2 says a rank does not ask for device tuning" 1 \
    "$(echo "$out" | grep -c 'tuned for host buffers: a rank does not ask for device tuning')"
# auto (the default): device tuning where every rank sees a GPU
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then want=device; else want=host; fi
check "auto, GPU here: $( [ $want = device ] && echo yes || echo no): tuned for $want buffers on every rank" 4 \
    "$("$fc_run" -n 4 -p shm -t 60 -x FC_DEBUG=INFO -x FC_DEBUG_SUBSYS=TUNE "$perf" -n 1 -w 0 -b 8 -e 8 2>&1 |
        grep -c "tuned for $want buffers")"
# the pipeline chunk: 512 KiB where rank 0 has a GPU (staging), unless
# FC_TUNE_MEMORY=host, which keeps the provider's own (shm, 4 ranks: 4 MiB)
chunk() { "$fc_run" -n 4 -p shm -t 60 -x FC_DEBUG=INFO -x FC_DEBUG_SUBSYS=INIT "$@" "$perf" -n 1 -w 0 -b 8 -e 8 2>&1 |
    grep -o 'chunk [0-9]*,' | sort | uniq -c | awk '{printf "%s %s ", $1, $3}'; }
check "FC_TUNE_MEMORY=host: shm's own 4 MiB chunks on every rank" "4 4194304, " "$(chunk -x FC_TUNE_MEMORY=host)"
[ $want = device ] && ch=524288 || ch=4194304
check "auto, GPU here: $( [ $want = device ] && echo yes || echo no): chunks of $ch bytes" "4 $ch, " "$(chunk)"
[ $fails = 0 ] && echo "tune_memory_test: passed" || echo "tune_memory_test: $fails failed"
[ $fails = 0 ]
