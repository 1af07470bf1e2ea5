#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A short valgrind (memcheck) run: every rank of a few real jobs under
# valgrind, over shm and tcp: the soak (sweep -s: collectives, datatypes,
# counts and roots at random, every element checked), nonblocking calls,
# split/dup, point-to-point with its mismatches. A job passes when it exits
# 0 and every rank left a log (valgrind ran on each) that is empty: with -q
# valgrind writes only what it found (an invalid access, a use of
# uninitialised memory, a definite leak), and exits 99 for it.
set -u
here=$(cd "$(dirname "$0")" && pwd)
fc_run=${FC_RUN:-$here/../../fc_run}
bindir=${FT_BINDIR:-$here}
command -v valgrind >/dev/null || { echo "SKIP: no valgrind (apt-get install valgrind)"; exit 77; }
# libtool's wrapper scripts would put valgrind on bash: the real programs,
# with the uninstalled libraries found as the wrapper finds them
libs="$bindir/.libs:$bindir/../../.libs"
real() { [ -x "$bindir/.libs/$1" ] && echo "$bindir/.libs/$1" || echo "$bindir/$1"; }
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
fails=0
job() { # description, provider, ranks, settings ("VAR=V ..." or ""), program, arguments...
    local desc=$1 prov=$2 n=$3 prog xs=() e; prog=$(real "$5")
    for e in $4; do xs+=(-x "$e"); done
    shift 5
    rm -f "$logs"/*.log
    local t0=$SECONDS
    "$fc_run" -q -n "$n" -p "$prov" -t 600 -x FC_TIMEOUT=120 -x FC_BOOT_TIMEOUT=120 "${xs[@]}" \
        -x LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
        --show-leak-kinds=definite --log-file="$logs/vg.%p.log" "$prog" "$@" >"$logs/out" 2>&1
    local rc=$? nlogs errs
    nlogs=$(ls "$logs"/vg.*.log 2>/dev/null | wc -l)
    # valgrind -q writes a rank's log only where it found something; it
    # does not implement userfaultfd (syscall 323), answers ENOSYS and says
    # so in five lines: the memory monitor then keeps the registration
    # cache off (memmon.c), which is no error of the program's
    local f
    errs=0
    for f in "$logs"/vg.*.log; do
        [ -f "$f" ] || continue
        grep -Evq -e '^--[0-9]+-- (WARNING: unhandled amd64-linux syscall: 323|You may be able to write your own handler\.|Read the file README_MISSING_SYSCALL_OR_IOCTL\.|Nevertheless we consider this a bug\.  Please report|it at http://valgrind\.org/support/bug_reports\.html\.)$' "$f" &&
            errs=$((errs + 1))
    done
    if [ $rc = 0 ] && [ "$errs" = 0 ] && [ "$nlogs" = "$n" ]; then
        echo "PASS $desc ($prov x$n) $((SECONDS - t0))s"
    else
        echo "FAIL $desc ($prov x$n): exit status $rc, $errs rank log(s) with errors"
        tail -n 20 "$logs/out"
        cat "$logs"/vg.*.log | head -80
        fails=$((fails + 1))
    fi
}
job "soak of 300 calls" shm 2 "" sweep -s 300
job "soak of 300 calls" tcp 3 "" sweep -s 300
job "nonblocking" tcp 2 "" nonblocking
job "split and dup" shm 3 "" split
job "point to point and its mismatches" tcp 2 "FC_CHUNK_SIZE=64K" p2p_mismatch
[ $fails = 0 ] && echo "valgrind: clean" || echo "valgrind: $fails job(s) FAILED"
[ $fails = 0 ]
