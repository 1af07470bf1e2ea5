#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The full test suite on a fresh Debian 12 machine (run as root; CI runs it
# through .ci/run): installs the dependencies, builds with -Werror and
# --without-cuda, runs the unit and functional tests (make check), a quick
# pass under AddressSanitizer,
# LeakSanitizer and UBSan (contrib/ci/sanitize.sh), the threaded functional
# tests under ThreadSanitizer (sanitize.sh -t), an installed-library check (a
# program built with pkg-config, run by fc_run), the launcher tests under a
# real one-node Slurm (srun --mpi=pmix, plain srun, --mpi=pmi2) and Open MPI's
# mpirun, the multi-host tests in network namespaces, and make distcheck
# (built with CUDA where a toolkit is found, CUDA_DIR or /usr/local/cuda).
# Stops every daemon it started. Prints a summary; exit 0 only if all passed.
#
# Environment: JOBS (make -j, default 2), SKIP="distcheck netns slurm sanitize tsan" to skip
# stages (each skip is printed).
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
JOBS=${JOBS:-2}
SKIP=${SKIP:-}
results=()
failed=0
t_start=$(date +%s)

stage() { echo; echo "=================== $* ($(($(date +%s) - t_start)) s)"; }
record() { # name, status
    results+=("$(printf '%-28s %s' "$1" "$2")")
    case $2 in PASS*|SKIP*) ;; *) failed=1 ;; esac
}
skipped() { case " $SKIP " in *" $1 "*) record "$1" "SKIP (SKIP=$SKIP)"; return 0 ;; esac; return 1; }

stage "dependencies"
if ! contrib/ci/install-deps.sh --full; then
    echo "test-all: installing dependencies failed" >&2
    exit 1
fi

# Two builds, as users have them: the main one without CUDA (most machines
# have no toolkit), which make check, the installed-library, launcher and
# multi-host tests use, and one with CUDA where a toolkit is installed (make
# distcheck below: it compiles the kernels and runs the host suite).
cuda_dir=${CUDA_DIR:-/usr/local/cuda}
stage "build (--without-cuda)"
inst="$top/_inst" # the installed-library check installs here
rm -rf "$inst"
if ./autogen.sh && ./configure --enable-werror --without-cuda --prefix="$inst" &&
    ! grep -q "^#define HAVE_CUDA" build_config.h && make -j"$JOBS"; then
    record build PASS
else
    record build FAIL
    printf '%s\n' "${results[@]}"
    exit 1
fi

stage "make check (unit + functional)"
if make -j1 check; then
    record "make check" PASS
else
    record "make check" FAIL
    for f in test/unit/*.log test/functional/*.log; do
        [ -f "$f" ] || continue
        grep -q "^FAIL\|Failing: [1-9]\|Crashing: [1-9]" "$f" && { echo "---- $f"; tail -n 80 "$f"; }
    done
fi
grep -h "^TOTAL\|Synthesis" test/unit/*.log test/functional/check.sh.log 2>/dev/null

if ! skipped sanitize; then
    stage "sanitizers (ASan, LSan, UBSan), quick"
    if contrib/ci/sanitize.sh "$top/_asan"; then
        record "sanitizers" PASS
    else
        record "sanitizers" FAIL
    fi
fi

if ! skipped tsan; then
    stage "ThreadSanitizer: functional tests where threads meet"
    if contrib/ci/sanitize.sh -t "$top/_tsan"; then
        record "ThreadSanitizer" PASS
    else
        record "ThreadSanitizer" FAIL
    fi
fi

stage "installed library: pkg-config + fc_run"
if make install >/dev/null &&
    cc -o "$inst/api_program" test/functional/api_program.c \
        $(PKG_CONFIG_PATH="$inst/lib/pkgconfig" pkg-config --cflags --libs fabcoll) \
        -Wl,-rpath,"$inst/lib" &&
    FI_PROVIDER=tcp "$inst/bin/fc_run" -n 3 -t 120 "$inst/api_program" &&
    FI_PROVIDER=shm "$inst/bin/fc_run" -n 4 -t 120 "$inst/api_program" &&
    [ "$(nm -D --defined-only "$inst/lib/libfabcoll.so" | awk '{print $3}' | grep -vc '^fc_\|^FABCOLL')" = 0 ]
then
    record "installed library" PASS
else
    record "installed library" FAIL
fi

if ! skipped slurm; then
    stage "launchers: Slurm (pmix, plain, pmi2) and mpirun"
    if contrib/ci/slurm-up.sh; then
        trap 'contrib/ci/slurm-down.sh' EXIT
        if contrib/ci/launcher-tests.sh "$top"; then
            record "launchers (srun, mpirun)" PASS
        else
            record "launchers (srun, mpirun)" FAIL
        fi
        contrib/ci/slurm-down.sh
        trap - EXIT
    else
        record "slurm up" FAIL
    fi
fi

if ! skipped netns; then
    stage "multi-host (network namespaces)"
    test/netns/multihost.sh -b "$top"
    rc=$?
    if [ $rc = 0 ]; then record "multi-host (netns)" PASS
    elif [ $rc = 77 ]; then record "multi-host (netns)" "SKIP (not permitted here)"
    else record "multi-host (netns)" FAIL; fi
fi

if ! skipped distcheck; then
    # the full matrix ran above on the build without CUDA: the distribution
    # gets the quick one, built with CUDA where a toolkit is installed
    if [ -r "$cuda_dir/include/cuda.h" ] && [ -x "$cuda_dir/bin/nvcc" ]; then
        dc="--with-cuda=$cuda_dir"; name="make distcheck (CUDA build)"
    else
        dc="--without-cuda"; name="make distcheck (no CUDA toolkit at $cuda_dir)"
        echo "test-all: no CUDA toolkit under $cuda_dir: the CUDA build is not made here"
    fi
    stage "$name"
    if FC_CHECK_QUICK=1 make -j"$JOBS" distcheck DISTCHECK_CONFIGURE_FLAGS="--enable-werror $dc"
    then
        record "$name" PASS
    else
        record "$name" FAIL
    fi
fi

stage "summary"
printf '%s\n' "${results[@]}"
echo "total time: $(($(date +%s) - t_start)) s"
exit $failed
