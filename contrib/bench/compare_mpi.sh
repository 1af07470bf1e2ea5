#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# fabcoll vs Open MPI, side by side, in one run on this machine:
#   fabcoll over shm        vs  Open MPI --mca btl self,vader
#   fabcoll over tcp        vs  Open MPI --mca btl self,tcp
#                           and Open MPI --mca pml cm --mca mtl ofi (FI_PROVIDER=tcp:
#                               the same libfabric provider fabcoll uses)
# The MPI side is contrib/bench/mpi_bench.c, timed as fc_perf times by
# default (nccl-tests' method: warm-up, a barrier, N calls back to back,
# total/N, the largest over ranks).
# Configurations are interleaved round by round so that machine noise hits
# both sides alike. Prints busbw per size for every configuration, the
# fabcoll/MPI ratios, 8-byte latencies, the seed article's latency table,
# and writes busbw.png.
#
# Usage: compare_mpi.sh [-b BUILDDIR] [-n RANKS] [-C COLLS] [-e MAXBYTES] [-i ITERS]
#                       [-w WARMUP] [-r ROUNDS] [-o OUTDIR]
# COLLS: comma separated, of allreduce bcast allgather alltoall allgatherv
# alltoallv (default allreduce,bcast); sizes of the last four are the whole
# buffer of n blocks, the v-collectives with even counts (as OSU's).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$here/../.." && pwd)
ranks=2 maxb=32M iters=20 warm=5 rounds=1 out=bench-out colls=allreduce,bcast
while getopts "b:n:C:e:i:w:r:o:h" o; do
    case $o in
    b) build=$(cd "$OPTARG" && pwd) ;;
    n) ranks=$OPTARG ;;
    C) colls=$OPTARG ;;
    e) maxb=$OPTARG ;;
    i) iters=$OPTARG ;;
    w) warm=$OPTARG ;;
    r) rounds=$OPTARG ;;
    o) out=$OPTARG ;;
    *) awk 'NR > 2 && !/^#/ { exit } NR > 2 { sub(/^# ?/, ""); print }' "$0"; exit 2 ;;
    esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
for tool in mpicc mpirun python3; do
    command -v $tool >/dev/null || { echo "compare_mpi: $tool is missing (contrib/ci/install-deps.sh --full)" >&2; exit 1; }
done
[ -x "$build/fc_run" ] && [ -x "$build/fc_perf" ] || { echo "compare_mpi: build fabcoll first (fc_run, fc_perf in $build)" >&2; exit 1; }
mpicc -O2 -o "$out/mpi_bench" "$here/mpi_bench.c"

sweep=(-C "$colls" -b 8 -e "$maxb" -f 2 -n "$iters" -w "$warm")
mpirun_=(mpirun --allow-run-as-root --oversubscribe -n "$ranks" --bind-to none)
run_cfg() { # name
    case $1 in
    fabcoll-shm) "$build/fc_run" -n "$ranks" -p shm "$build/fc_perf" --csv "${sweep[@]}" ;;
    fabcoll-tcp) "$build/fc_run" -n "$ranks" -p tcp "$build/fc_perf" --csv "${sweep[@]}" ;;
    ompi-vader) "${mpirun_[@]}" --mca pml ob1 --mca btl self,vader "$out/mpi_bench" "${sweep[@]}" -l ompi-vader ;;
    ompi-tcp) "${mpirun_[@]}" --mca pml ob1 --mca btl self,tcp "$out/mpi_bench" "${sweep[@]}" -l ompi-tcp ;;
    ompi-ofi-tcp) FI_PROVIDER=tcp "${mpirun_[@]}" -x FI_PROVIDER=tcp --mca pml cm --mca mtl ofi \
        --mca mtl_ofi_provider_exclude "" "$out/mpi_bench" "${sweep[@]}" -l ompi-ofi-tcp ;;
    esac
}
cfgs=(fabcoll-shm ompi-vader fabcoll-tcp ompi-tcp ompi-ofi-tcp)
for c in "${cfgs[@]}"; do : >"$out/$c.csv"; done
for r in $(seq 1 "$rounds"); do
    for c in "${cfgs[@]}"; do
        echo "compare_mpi: round $r/$rounds: $c" >&2
        if ! run_cfg "$c" >"$out/$c.round$r.csv" 2>"$out/$c.round$r.err"; then
            echo "compare_mpi: $c failed:" >&2
            tail -5 "$out/$c.round$r.err" >&2
        fi
        cat "$out/$c.round$r.csv" >>"$out/$c.csv"
    done
done
python3 "$here/report.py" "$out" "${cfgs[@]}"
