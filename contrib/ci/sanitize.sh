#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# fabcoll under AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer:
# builds the distribution tarball in its own folder with
#   -fsanitize=address,undefined -fno-sanitize-recover=undefined
# and runs, quick: the unit tests but test_algos, every functional test over
# shm and tcp at 3 ranks, rails with verbs' registration modes and the
# rendezvous, the progress thread, fc_run's contract (~5 min on 2 cores);
# full (-f): every unit test and make check's whole functional matrix.
# Any report (a bad access, a leak at exit, undefined behaviour) makes the
# program exit non-zero, so its test fails.
#
# Threads (-t): a ThreadSanitizer build (-fsanitize=thread) runs the
# functional tests where threads meet: shm and tcp at 3 ranks with the
# progress thread, rails (a thread per endpoint) with verbs' registration
# modes and the rendezvous, the unique-id rendezvous thread (~4 min on 2
# cores). Not the unit tests: Criterion's own runner makes noise there.
#
# Usage: contrib/ci/sanitize.sh [-f|-t] [BUILDDIR]
#   BUILDDIR  where to build (default: _asan in the source tree, _tsan
#             with -t)
#   -f        full: adds test_algos (every algorithm up to 1024 ranks in one
#             process, ~40 min under ASan on 2 cores) and the whole matrix
#   -t        ThreadSanitizer instead (data races, lock-order inversions)
# Needs a configured source tree (for make dist), or FC_TARBALL=a tarball of
# make dist. Exit status 0 when clean.
set -uo pipefail
full=0 tsan=0
[ "${1:-}" = -f ] && { full=1; shift; }
[ "${1:-}" = -t ] && { tsan=1; shift; }
top=$(cd "$(dirname "$0")/../.." && pwd)
if [ $tsan = 1 ]; then bdir=${1:-$top/_tsan}; else bdir=${1:-$top/_asan}; fi
JOBS=${JOBS:-2}

tarball=${FC_TARBALL:-}
if [ -z "$tarball" ]; then
    cd "$top" || exit 1
    [ -f Makefile ] || { echo "sanitize: configure the source tree first (make dist), or set FC_TARBALL" >&2; exit 1; }
    make -s dist >/dev/null || { echo "sanitize: make dist failed" >&2; exit 1; }
    tarball=$top/$(ls -t fabcoll-*.tar.gz | head -1)
fi
rm -rf "$bdir" && mkdir -p "$bdir" && tar xzf "$tarball" -C "$bdir" --strip-components=1 || exit 1
cd "$bdir" || exit 1
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
[ $tsan = 1 ] && san="-fsanitize=thread -fno-omit-frame-pointer"
if ! ./configure -q CFLAGS="-O1 -g $san" LDFLAGS="$san" >configure.log 2>&1 ||
    ! make -s -j"$JOBS" >make.log 2>&1; then
    tail -30 configure.log make.log
    echo "sanitize: the sanitizer build failed" >&2
    exit 1
fi

# Criterion leaks one allocation of its own at exit (not ours)
export LSAN_OPTIONS="suppressions=$top/contrib/ci/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS="detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1"
units="test/unit/test_reduce test/unit/test_sched test/unit/test_config test/unit/test_boot
       test/unit/test_mr test/unit/test_gpu test/unit/test_sim test/unit/test_rails"
[ $full = 1 ] && units="$units test/unit/test_algos"
if ! pkg-config --exists criterion; then
    echo "sanitize: no Criterion (libcriterion-dev): unit tests left out"
    units=""
fi
rc=0
ft() { # run.sh arguments: one line of summary
    local out
    out=$(test/functional/run.sh "$@" 2>&1)
    echo "$out" | grep -B2 -A25 "ERROR: .*Sanitizer\|runtime error\|WARNING: ThreadSanitizer" | head -80
    echo "$out" | grep "^FAIL" | head -20
    echo "run.sh $*: $(echo "$out" | tail -1)"
    echo "$out" | tail -1 | grep -q " 0 failed" || rc=1
}
if [ $tsan = 1 ]; then
    # a report makes the program exit 66 at its end: its test fails
    export TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1"
    make -s -j"$JOBS" check TESTS= >/dev/null || { echo "sanitize: building the tests failed" >&2; exit 1; }
    export FT_BINDIR=$PWD/test/functional FC_RUN=$PWD/fc_run
    ft -t 300 -p tcp -n 3 -x FC_PROGRESS_THREAD=1 allreduce broadcast reduce allgather \
        reduce_scatter alltoall barrier sendrecv nonblocking split timeout peer_exit shrink hang_report uid
    ft -t 300 -p shm -n 3 -x FC_PROGRESS_THREAD=1 -x FC_CHUNK_SIZE=8K allreduce broadcast \
        allgather nonblocking split
    ft -t 300 -p tcp -n 3 -x FC_RAILS=3 -x FC_CHUNK_SIZE=64K -x FC_MR_MODE=verbs -x FC_PROTO=rndv \
        allreduce broadcast reduce_scatter alltoall sendrecv nonblocking
    [ $rc = 0 ] && echo "sanitize: clean (ThreadSanitizer)" || echo "sanitize: FAILED (ThreadSanitizer)"
    exit $rc
fi
if [ $full = 1 ]; then
    make -j1 check TESTS="$(echo $units) test/functional/check.sh" || rc=1
else
    echo "sanitize: quick: test_algos and most of the functional matrix left out (-f runs them:"
    echo "          every algorithm up to 1024 ranks takes ~40 min under ASan on 2 cores)"
    make -s -j"$JOBS" check TESTS= >/dev/null || { echo "sanitize: building the tests failed" >&2; exit 1; }
    [ -z "$units" ] || make -s -j1 check TESTS="$(echo $units)" || rc=1
    export FT_BINDIR=$PWD/test/functional FC_RUN=$PWD/fc_run
    ft -p shm -n 3
    ft -p tcp -n 3
    # threads: rails (one per endpoint) with verbs' registration modes and
    # the rendezvous; the progress thread of nonblocking calls
    ft -p tcp -n 3 -x FC_RAILS=3 -x FC_CHUNK_SIZE=64K -x FC_MR_MODE=verbs -x FC_PROTO=rndv \
        allreduce broadcast reduce allgather reduce_scatter alltoall sendrecv nonblocking
    ft -p shm -n 4 -x FC_PROGRESS_THREAD=1 -x FC_CHUNK_SIZE=8K nonblocking allreduce split
    if test/functional/fc_run_test.sh >fc_run_test.log 2>&1; then
        echo "fc_run contract: passed"
    else
        tail -20 fc_run_test.log
        echo "fc_run contract: FAILED"
        rc=1
    fi
fi
# Criterion's workers report after a test passed (a leak at their exit): the
# logs decide too
for f in test/unit/*.log test/functional/check.sh.log; do
    [ -f "$f" ] || continue
    if grep -q "^FAIL\|Failing: [1-9]\|Crashing: [1-9]\|ERROR: .*Sanitizer\|runtime error" "$f"; then
        echo "---- $f"
        grep -B2 -A25 "ERROR: .*Sanitizer\|runtime error\|^FAIL" "$f" | head -120
        rc=1
    fi
done
grep -h "Synthesis" test/unit/*.log 2>/dev/null
grep -h "^TOTAL" test/functional/check.sh.log 2>/dev/null
[ $rc = 0 ] && echo "sanitize: clean" || echo "sanitize: FAILED"
exit $rc
