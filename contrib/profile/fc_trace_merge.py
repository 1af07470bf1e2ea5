#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Merges the Chrome traces fabcoll writes with FC_PROFILE_FILE (one file
per rank) into one timeline, a well-formed JSON file any viewer opens
(Perfetto: ui.perfetto.dev; chrome://tracing). Each rank is a process row
("rank N"), its communicators and peers the thread rows. Timestamps are
CLOCK_MONOTONIC: ranks of one host share it; across hosts the rows are not
aligned (use --align to start every rank at 0).

Usage: fc_trace_merge.py [-o OUT] [--align] TRACE...   (prints a summary)"""
import argparse
import json
import sys


def load(path):
    """A rank's file: a JSON array left open, events each ending with ','."""
    with open(path) as f:
        text = f.read().strip()
    if text.endswith(","):
        text = text[:-1]
    if not text.endswith("]"):
        text += "]"
    return json.loads(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("-o", "--out", default="fabcoll-trace.json")
    ap.add_argument("--align", action="store_true", help="start every rank's events at 0")
    a = ap.parse_args()
    events, ranks = [], set()
    for path in a.traces:
        ev = [e for e in load(path) if e.get("ph") == "X"]
        if a.align and ev:
            t0 = min(e["ts"] for e in ev)
            for e in ev:
                e["ts"] -= t0
        events += ev
        ranks |= {e["pid"] for e in ev}
    meta = [{"name": "process_name", "ph": "M", "pid": r, "args": {"name": f"rank {r}"}}
            for r in sorted(ranks)]
    events.sort(key=lambda e: (e["ts"], e["pid"]))
    with open(a.out, "w") as f:
        json.dump({"traceEvents": meta + events, "displayTimeUnit": "ns"}, f)
    calls = sum(1 for e in events if e.get("cat") == "call")
    steps = sum(1 for e in events if e.get("cat") == "step")
    print(f"fc_trace_merge: {len(a.traces)} file(s), ranks {sorted(ranks)}, {calls} calls, "
          f"{steps} transfer steps -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
