#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# fabcoll vs NCCL on the GPUs of this machine, with device buffers, in one
# run (configurations interleaved round by round):
#   fabcoll, staged through host memory, over shm and over tcp
#   fabcoll, gdr tier over shm (device buffers straight to the fabric), when
#     -L names a libfabric built with CUDA support
#   NCCL default (NVLink) and NCCL's socket path (NCCL_P2P_DISABLE=1
#     NCCL_SHM_DISABLE=1 NCCL_NET=Socket: the seed article's "TCP" column)
# NCCL_NVLS_ENABLE=0 throughout. Prints busbw per size, ratios, 8-byte
# latencies, the seed article's latency table, and writes busbw_gpu.png.
#
# Usage: compare_nccl.sh [-b BUILDDIR] [-e MAXBYTES] [-i ITERS] [-w WARM] [-r ROUNDS]
#                        [-L LIBFABRIC_CUDA_PREFIX] [-c CHUNK_FOR_GDR] [-o OUTDIR]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$here/../.." && pwd)
maxb=512M iters=20 warm=5 rounds=1 out=bench-gpu lfcuda="" gdrchunk=8M
while getopts "b:e:i:w:r:L:c:o:h" o; do
    case $o in
    b) build=$(cd "$OPTARG" && pwd) ;;
    e) maxb=$OPTARG ;;
    i) iters=$OPTARG ;;
    w) warm=$OPTARG ;;
    r) rounds=$OPTARG ;;
    L) lfcuda=$OPTARG ;;
    c) gdrchunk=$OPTARG ;;
    o) out=$OPTARG ;;
    *) awk 'NR > 2 && !/^#/ { exit } NR > 2 { sub(/^# ?/, ""); print }' "$0"; exit 2 ;;
    esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
export NCCL_NVLS_ENABLE=0
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$ngpu" -ge 1 ] || { echo "compare_nccl: no GPU" >&2; exit 1; }
cc -O2 -o "$out/nccl_bench" "$here/nccl_bench.c" -I/usr/local/cuda/include \
    -L/usr/local/cuda/lib64 -lnccl -lcudart || exit 1
sweep=(-C allreduce,bcast -b 8 -e "$maxb" -f 2 -n "$iters" -w "$warm")
run_cfg() {
    case $1 in
    fabcoll-staged-shm) "$build/fc_run" -n "$ngpu" -p shm -x FC_GDR=off "$build/fc_perf" -D cuda --csv "${sweep[@]}" ;;
    fabcoll-staged-tcp) "$build/fc_run" -n "$ngpu" -p tcp -x FC_GDR=off "$build/fc_perf" -D cuda --csv "${sweep[@]}" ;;
    fabcoll-gdr-shm) LD_LIBRARY_PATH="$lfcuda/lib:${LD_LIBRARY_PATH:-}" "$build/fc_run" -n "$ngpu" -p shm \
        -x FC_GDR=on -x FC_CHUNK_SIZE="$gdrchunk" "$build/fc_perf" -D cuda --csv "${sweep[@]}" ;;
    nccl-nvlink) "$out/nccl_bench" "${sweep[@]}" -l nccl-nvlink ;;
    nccl-socket) NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo \
        "$out/nccl_bench" "${sweep[@]}" -l nccl-socket ;;
    esac
}
cfgs=(fabcoll-staged-shm nccl-socket fabcoll-staged-tcp nccl-nvlink)
[ -n "$lfcuda" ] && cfgs+=(fabcoll-gdr-shm)
for c in "${cfgs[@]}"; do : >"$out/$c.csv"; done
for r in $(seq 1 "$rounds"); do
    for c in "${cfgs[@]}"; do
        echo "compare_nccl: round $r/$rounds: $c" >&2
        run_cfg "$c" >"$out/$c.r$r.csv" 2>"$out/$c.r$r.err" || { echo "compare_nccl: $c failed:" >&2; tail -5 "$out/$c.r$r.err" >&2; }
        cat "$out/$c.r$r.csv" >>"$out/$c.csv"
    done
done
python3 "$here/report.py" --gpu "$out" "${cfgs[@]}"
