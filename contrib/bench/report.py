#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Joins the CSVs of compare_mpi.sh (compare_nccl.sh with --gpu,
compare_hosts.sh with --hosts): busbw per size for every configuration,
fabcoll/MPI (fabcoll/NCCL) ratios, 8-byte latencies, the seed article's
latency table (not with --hosts), and busbw.png (busbw_gpu.png).
Usage: report.py [--gpu | --hosts] OUTDIR CONFIG..."""
import csv
import os
import statistics
import sys


def load(path):
    rows = {}
    with open(path) as f:
        for r in csv.reader(f):
            if not r or r[0] == "collective":
                continue
            key = (r[0], int(r[3]))
            rows.setdefault(key, []).append((float(r[8]), int(r[1])))
    # median over rounds of the per-round median time
    return {k: (statistics.median(t for t, _ in v), v[0][1]) for k, v in rows.items()}


COLLS = ("allreduce", "bcast", "allgather", "alltoall", "allgatherv", "alltoallv")


def busbw(coll, size, t_us, n):
    if t_us <= 0:
        return 0.0
    alg = size / (t_us * 1e-6) / 1e9
    if coll == "allreduce":
        return alg * 2.0 * (n - 1) / n
    return alg * ((n - 1) / n if coll in COLLS[2:] else 1.0)


def human(b):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024:
            return f"{b:g} {unit}"
        b /= 1024
    return f"{b:g} TiB"


HOST_PAIRS = [("fabcoll-shm", "ompi-vader"), ("fabcoll-tcp", "ompi-tcp"), ("fabcoll-tcp", "ompi-ofi-tcp")]
GPU_PAIRS = [("fabcoll-staged-shm", "nccl-socket"), ("fabcoll-staged-tcp", "nccl-socket"),
             ("fabcoll-gdr-shm", "nccl-nvlink")]
HOSTS_PAIRS = [("fabcoll-paths", "ompi"), ("fabcoll-paths", "fabcoll-flat")]


def seed_table(cfgs, data, gpu):
    """The seed article's table: allreduce latency (ms) at 256 KiB, 1 MiB, 16 MiB."""
    print("\nSeed article's table (allreduce latency, ms), this machine:")
    slow, fast = ("fabcoll-staged-tcp", "fabcoll-gdr-shm" if "fabcoll-gdr-shm" in cfgs else "fabcoll-staged-shm") \
        if gpu else ("fabcoll-tcp", "fabcoll-shm")
    print(f"{'message':>8} | " + " | ".join(f"{c[-12:]:>12}" for c in cfgs) + f" | {fast} speed-up over {slow}")
    for s in (256 << 10, 1 << 20, 16 << 20):
        t = {c: data[c].get(("allreduce", s), (None,))[0] for c in cfgs}
        sp = (t[slow] / t[fast]) if t.get(slow) and t.get(fast) else None
        print(f"{human(s):>8} | " + " | ".join(f"{v / 1000:12.3f}" if v else f"{'-':>12}" for v in t.values()) +
              (f" | {sp:.1f}x" if sp else " | -"))


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] in ("--gpu", "--hosts") else ""
    gpu, hosts = mode == "--gpu", mode == "--hosts"
    args = sys.argv[2:] if mode else sys.argv[1:]
    out, cfgs = args[0], args[1:]
    data = {c: load(os.path.join(out, c + ".csv")) for c in cfgs if os.path.exists(os.path.join(out, c + ".csv"))}
    cfgs = [c for c in cfgs if data.get(c)]
    pairs = [(a, b) for a, b in (GPU_PAIRS if gpu else HOSTS_PAIRS if hosts else HOST_PAIRS)
             if a in cfgs and b in cfgs]
    present = [k for k in COLLS if any(key[0] == k for c in cfgs for key in data[c])]
    for coll in present:
        sizes = sorted({s for c in cfgs for (k, s) in data[c] if k == coll})
        if not sizes:
            continue
        n = next(v[1] for c in cfgs for k, v in data[c].items() if k[0] == coll)
        print(f"\n{coll}: busbw in GB/s (nccl-tests definition), {n} ranks; ratio = fabcoll / "
              + ("NCCL" if gpu else "MPI"))
        head = f"{'size':>10} " + " ".join(f"{c[-13:]:>13}" for c in cfgs) + " " + \
            " ".join(f"{(a.split('-')[-1] + '/' + b.split('-', 1)[-1])[-13:]:>13}" for a, b in pairs)
        print(head)
        for s in sizes:
            vals = {c: busbw(coll, s, data[c][(coll, s)][0], n) if (coll, s) in data[c] else None for c in cfgs}
            ratios = []
            for a, b in pairs:
                if vals.get(a) and vals.get(b):
                    ratios.append(vals[a] / vals[b])
                else:
                    ratios.append(None)
            print(f"{human(s):>10} " + " ".join(f"{v:13.3f}" if v is not None else f"{'-':>13}" for v in vals.values()) +
                  " " + " ".join(f"{r:12.2f}x" if r else f"{'-':>13}" for r in ratios))

    lat = {c: data[c].get(("allreduce", 8), (None,))[0] for c in cfgs}
    if any(lat.values()):
        print("\n8-byte allreduce, median us: " + ", ".join(f"{c} {v:.2f}" for c, v in lat.items() if v))

    if not hosts and "allreduce" in present:
        seed_table(cfgs, data, gpu)

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, len(present), figsize=(6.5 * len(present), 5), squeeze=False)
        for ax, coll in zip(axes[0], present):
            for c in cfgs:
                pts = sorted((s, busbw(coll, s, v[0], v[1])) for (k, s), v in data[c].items() if k == coll)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                            label=c, linestyle="-" if c.startswith("fabcoll") else "--")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel("busbw (GB/s)")
            n = next((v[1] for c in cfgs for k, v in data[c].items() if k[0] == coll), 0)
            ax.set_title(f"{coll}, float32, {n} ranks" + (", GPU buffers" if gpu else "")
                         + (", across hosts" if hosts else ""))
            ax.grid(True, alpha=0.3)
            ax.legend()
        fig.tight_layout()
        png = os.path.join(out, "busbw_gpu.png" if gpu else "busbw.png")
        fig.savefig(png, dpi=110)
        print(f"\nplot: {png}")
    except ImportError:
        print("\n(no matplotlib: apt-get install python3-matplotlib for the plot)")


if __name__ == "__main__":
    main()
