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

echo "fc_run: $fails failure(s)"
[ $fails = 0 ]
