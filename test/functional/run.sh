#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# fabtests-style runner for fabcoll's functional tests.
#
#   run.sh [-p PROVIDER] [-n RANKS] [-l LAUNCHER] [-t SECONDS] [-x VAR=VALUE]...
#          [-e TEST]... [TEST...]
#
# Runs each test (default: all) as a real multi-process job and prints one
# line per test, then "N passed, N failed, N skipped". Exit status 0 when
# nothing failed.
#
#   -p PROVIDER   libfabric provider (FI_PROVIDER), e.g. tcp or shm; tests
#                 listed in exclude/PROVIDER are skipped with their reason
#   -n RANKS      ranks per job (default 2)
#   -l LAUNCHER   fc_run (default), srun (plain, no PMI), srun-pmix,
#                 srun-pmi2, mpirun
#   -t SECONDS    wall-clock limit per test (default 180)
#   -x VAR=VALUE  extra environment for the ranks (repeatable)
#   -e TEST       leave TEST out (repeatable; for runs that cover it elsewhere)
#   -b DIR        where the test binaries are (default: this script's dir)
#   -v            show the output of passing tests too
#
# A test exits 0 (pass), 77 (not run: it prints why) or anything else (fail).
set -u

here=$(cd "$(dirname "$0")" && pwd)
bindir=${FT_BINDIR:-$here}
top=$(cd "$here/../.." && pwd)
fc_run=${FC_RUN:-}
provider=""
ranks=2
launcher=fc_run
limit=180
verbose=0
extra=()
leave=()

usage() { sed -n '3,26p' "$0" | sed 's/^# \{0,1\}//'; }

while getopts "p:n:l:t:x:e:b:vh" o; do
    case $o in
    p) provider=$OPTARG ;;
    n) ranks=$OPTARG ;;
    l) launcher=$OPTARG ;;
    t) limit=$OPTARG ;;
    x) extra+=("$OPTARG") ;;
    e) leave+=("$OPTARG") ;;
    b) bindir=$OPTARG ;;
    v) verbose=1 ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))

if [ -z "$fc_run" ]; then
    for c in "$bindir/../../fc_run" "$top/fc_run" "$(command -v fc_run 2>/dev/null)"; do
        if [ -n "$c" ] && [ -x "$c" ]; then fc_run=$c; break; fi
    done
fi

# name | how it starts (job: under the launcher; self: starts its own ranks)
#      | minimum ranks | environment (-x VAR=VALUE overrides it: sweep runs its
#      quick list here, and the whole one with -x FT_SWEEP=full)
all_tests=(
    "allreduce|job|1|"
    "broadcast|job|1|"
    "reduce|job|1|"
    "allgather|job|1|"
    "reduce_scatter|job|1|"
    "alltoall|job|1|"
    "gather_scatter|job|1|"
    "vcoll|job|1|"
    "group|job|1|"
    "reproducible|job|1|FC_REPRODUCIBLE=1"
    "fp8_premul|job|1|"
    "memreg|job|1|"
    "barrier|job|1|"
    "sendrecv|job|2|"
    "p2p_mismatch|job|2|FC_CHUNK_SIZE=64K"
    "coll_mismatch|job|2|FC_TIMEOUT=2"
    "nonblocking|job|1|"
    "split|job|1|"
    "query_peer|job|1|"
    "api_program|job|1|"
    "gpu_collectives|job|1|"
    "sweep|job|1|FT_SWEEP=quick"
    "bad_args|job|1|"
    "timeout|job|2|FC_TIMEOUT=2"
    "peer_exit|job|2|FC_TIMEOUT=3"
    "shrink|job|2|FC_TIMEOUT=2"
    "hang_report|job|2|FC_TIMEOUT=4"
    "gpu_peer_exit|job|2|FC_TIMEOUT=3"
    "bad_provider|job|1|FI_PROVIDER=verbs"
    "uid|self|1|"
)

want=("$@")
exclude_file="$here/exclude/${provider:-none}"

excluded() { # prints the reason when test $1 is excluded for this provider
    [ -f "$exclude_file" ] || return 1
    local line
    line=$(grep -E "^$1([[:space:]]|$)" "$exclude_file" | head -1) || return 1
    [ -n "$line" ] || return 1
    echo "${line#*#}"
}

launch() { # bin, env...
    local bin=$1; shift
    local envs=("$@" "${extra[@]}")
    [ -n "$provider" ] && envs=("FI_PROVIDER=$provider" "${envs[@]}")
    # a test's own FI_PROVIDER (bad_provider) wins: it comes last
    local e
    local -a fixed=()
    for e in "${envs[@]}"; do fixed+=("$e"); done
    case $launcher in
    fc_run)
        local xs=()
        for e in "${fixed[@]}"; do xs+=(-x "$e"); done
        "$fc_run" -q -n "$ranks" -t "$limit" "${xs[@]}" "$bin" ;;
    srun|srun-pmix|srun-pmi2)
        local mpi=none
        [ "$launcher" = srun-pmix ] && mpi=pmix
        [ "$launcher" = srun-pmi2 ] && mpi=pmi2
        timeout -k 5 "$limit" srun -n "$ranks" -O --mpi=$mpi --kill-on-bad-exit=1 \
            env "${fixed[@]}" "$bin" ;;
    mpirun)
        local xs=()
        for e in "${fixed[@]}"; do xs+=(-x "$e"); done
        timeout -k 5 "$limit" mpirun --allow-run-as-root --oversubscribe -n "$ranks" \
            --mca btl self,tcp --mca pml ob1 "${xs[@]}" "$bin" ;;
    *)
        echo "unknown launcher $launcher" >&2; return 2 ;;
    esac
}

pass=0 fail=0 skip=0
failed_names=()
for spec in "${all_tests[@]}"; do
    IFS='|' read -r name how minr envspec <<<"$spec"
    left=0
    for w in "${leave[@]}"; do [ "$w" = "$name" ] && left=1; done
    [ $left = 1 ] && continue
    if [ ${#want[@]} -gt 0 ]; then
        match=0
        for w in "${want[@]}"; do [ "$w" = "$name" ] && match=1; done
        [ $match = 1 ] || continue
    fi
    label="$name (${provider:-any provider}, $ranks rank$([ "$ranks" = 1 ] || echo s), $launcher)"
    if reason=$(excluded "$name"); then
        echo "SKIP $label:${reason}"
        skip=$((skip + 1)); continue
    fi
    if [ "$ranks" -lt "$minr" ]; then
        echo "SKIP $label: needs at least $minr ranks"
        skip=$((skip + 1)); continue
    fi
    bin="$bindir/$name"
    if [ ! -x "$bin" ]; then
        echo "SKIP $label: $bin is not built"
        skip=$((skip + 1)); continue
    fi
    envs=(FC_TIMEOUT=60 FC_BOOT_TIMEOUT=60)
    [ -n "$envspec" ] && envs+=($envspec)
    out=$(mktemp)
    t0=$(date +%s.%N)
    if [ "$how" = self ]; then
        (
            for e in "${envs[@]}" "${extra[@]}"; do export "$e"; done
            [ -n "$provider" ] && export FI_PROVIDER="$provider"
            timeout -k 5 "$limit" "$bin" "$ranks"
        ) >"$out" 2>&1
        rc=$?
    else
        launch "$bin" "${envs[@]}" >"$out" 2>&1
        rc=$?
    fi
    t1=$(date +%s.%N)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    if [ $rc = 0 ]; then
        echo "PASS $label ${secs}s"
        [ $verbose = 1 ] && sed 's/^/    /' "$out"
        pass=$((pass + 1))
    elif [ $rc = 77 ]; then
        echo "SKIP $label: $(grep -m1 'not run:' "$out" | sed 's/.*not run: //')"
        skip=$((skip + 1))
    else
        what="exit status $rc"
        [ $rc = 124 ] && what="timed out after ${limit}s"
        echo "FAIL $label ${secs}s: $what"
        tail -n 40 "$out" | sed 's/^/    /'
        fail=$((fail + 1))
        failed_names+=("$name")
    fi
    rm -f "$out"
done
echo "$pass passed, $fail failed, $skip skipped"
[ $fail = 0 ]
