#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# Tears down what slurm-up.sh started: cancels every job, then stops slurmd,
# slurmctld and munged by the pids in their pid files (never by name: other
# processes of the machine are left alone). Safe to run when nothing runs.
# /etc/slurm/slurm.conf is left in place.
#
#   contrib/ci/slurm-down.sh
set -u

say() { echo "slurm-down: $*"; }
[ "$(id -u)" = 0 ] || { echo "slurm-down: error: must run as root" >&2; exit 1; }

# alive PIDFILE NAME: prints the pid when PIDFILE names a live NAME process
alive() {
    [ -s "$1" ] || return 1
    p=$(cat "$1" 2>/dev/null) || return 1
    case $p in ''|*[!0-9]*) return 1 ;; esac
    case $(cat "/proc/$p/comm" 2>/dev/null) in "$2"*) echo "$p"; return 0 ;; esac
    return 1
}

# stop PIDFILE NAME: TERM, wait up to 10 s, then KILL
stop() {
    if ! p=$(alive "$1" "$2"); then
        say "$2 is not running"
        rm -f "$1"
        return 0
    fi
    say "stopping $2 (pid $p)"
    kill -TERM "$p" 2>/dev/null || true
    i=0
    while [ -d "/proc/$p" ] && [ $i -lt 100 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    if [ -d "/proc/$p" ]; then
        say "$2 (pid $p) ignored SIGTERM for 10 s: SIGKILL"
        kill -KILL "$p" 2>/dev/null || true
    fi
    rm -f "$1"
}

# jobs first, while slurmctld can still answer
if p=$(alive /run/slurmctld.pid slurmctld) && command -v squeue >/dev/null 2>&1; then
    jobs=$(timeout 10 squeue -h -o %i 2>/dev/null | tr '\n' ' ')
    if [ -n "$(echo "$jobs" | tr -d ' ')" ]; then
        say "cancelling jobs: $jobs"
        # shellcheck disable=SC2086
        timeout 10 scancel $jobs 2>/dev/null || true
        i=0
        while [ -n "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && [ $i -lt 30 ]; do
            sleep 0.5
            i=$((i + 1))
        done
    fi
fi
stop /run/slurmd.pid slurmd
stop /run/slurmctld.pid slurmctld
stop /run/munge/munged.pid munged
say "done"
