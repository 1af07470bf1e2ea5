#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The seed article's table (allreduce latency at 256 KiB, 1 MiB, 16 MiB per
# provider, side by side, with the speed-up of the fastest over the slowest)
# from one command: runs `fc_perf --table-file` once per provider into one
# table file and prints the table the last run prints.
#
# Usage: seed_table.sh [-b BUILDDIR] [-n RANKS] [-p "PROV PROV ..."]
#                      [-l fc_run|srun] [-o FILE] [-- fc_perf options]
#   -p   providers (default: tcp, shm, and every RDMA provider fi_info lists
#        among verbs efa psm3 cxi opx)
#   -l   launcher: fc_run (this node, default) or srun (--mpi=pmix, inside an
#        allocation: the seed's multi-node case)
#   -o   the table file (default: a temporary file, removed afterwards)
#   fc_perf options after -- apply to every run, e.g. -- -n 50 -c -D cuda
# Exit status: the first failing run's, or 0.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$here/../.." && pwd)
ranks=2 provs="" launcher=fc_run file=""
while getopts "b:n:p:l:o:h" o; do
    case $o in
    b) build=$(cd "$OPTARG" && pwd) ;;
    n) ranks=$OPTARG ;;
    p) provs=$OPTARG ;;
    l) launcher=$OPTARG ;;
    o) file=$OPTARG ;;
    *) awk 'NR > 2 && !/^#/ { exit } NR > 2 { sub(/^# ?/, ""); print }' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
perf="$build/fc_perf"
[ -x "$perf" ] || perf=$(command -v fc_perf || true)
[ -n "$perf" ] && [ -x "$perf" ] || { echo "seed_table: fc_perf not found (build fabcoll, or -b BUILDDIR)" >&2; exit 1; }
if [ -z "$provs" ]; then
    provs="tcp shm"
    if command -v fi_info >/dev/null; then
        for p in verbs efa psm3 cxi opx; do
            fi_info -p "$p" -t FI_EP_RDM >/dev/null 2>&1 && provs="$provs $p"
        done
    fi
fi
tmp=""
if [ -z "$file" ]; then
    tmp=$(mktemp)
    file=$tmp
    rm -f "$file"
fi
trap '[ -n "$tmp" ] && rm -f "$tmp"' EXIT
rc=0 out=""
for p in $provs; do
    echo "seed_table: allreduce on $p, $ranks ranks" >&2
    case $launcher in
    fc_run) run=("$build/fc_run" -n "$ranks" -p "$p") ;;
    srun) run=(env FI_PROVIDER="$p" srun --mpi=pmix -n "$ranks") ;;
    *) echo "seed_table: unknown launcher $launcher (fc_run or srun)" >&2; exit 2 ;;
    esac
    r=0
    o1=$("${run[@]}" "$perf" --table-file "$file" "$@") || r=$?
    if [ $r = 0 ]; then
        out=$o1 # the latest table holds every row so far
    else
        echo "seed_table: the run on $p failed (status $r); its row is left out" >&2
        [ $rc = 0 ] && rc=$r
    fi
done
[ -n "$out" ] && echo "$out"
exit $rc
