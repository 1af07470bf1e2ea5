#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# fc_run's contract: exit status of the first failing rank, the others
# stopped (not waited for), a rank killed by a signal reported, exec
# failures, timeouts, the environment each rank gets.
set -u
fc_run=${FC_RUN:-$(cd "$(dirname "$0")/../.." && pwd)/fc_run}
fails=0
check() { # description, expected, actual
    if [ "$2" = "$3" ]; then echo "PASS $1"; else echo "FAIL $1: expected '$2', got '$3'"; fails=$((fails + 1)); fi
}

# all succeed
"$fc_run" -n 3 true; check "all ranks exit 0 -> 0" 0 $?

# rank 1 fails with 3 while the others would sleep 60 s: stopped quickly
t0=$(date +%s)
err=$("$fc_run" -n 3 sh -c 'if [ "$FC_RANK" = 1 ]; then sleep 0.2; exit 3; fi; sleep 60' 2>&1 >/dev/null)
rc=$?; t1=$(date +%s)
check "first failing rank's status" 3 $rc
check "others stopped within 10 s" yes "$([ $((t1 - t0)) -lt 10 ] && echo yes || echo no)"
check "failure reported" yes "$(echo "$err" | grep -q 'rank 1 (pid [0-9]*) exited with status 3' && echo yes || echo no)"

# a rank killed by a signal
err=$("$fc_run" -n 2 sh -c 'if [ "$FC_RANK" = 0 ]; then kill -SEGV $$; fi; sleep 30' 2>&1 >/dev/null)
rc=$?
check "signal status 128+11" 139 $rc
check "signal reported" yes "$(echo "$err" | grep -q 'rank 0 (pid [0-9]*) was killed by signal 11' && echo yes || echo no)"

# a rank that ignores SIGTERM is killed after the grace period
t0=$(date +%s)
"$fc_run" -q -n 2 sh -c 'trap "" TERM; if [ "$FC_RANK" = 1 ]; then exit 5; fi; sleep 30' >/dev/null 2>&1
rc=$?; t1=$(date +%s)
check "SIGTERM-proof rank: status" 5 $rc
check "SIGTERM-proof rank killed within 10 s" yes "$([ $((t1 - t0)) -lt 10 ] && echo yes || echo no)"

# cannot execute
"$fc_run" -n 2 /nonexistent/prog >/dev/null 2>&1; check "exec failure -> 127" 127 $?

# timeout
t0=$(date +%s)
"$fc_run" -q -n 2 -t 1 sleep 30 >/dev/null 2>&1; rc=$?; t1=$(date +%s)
check "timeout -> 124" 124 $rc
check "timeout honoured" yes "$([ $((t1 - t0)) -lt 8 ] && echo yes || echo no)"

# environment
out=$("$fc_run" -n 3 -p shm -x FOO=bar sh -c 'echo "$FC_RANK/$FC_SIZE/$FC_LOCAL_RANK/$FI_PROVIDER/$FOO/${FC_ROOT_ADDR%%:*}/${#FC_JOB_SECRET}"' | sort | tr '\n' ' ')
check "environment" "0/3/0/shm/bar/127.0.0.1/64 1/3/1/shm/bar/127.0.0.1/64 2/3/2/shm/bar/127.0.0.1/64 " "$out"

# usage errors
"$fc_run" -n 0 true >/dev/null 2>&1; check "-n 0 rejected" 125 $?
"$fc_run" >/dev/null 2>&1; check "no program" 125 $?
"$fc_run" --help | grep -q "Exit status"; check "--help documents exit status" 0 $?

# FC_DEBUG_FILE's %r: each rank's lines in its own file (the file opened
# before the rank was known named "x" for it)
bindir=${FT_BINDIR:-$(cd "$(dirname "$0")" && pwd)}
if [ -x "$bindir/barrier" ]; then
    logdir=$(mktemp -d)
    FC_DEBUG=info FC_DEBUG_FILE="$logdir/log.%r" "$fc_run" -q -n 2 "$bindir/barrier" >/dev/null 2>&1
    check "FC_DEBUG_FILE %r: a file per rank" "log.0 log.1" \
        "$(cd "$logdir" && ls log.[0-9]* 2>/dev/null | tr '\n' ' ' | sed 's/ $//')"
    check "FC_DEBUG_FILE %r: rank 1's lines in log.1" yes \
        "$(grep -q '\[1\]' "$logdir/log.1" 2>/dev/null && ! grep -q '\[0\]' "$logdir/log.1" && echo yes || echo no)"
    rm -rf "$logdir"
fi

# the rendezvous listens where it is advertised (loopback on one node)
if command -v ss >/dev/null && [ -x "$bindir/barrier" ]; then
    listen=$("$fc_run" -q -n 1 sh -c 'ss -ltnH "sport = :${FC_ROOT_ADDR##*:}" | awk "{print \$4}"' 2>/dev/null)
    check "rendezvous bound to 127.0.0.1" yes "$(echo "$listen" | grep -q '^127\.0\.0\.1:' && echo yes || echo no)"
else
    echo "SKIP rendezvous address: needs ss (iproute2) and the barrier test"
fi

# a flood of silent connections, more than fc_run's descriptors (ulimit -n
# 1024): init within 2x of a quiet one (plus 1 s of slack), fc_run using
# little CPU, and the refusals counted, not a line each
if [ -x "$bindir/barrier" ] && command -v python3 >/dev/null; then
    flood=$(mktemp)
    cat >"$flood" <<'PY'
import os, resource, socket, sys, time
h, p = os.environ["FC_ROOT_ADDR"].rsplit(":", 1)
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
socks = []
for _ in range(1100):
    s = socket.socket(); s.setblocking(False)
    try: s.connect((h, int(p)))
    except BlockingIOError: pass
    socks.append(s)
open(sys.argv[1], "w").close()
time.sleep(6)
PY
    ready=$(mktemp -u)
    quiet() { local t0 t1; t0=$(date +%s.%N); (ulimit -Sn 1024; "$fc_run" -q -n 2 "$bindir/barrier"); t1=$(date +%s.%N); echo "$t0 $t1" | awk '{print $2 - $1}'; }
    tq=$(quiet)
    t0=$(date +%s.%N)
    err=$( (ulimit -Sn 1024; TIMEFORMAT="cpu %U %S"; time FC_RUN_FLOOD="$flood" FC_RUN_READY="$ready" \
        "$fc_run" -n 2 sh -c 'if [ "$FC_RANK" = 0 ]; then python3 "$FC_RUN_FLOOD" "$FC_RUN_READY" >/dev/null 2>&1 & while [ ! -e "$FC_RUN_READY" ]; do sleep 0.05; done; fi; exec "$0"' "$bindir/barrier") 2>&1 >/dev/null)
    rc=$?
    t1=$(date +%s.%N)
    tf=$(echo "$t0 $t1" | awk '{print $2 - $1}')
    check "flood: job passes" 0 $rc
    # fc_run's own time includes the ranks' (children): the flood's python
    # sleeps, so user+system stays small unless fc_run spins
    cpu=$(echo "$err" | awk '/^cpu/ {print $2 + $3}')
    check "flood: init within 2x quiet ($tq s) + 1 s: ${tf} s" yes \
        "$(awk -v f="$tf" -v q="$tq" 'BEGIN {print (f <= 2 * q + 1) ? "yes" : "no"}')"
    check "flood: fc_run and ranks used little CPU (${cpu:-?} s)" yes \
        "$(awk -v c="${cpu:-99}" -v f="$tf" 'BEGIN {print (c < f) ? "yes" : "no"}')"
    check "flood: at most 3 warning lines" yes \
        "$([ "$(echo "$err" | grep -c 'rendezvous')" -le 3 ] && echo yes || echo no)"
    rm -f "$flood" "$ready"
else
    echo "SKIP flood against the rendezvous: needs python3 and the barrier test"
fi

# SIGTERM while a rank is in fc_comm_init: the rank ends at once by the
# signal (libinfinipath's handlers, which libfabric loads with the psm
# provider, called exit() and could deadlock in fi_getinfo's lock, and left
# *.btr files behind), at every moment of init tried here
if [ -x "$bindir/barrier" ]; then
    sigdir=$(mktemp -d)
    slow=0 bad=""
    for d in 0 0.01 0.03 0.06 0.1 0.15 0.2 0.3; do
        rm -f "$sigdir/pid"
        (cd "$sigdir" && exec "$fc_run" -q -n 2 sh -c 'if [ "$FC_RANK" = 0 ]; then echo $$ >"$0.pid.tmp"; mv "$0.pid.tmp" "$0.pid"; fi; exec "$1"' "$sigdir/r" "$bindir/barrier") >/dev/null 2>&1 &
        job=$!
        for _ in $(seq 1 200); do [ -s "$sigdir/r.pid" ] && break; sleep 0.01; done
        sleep "$d"
        t0=$(date +%s.%N)
        kill -TERM "$(cat "$sigdir/r.pid")" 2>/dev/null
        wait $job; rc=$?
        t1=$(date +%s.%N)
        rm -f "$sigdir/r.pid"
        # 0: the rank had already finished; 143: ended by SIGTERM
        [ $rc = 0 ] || [ $rc = 143 ] || bad="$bad $d:$rc"
        awk -v a="$t0" -v b="$t1" 'BEGIN {exit !(b - a > 2)}' && slow=$((slow + 1))
    done
    check "SIGTERM during init: status 143 (or 0 once done)" "" "$bad"
    check "SIGTERM during init: every job ended within 2 s" 0 $slow
    check "SIGTERM during init: no *.btr files" 0 "$(ls "$sigdir"/*.btr 2>/dev/null | wc -l)"
    rm -rf "$sigdir"
fi

# a rank that exits before fc_comm_init: the others' timeout names it
if [ -x "$bindir/barrier" ]; then
    err=$("$fc_run" -n 3 -x FC_BOOT_TIMEOUT=2 \
        sh -c '[ "$FC_RANK" = 1 ] && exit 0; exec "$0"' "$bindir/barrier" 2>&1)
    check "a rank that never joined is named by the others (2 of them)" 2 \
        "$(echo "$err" | grep -c 'fc_comm_init failed.*ranks 1 of 3 have not joined it')"
fi

# a topology file that is not one fails init on every rank, naming it
if [ -x "$bindir/barrier" ]; then
    bad=$(mktemp); echo "not <xml" >"$bad"
    err=$("$fc_run" -n 2 -p shm -x FC_TOPO_FILE="$bad" "$bindir/barrier" 2>&1)
    check "a garbage FC_TOPO_FILE fails init on both ranks" 2 \
        "$(echo "$err" | grep -c 'fc_comm_init failed.*FC_TOPO_FILE=.* is not a readable hwloc XML')"
    rm -f "$bad"
fi

echo "fc_run: $fails failure(s)"
[ $fails = 0 ]
