#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# Runs fabcoll under the launchers HPC sites use, on a running Slurm
# (contrib/ci/slurm-up.sh) and with Open MPI installed:
#   - the functional tests (test/functional/run.sh) at 4 ranks over tcp (all
#     but coll_mismatch and shrink) and shm (a subset) under srun --mpi=pmix,
#     plain srun (fabcoll's own Slurm bootstrap),
#     srun --mpi=pmi2 (when this build has PMI-2) and Open MPI's mpirun;
#   - plain srun's MUNGE handshake (test_munge with munged required), its
#     refusal without munged and FC_BOOT_AUTH=none;
#   - contrib/examples/mpi_interop (fabcoll inside an MPI program) under
#     mpirun and srun --mpi=pmix, built with its Makefile through pkg-config;
#   - contrib/slurm/fabcoll-preflight.sbatch and fabcoll-perf.sbatch, for
#     real, with sbatch on one node.
# Prints each step's summary line and a total; exit status 1 if anything
# failed. About 5 minutes on a 2-core machine.
#
#   contrib/ci/launcher-tests.sh [BUILD_DIR]     (default: the repository root)
#
# BUILD_DIR is a configured and built tree (in-tree or out-of-tree); the
# functional test programs are built there (make check TESTS=) when missing.
# Logs of every step: $LAUNCHER_TESTS_LOGDIR (default: a new /tmp directory).
set -u

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$src}" 2>/dev/null && pwd) || { echo "launcher-tests: no such build dir: ${1:-}" >&2; exit 2; }
ranks=4
logdir=${LAUNCHER_TESTS_LOGDIR:-$(mktemp -d /tmp/launcher-tests.XXXXXX)}
mkdir -p "$logdir"
t_start=$(date +%s)

say() { echo "launcher-tests: $*"; }
steps_ok=0 steps_failed=0 tests_pass=0 tests_fail=0 tests_skip=0
failed_steps=()
step_result() { # name, rc, summary
    if [ "$2" = 0 ]; then
        steps_ok=$((steps_ok + 1))
        printf 'launcher-tests: %-34s %s\n' "$1" "$3"
    else
        steps_failed=$((steps_failed + 1))
        failed_steps+=("$1")
        printf 'launcher-tests: %-34s FAILED: %s\n' "$1" "$3"
    fi
}

# ---- preconditions ------------------------------------------------------------
[ -f "$build/Makefile" ] && [ -f "$build/build_config.h" ] ||
    { say "error: $build is not a configured fabcoll build dir (no Makefile / build_config.h)"; exit 2; }
[ -e "$build/.libs/libfabcoll.so" ] ||
    { say "error: $build has no .libs/libfabcoll.so: run make there first"; exit 2; }
for tool in sinfo srun sbatch squeue mpirun mpicc pkg-config; do
    command -v "$tool" >/dev/null 2>&1 ||
        { say "error: $tool not found: contrib/ci/install-deps.sh --full installs Slurm and Open MPI"; exit 2; }
done
state=$(timeout 10 sinfo -h -o %T 2>/dev/null | head -1)
case $state in
idle*|mixed*|allocated*) ;;
*) say "error: Slurm does not answer or has no usable node (sinfo: '${state:-no answer}'): run contrib/ci/slurm-up.sh first"; exit 2 ;;
esac
if [ ! -x "$build/test/functional/allreduce" ] || [ ! -x "$build/test/functional/uid" ]; then
    say "building the functional test programs (make check TESTS=) in $build"
    make -C "$build" -j2 check TESTS= >"$logdir/build-tests.log" 2>&1 ||
        { say "error: building the test programs failed; see $logdir/build-tests.log"; exit 2; }
fi
have_pmi2=0
grep -q '^#define HAVE_PMI2 1' "$build/build_config.h" && srun --mpi=list 2>&1 | grep -qw pmi2 &&
    have_pmi2=1
say "build $build, logs in $logdir, Slurm node $state, $ranks ranks"

# ---- functional tests under each launcher --------------------------------------------
launchers=(srun-pmix srun)
[ $have_pmi2 = 1 ] && launchers+=(srun-pmi2) || say "srun-pmi2: skipped (this build or this Slurm has no PMI-2)"
launchers+=(mpirun)
# Under each launcher: every test over tcp but the two that exercise the
# fabric alone for a minute (coll_mismatch, shrink: make check runs them at
# 2-4 ranks on both providers), and over shm the collectives, the failure
# tests and the hang report (the launcher's part is the same on both).
shm_tests=(allreduce broadcast alltoall gather_scatter vcoll nonblocking split api_program
    timeout peer_exit hang_report)
for l in "${launchers[@]}"; do
    for p in tcp shm; do
        log="$logdir/functional-$l-$p.log"
        if [ $p = tcp ]; then which=(-e coll_mismatch -e shrink); else which=("${shm_tests[@]}"); fi
        FC_RUN="$build/fc_run" timeout -k 10 420 "$src/test/functional/run.sh" \
            -p "$p" -n "$ranks" -l "$l" -t 120 -b "$build/test/functional" "${which[@]}" \
            >"$log" 2>&1
        rc=$?
        summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -1)
        [ -n "$summary" ] || { summary="no summary line (rc $rc, timed out?)"; rc=1; }
        read -r np _ nf _ ns _ <<<"$summary"
        tests_pass=$((tests_pass + ${np:-0})); tests_fail=$((tests_fail + ${nf:-0}))
        tests_skip=$((tests_skip + ${ns:-0}))
        step_result "functional $l $p" $rc "$summary"
        [ $rc = 0 ] || grep '^FAIL' "$log" | sed 's/^/    /'
    done
done

# ---- plain srun's MUNGE-authenticated rendezvous --------------------------------------
# munged runs here (slurm-up.sh): the unit tests of the handshake (another
# user's client, a squatter on a port of the job, replays) may not skip
if [ -x "$build/test/unit/test_munge" ]; then
    log="$logdir/test_munge.log"
    FC_TEST_MUNGE=require timeout -k 5 120 "$build/test/unit/test_munge" >"$log" 2>&1
    rc=$?
    step_result "MUNGE handshake (test_munge)" $rc "$(grep -m1 'Synthesis' "$log" || echo "no summary (rc $rc)")"
    [ $rc = 0 ] || tail -n 20 "$log" | sed 's/^/    /'
else
    say "MUNGE handshake (test_munge): skipped (built without Criterion)"
fi
# without munged, plain srun refuses at once and names the fix
log="$logdir/srun-no-munge.log"
t0=$(date +%s)
FC_MUNGE_SOCKET=/nonexistent/munge.socket FI_PROVIDER=tcp timeout -k 5 60 \
    srun -n 2 -O "$build/test/functional/allreduce" >"$log" 2>&1
rc=$?
dt=$(($(date +%s) - t0))
if [ $rc != 0 ] && [ $dt -lt 30 ] && grep -q 'munged does not answer' "$log" &&
    grep -q -- '--mpi=pmix' "$log" && grep -q 'FC_BOOT_AUTH=none' "$log"; then
    step_result "plain srun without munged" 0 "refused in ${dt} s, naming the fix"
else
    step_result "plain srun without munged" 1 "rc $rc after ${dt} s; expected a refusal naming --mpi=pmix"
    tail -n 5 "$log" | sed 's/^/    /'
fi
# a squatter of another user (nobody) on the first port a plain-srun-like
# job derives: the ranks skip it, warn, send it nothing of the job (the
# hello, magic FCB1, carries the job's secret) and finish
jobenv=(SLURM_JOB_ID=$((900000 + RANDOM)) SLURM_STEP_ID=0 SLURM_NTASKS=2
        SLURM_STEP_NODELIST=localhost FI_PROVIDER=tcp FC_BOOT_TIMEOUT=30)
log="$logdir/squatter"
mkdir -p "$log"
sqdir=$(mktemp -d /tmp/fc-squatter.XXXXXX) && chmod 777 "$sqdir" # nobody writes its counts here
port=$(env "${jobenv[@]}" SLURM_PROCID=0 FC_DEBUG=INFO FC_BOOT_TIMEOUT=1 \
    "$build/test/functional/allreduce" 2>&1 | sed -n 's/.*serves the rendezvous on port \([0-9]*\).*/\1/p' | head -1)
if [ -n "$port" ] && id nobody >/dev/null 2>&1; then
    runuser -u nobody -- python3 -c '
import socket, sys, time
port, out = int(sys.argv[1]), sys.argv[2]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", port)); s.listen(64); s.settimeout(0.5)
open(out + ".up", "w").close()
conns, hello, end = 0, 0, time.time() + 25
while time.time() < end:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    conns += 1
    c.settimeout(2)
    data = b""
    try:
        data = c.recv(65536)
        c.sendall(b"FCB1" * 4)  # anything but a credential of the job user
        while True:
            x = c.recv(65536)
            if not x:
                break
            data += x
    except OSError:
        pass
    c.close()
    hello += data.count(b"FCB1")
    with open(out, "w") as f:
        f.write("%d %d\n" % (conns, hello))
' "$port" "$sqdir/counts" 2>"$log/squatter.err" &
    sq=$!
    for i in $(seq 50); do [ -e "$sqdir/counts.up" ] && break; sleep 0.1; done
    env "${jobenv[@]}" SLURM_PROCID=1 timeout -k 5 60 "$build/test/functional/allreduce" \
        >"$log/r1.out" 2>"$log/r1.err" &
    r1=$!
    env "${jobenv[@]}" SLURM_PROCID=0 timeout -k 5 60 "$build/test/functional/allreduce" \
        >"$log/r0.out" 2>"$log/r0.err"
    rc0=$?
    wait $r1; rc1=$?
    kill $sq 2>/dev/null; wait $sq 2>/dev/null
    read -r conns hello <"$sqdir/counts" 2>/dev/null
    rm -rf "$sqdir"
    if [ $rc0 = 0 ] && [ $rc1 = 0 ] && [ "${conns:-0}" -gt 0 ] && [ "${hello:-1}" = 0 ] &&
        cat "$log"/r*.err | grep -q "refused the listener on port $port"; then
        step_result "squatter on a derived port" 0 "skipped after ${conns} connection(s), sent no hello; job passed"
    else
        step_result "squatter on a derived port" 1 "ranks rc $rc0/$rc1, squatter saw ${conns:-?} connections and ${hello:-?} hellos"
        tail -n 5 "$log"/r*.err | sed 's/^/    /'
    fi
else
    step_result "squatter on a derived port" 1 "no derived port in rank 0's log (or no user nobody)"
fi
# FC_BOOT_AUTH=none: works, and warns once for the job
log="$logdir/srun-auth-none.log"
FC_BOOT_AUTH=none FI_PROVIDER=tcp timeout -k 5 60 srun -n 3 -O "$build/test/functional/allreduce" \
    >"$log" 2>&1
rc=$?
nw=$(grep -c 'FC_BOOT_AUTH=none: plain srun' "$log")
if [ $rc = 0 ] && [ "$nw" = 1 ]; then
    step_result "plain srun FC_BOOT_AUTH=none" 0 "passed, 1 warning"
else
    step_result "plain srun FC_BOOT_AUTH=none" 1 "rc $rc, $nw warnings (expected 0 and 1)"
    tail -n 5 "$log" | sed 's/^/    /'
fi

# ---- fabcoll inside an MPI program ------------------------------------------------------
# pkg-config finds this build tree through a .pc file made for it (no install).
exdir="$logdir/examples"
mkdir -p "$exdir/pkgconfig"
top_srcdir=$(sed -n 's/^abs_top_srcdir = //p' "$build/Makefile")
cat >"$exdir/pkgconfig/fabcoll.pc" <<EOF
includedir=${top_srcdir:-$src}/include
libdir=$build/.libs
Name: fabcoll
Description: fabcoll build tree $build
Version: 0
Libs: -L\${libdir} -lfabcoll
Cflags: -I\${includedir}
EOF
if make -C "$exdir" -f "$src/contrib/examples/Makefile" PKG_CONFIG_PATH="$exdir/pkgconfig" \
        >"$exdir/build.log" 2>&1; then
    for p in tcp shm; do
        log="$exdir/mpirun-$p.log"
        timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe -n "$ranks" -x FI_PROVIDER="$p" \
            "$exdir/mpi_interop" 65536 >"$log" 2>&1
        rc=$?
        step_result "mpi_interop mpirun $p" $rc "$(grep -m1 '^mpi_interop:' "$log" || echo "no result line (rc $rc)")"
        [ $rc = 0 ] || tail -n 15 "$log" | sed 's/^/    /'
        log="$exdir/srun-pmix-$p.log"
        FI_PROVIDER=$p timeout -k 5 120 srun --mpi=pmix -n "$ranks" -O --kill-on-bad-exit=1 \
            "$exdir/mpi_interop" 65536 >"$log" 2>&1
        rc=$?
        step_result "mpi_interop srun-pmix $p" $rc "$(grep -m1 '^mpi_interop:' "$log" || echo "no result line (rc $rc)")"
        [ $rc = 0 ] || tail -n 15 "$log" | sed 's/^/    /'
    done
else
    step_result "mpi_interop build" 1 "make failed; see $exdir/build.log"
    tail -n 15 "$exdir/build.log" | sed 's/^/    /'
fi

# ---- the sbatch scripts, for real ------------------------------------------------------
# sbatch_wait NAME SCRIPT ARGS...: submits, waits (bounded), prints the job's exit code
sbatch_wait() {
    local name=$1 script=$2; shift 2
    local out="$logdir/$name-%j.out" jid
    jid=$(cd "$src" && sbatch --parsable --output="$out" "$@" "$script" 2>"$logdir/$name.sbatch.err") ||
        { echo "sbatch failed: $(cat "$logdir/$name.sbatch.err")"; return 1; }
    jid=${jid%%;*}
    local i
    for ((i = 0; i < 300; i++)); do
        squeue -h -j "$jid" 2>/dev/null | grep -q . || break
        sleep 1
    done
    if [ $i -ge 300 ]; then
        scancel "$jid" 2>/dev/null
        echo "job $jid did not finish within 300 s (cancelled)"
        return 1
    fi
    sbatch_out="$logdir/$name-$jid.out"
    local ec
    ec=$(scontrol show job "$jid" 2>/dev/null | sed -n 's/.*ExitCode=\([0-9]*\):.*/\1/p')
    [ -n "$ec" ] || ec=$(grep -q 'status=OK' "$sbatch_out" 2>/dev/null && echo 0 || echo 1)
    return "$ec"
}

sbatch_out=""
FC_INFO="$build/fc_info" sbatch_wait preflight "$src/contrib/slurm/fabcoll-preflight.sbatch" -N1
rc=$?
step_result "sbatch fabcoll-preflight" $rc "$(grep -m1 '^preflight:' "$sbatch_out" 2>/dev/null || echo "no verdict line (rc $rc)")"
[ $rc = 0 ] || { [ -f "$sbatch_out" ] && tail -n 20 "$sbatch_out" | sed 's/^/    /'; }

sbatch_out=""
FC_PERF="$build/fc_perf" FABCOLL_PERF_MAXBYTES=1M FABCOLL_PERF_ITERS=5 \
    FABCOLL_PERF_TABLE_FILE="$logdir/fabcoll-table.txt" sbatch_wait perf "$src/contrib/slurm/fabcoll-perf.sbatch" -N1 --ntasks-per-node="$ranks"
rc=$?
step_result "sbatch fabcoll-perf" $rc "$(grep -m1 '^fabcoll-perf:' "$sbatch_out" 2>/dev/null || echo "no verdict line (rc $rc)")"
[ $rc = 0 ] || { [ -f "$sbatch_out" ] && tail -n 20 "$sbatch_out" | sed 's/^/    /'; }

# ---- total ---------------------------------------------------------------------------
echo
say "total: functional tests $tests_pass passed, $tests_fail failed, $tests_skip skipped;" \
    "steps $steps_ok ok, $steps_failed failed; $(($(date +%s) - t_start)) s"
if [ $steps_failed -gt 0 ]; then
    say "FAILED: ${failed_steps[*]} (logs in $logdir)"
    exit 1
fi
say "OK"
