#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Joins the CSVs of compare_mpi.sh: busbw per size for every configuration,
fabcoll/MPI ratios, the issue's targets, the seed article's latency table,
and busbw.png. Usage: report.py OUTDIR CONFIG..."""
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


def busbw(coll, size, t_us, n):
    if t_us <= 0:
        return 0.0
    alg = size / (t_us * 1e-6) / 1e9
    return alg * (2.0 * (n - 1) / n if coll == "allreduce" else 1.0)


def human(b):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024:
            return f"{b:g} {unit}"
        b /= 1024
    return f"{b:g} TiB"


HOST_PAIRS = [("fabcoll-shm", "ompi-vader"), ("fabcoll-tcp", "ompi-tcp"), ("fabcoll-tcp", "ompi-ofi-tcp")]
GPU_PAIRS = [("fabcoll-staged-shm", "nccl-socket"), ("fabcoll-staged-tcp", "nccl-socket"),
             ("fabcoll-gdr-shm", "nccl-nvlink")]


def gpu_targets(data, bw, human):
    v = []

    def ratio_check(a, b, sizes, factor, what, coll="allreduce"):
        have = [s for s in sizes if bw(coll, a, s) and bw(coll, b, s)]
        if not have:
            return
        miss = [(s, bw(coll, a, s) / bw(coll, b, s)) for s in have if bw(coll, a, s) < factor * bw(coll, b, s)]
        worst = min(bw(coll, a, s) / bw(coll, b, s) for s in have)
        v.append((not miss, f"{what}: " + ("yes" if not miss else "missed at " +
                 ", ".join(f"{human(s)} ({r:.2f}x)" for s, r in miss)) + f" (worst {worst:.2f}x)"))

    sizes = sorted({s for c in data for (k, s) in data[c] if k == "allreduce"})
    ratio_check("fabcoll-staged-shm", "nccl-socket", [s for s in sizes if s >= 32 << 20], 1.5,
                "staged shm allreduce >= 1.5x NCCL's socket path from 32 MiB")
    low = [bw("allreduce", "fabcoll-staged-shm", s) for s in sizes if s >= 32 << 20 and bw("allreduce", "fabcoll-staged-shm", s)]
    if low:
        v.append((min(low) >= 5.2, f"staged shm allreduce >= 5.2 GB/s from 32 MiB: min {min(low):.2f} GB/s"))
    ratio_check("fabcoll-staged-shm", "nccl-socket", [s for s in sizes if s >= 1 << 20], 1.0,
                "staged shm allreduce ahead of NCCL's socket path from 1 MiB")
    ratio_check("fabcoll-staged-tcp", "nccl-socket", [s for s in sizes if s >= 1 << 20], 1.2,
                "staged tcp allreduce >= 1.2x NCCL's socket path from 1 MiB")
    for c in ("fabcoll-staged-shm", "fabcoll-staged-tcp", "fabcoll-gdr-shm"):
        t = data.get(c, {}).get(("allreduce", 8), (None,))[0]
        if t:
            v.append((t <= 24.0, f"8-byte allreduce, {c}: {t:.1f} us (<= 24 us)"))
    for coll, goal in (("allreduce", 100.0), ("bcast", 150.0)):
        b = bw(coll, "fabcoll-gdr-shm", 256 << 20)
        if b:
            v.append((b >= goal, f"gdr shm {coll} busbw at 256 MiB >= {goal:.0f} GB/s: {b:.1f} GB/s"))
    return v


def main():
    gpu = len(sys.argv) > 1 and sys.argv[1] == "--gpu"
    args = sys.argv[2:] if gpu else sys.argv[1:]
    out, cfgs = args[0], args[1:]
    data = {c: load(os.path.join(out, c + ".csv")) for c in cfgs if os.path.exists(os.path.join(out, c + ".csv"))}
    cfgs = [c for c in cfgs if data.get(c)]
    pairs = [(a, b) for a, b in (GPU_PAIRS if gpu else HOST_PAIRS) if a in cfgs and b in cfgs]
    verdicts = []
    for coll in ("allreduce", "bcast"):
        sizes = sorted({s for c in cfgs for (k, s) in data[c] if k == coll})
        if not sizes:
            continue
        n = next(v[1] for c in cfgs for k, v in data[c].items() if k[0] == coll)
        print(f"\n{coll}: busbw in GB/s (nccl-tests definition), {n} ranks; ratio = fabcoll / "
              + ("NCCL" if gpu else "MPI"))
        head = f"{'size':>10} " + " ".join(f"{c[-13:]:>13}" for c in cfgs) + " " + \
            " ".join(f"{(a.split('-')[-1] + '/' + b.split('-', 1)[1])[-13:]:>13}" for a, b in pairs)
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

        def bw(c, s):
            return busbw(coll, s, data[c][(coll, s)][0], n) if c in data and (coll, s) in data[c] else None

        big = [s for s in sizes if s >= 256 * 1024]
        if gpu:
            continue
        if coll == "allreduce":
            s32 = 32 << 20
            v = bw("fabcoll-shm", s32)
            if v is not None:
                verdicts.append((v >= 4.0, f"shm allreduce busbw at 32 MiB >= 4 GB/s: {v:.2f} GB/s"))
        for a, b, factor, what in (("fabcoll-shm", "ompi-vader", 1.0, "shm >= Open MPI vader"),
                                   ("fabcoll-tcp", "ompi-ofi-tcp", 2.0 if coll == "allreduce" else 1.0,
                                    ("tcp >= 2x" if coll == "allreduce" else "tcp >=") + " Open MPI over libfabric tcp"),
                                   ("fabcoll-tcp", "ompi-tcp", 1.0, "tcp >= Open MPI tcp BTL")):
            if coll == "bcast" and a == "fabcoll-tcp":
                continue
            miss = [(s, bw(a, s) / bw(b, s)) for s in big if bw(a, s) and bw(b, s) and bw(a, s) < factor * bw(b, s)]
            if all(bw(a, s) and bw(b, s) for s in big):
                worst = min((bw(a, s) / bw(b, s) for s in big), default=0)
                verdicts.append((not miss, f"{coll}: {what} at every size from 256 KiB: "
                                 + ("yes" if not miss else "missed at " + ", ".join(f"{human(s)} ({r:.2f}x)" for s, r in miss))
                                 + f" (worst ratio {worst:.2f}x)"))
    def bw_any(coll, c, s):
        if c in data and (coll, s) in data[c]:
            t, n = data[c][(coll, s)]
            return busbw(coll, s, t, n)
        return None

    if gpu:
        verdicts += gpu_targets(data, bw_any, human)
    lat = {c: data[c].get(("allreduce", 8), (None,))[0] for c in cfgs}
    print("\n8-byte allreduce, median us: " + ", ".join(f"{c} {v:.2f}" for c, v in lat.items() if v))
    if not gpu and lat.get("fabcoll-shm"):
        verdicts.append((lat["fabcoll-shm"] <= 3.0, f"8-byte allreduce on shm <= 3 us: {lat['fabcoll-shm']:.2f} us"))
    if not gpu and lat.get("fabcoll-tcp") and lat.get("ompi-ofi-tcp"):
        r = lat["fabcoll-tcp"] / lat["ompi-ofi-tcp"]
        verdicts.append((r <= 1.2, f"8-byte allreduce on tcp <= 1.2x Open MPI mtl-ofi: {lat['fabcoll-tcp']:.2f} us vs {lat['ompi-ofi-tcp']:.2f} us ({r:.2f}x)"))

    # the seed article's table: allreduce latency (ms) at 256 KiB, 1 MiB, 16 MiB
    print("\nSeed article's table (allreduce latency, ms), this machine:")
    slow, fast = ("fabcoll-staged-tcp", "fabcoll-gdr-shm" if "fabcoll-gdr-shm" in cfgs else "fabcoll-staged-shm") \
        if gpu else ("fabcoll-tcp", "fabcoll-shm")
    print(f"{'message':>8} | " + " | ".join(f"{c[-12:]:>12}" for c in cfgs) + f" | {fast} speed-up over {slow}")
    for s in (256 << 10, 1 << 20, 16 << 20):
        t = {c: data[c].get(("allreduce", s), (None,))[0] for c in cfgs}
        sp = (t[slow] / t[fast]) if t.get(slow) and t.get(fast) else None
        print(f"{human(s):>8} | " + " | ".join(f"{v / 1000:12.3f}" if v else f"{'-':>12}" for v in t.values()) +
              (f" | {sp:.1f}x" if sp else " | -"))

    print("\nTargets:")
    for ok, text in verdicts:
        print(f"  [{'MET ' if ok else 'MISS'}] {text}")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(13, 5))
        for ax, coll in zip(axes, ("allreduce", "bcast")):
            for c in cfgs:
                pts = sorted((s, busbw(coll, s, v[0], v[1])) for (k, s), v in data[c].items() if k == coll)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                            label=c, linestyle="-" if c.startswith("fabcoll") else "--")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel("busbw (GB/s)")
            ax.set_title(f"{coll}, float32, {n} ranks" + (", GPU buffers" if gpu else ""))
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
