#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Profiling: the test plugin (prof_plugin.so through FC_PROFILER) sees the
# events of a known schedule (profile.c checks them on every rank), and
# the built-in Chrome writer (FC_PROFILE_FILE) leaves one file per rank
# that contrib/profile/fc_trace_merge.py merges into one valid timeline
# holding every rank's allreduce and its ring steps. tcp and shm, 3 ranks.
# With FC_RAILS=2 the trace shows the connectivity check once per rail.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
bindir=${FT_BINDIR:-$here}
fc_run=${FC_RUN:-$bindir/../../fc_run}
plugin=$bindir/.libs/prof_plugin.so
[ -f "$plugin" ] || plugin=$bindir/prof_plugin.so
fail=0
say() { echo "$*"; }
if [ ! -f "$plugin" ]; then
    echo "FAIL profiling: the test plugin is not built ($plugin)"; exit 1
fi
tmp=$(mktemp -d /tmp/fc-profile.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
for p in tcp shm; do
    rm -f "$tmp"/*
    if FI_PROVIDER=$p "$fc_run" -q -n 3 -t 120 -x FC_ALGO=allreduce:ring -x FC_PROFILER="$plugin" \
        -x FT_PROF_OUT="$tmp/events" -x FC_PROFILE_FILE="$tmp/trace.%r.json" \
        "$bindir/profile" >"$tmp/log" 2>&1; then
        say "PASS $p: the plugin's events match the ring on every rank"
    else
        say "FAIL $p: the plugin's events"; sed 's/^/    /' "$tmp/log" | tail -8; fail=1
        continue
    fi
    if out=$(python3 "$top/contrib/profile/fc_trace_merge.py" -o "$tmp/merged.json" \
        "$tmp"/trace.*.json 2>&1) &&
        python3 - "$tmp/merged.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
calls = [e for e in ev if e.get("cat") == "call" and e["name"] == "allreduce"]
steps = [e for e in ev if e.get("cat") == "step" and e["args"]["collective"] == "allreduce"
         and e["args"]["bytes"] > 8]
assert sorted(e["pid"] for e in calls) == [0, 1, 2], calls
assert all(e["args"]["algorithm"] == "ring" and e["dur"] >= 0 for e in calls)
# 3 ranks: 2(n-1) = 4 sends and 4 receives each
assert len(steps) == 24, len(steps)
assert all(e["dur"] >= 0 for e in steps)
PY
    then
        say "PASS $p: Chrome traces of 3 ranks merged ($out)"
    else
        say "FAIL $p: the Chrome traces"; echo "$out" | sed 's/^/    /'; fail=1
    fi
done
# the connectivity check runs once per rail at creation and once per rail
# at destroy: with FC_RAILS=2 every rank's trace holds 4 of them
rm -f "$tmp"/*
if FI_PROVIDER=tcp "$fc_run" -q -n 2 -t 120 -x FC_RAILS=2 -x FC_PROFILE_FILE="$tmp/rails.%r.json" \
    "$bindir/barrier" >"$tmp/log" 2>&1 &&
    python3 "$top/contrib/profile/fc_trace_merge.py" -o "$tmp/merged.json" "$tmp"/rails.*.json \
        >>"$tmp/log" 2>&1 &&
    python3 - "$tmp/merged.json" >>"$tmp/log" 2>&1 <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
checks = [e["pid"] for e in ev if e.get("cat") == "call" and e["name"] == "connectivity check"]
assert sorted(checks) == [0] * 4 + [1] * 4, checks
PY
then
    say "PASS tcp with FC_RAILS=2: the connectivity check ran over each rail at creation and at destroy"
else
    say "FAIL tcp with FC_RAILS=2: the connectivity checks per rail"; sed 's/^/    /' "$tmp/log" | tail -8; fail=1
fi
[ $fail = 0 ] && echo "profile_test: passed"
exit $fail
