#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# Brings up a one-node Slurm (munged + slurmctld + slurmd) on 127.0.0.1 for
# the launcher tests, as root on Debian 12 without systemd. Idempotent: what
# already runs is left running. Installs nothing: run
# `contrib/ci/install-deps.sh --full` first. Tear down with slurm-down.sh.
#
#   contrib/ci/slurm-up.sh
#
# Environment: SLURM_UP_TIMEOUT (seconds to wait for the node to be idle,
# default 60), SLURM_UP_CPUS (CPUs the node advertises, default 8: more than
# the cores is fine, slurmd is told to trust the config).
#
# Recipe and pitfalls: /work/shared/notes/LOCAL-SLURM.md (the daemons do not
# start on install; a node with more CPUs than cores goes "inval" unless
# SlurmdParameters=config_overrides; --mpi=pmix needs libpmix-dev).
set -eu

timeout_s=${SLURM_UP_TIMEOUT:-60}
cpus=${SLURM_UP_CPUS:-8}
conf_dir=/etc/slurm
conf=$conf_dir/slurm.conf
marker="# written by fabcoll contrib/ci/slurm-up.sh"
munge_pid=/run/munge/munged.pid
ctld_pid=/run/slurmctld.pid
slurmd_pid=/run/slurmd.pid
logdir=/var/log/slurm

say() { echo "slurm-up: $*"; }
die() { echo "slurm-up: error: $*" >&2; exit 1; }

# ---- preconditions ----------------------------------------------------------
[ "$(id -u)" = 0 ] || die "must run as root (it writes $conf and starts daemons)"
for b in /usr/sbin/munged /usr/sbin/mungekey /usr/sbin/slurmctld /usr/sbin/slurmd sinfo srun \
         scontrol munge unmunge runuser; do
    command -v "$b" >/dev/null 2>&1 ||
        die "$b not found. Fix: contrib/ci/install-deps.sh --full (installs slurm-wlm, munge)"
done

# alive PIDFILE NAME: the pid in PIDFILE runs a program called NAME
alive() {
    [ -s "$1" ] || return 1
    p=$(cat "$1" 2>/dev/null) || return 1
    case $p in ''|*[!0-9]*) return 1 ;; esac
    [ -r "/proc/$p/comm" ] || return 1
    case $(cat "/proc/$p/comm" 2>/dev/null) in "$2"*) return 0 ;; esac
    return 1
}

node_state() { sinfo -h -N -n localhost -o %T 2>/dev/null | head -1; }

show_logs() {
    for f in "$logdir/slurmctld.log" "$logdir/slurmd.log" /var/log/munge/munged.log; do
        [ -f "$f" ] || continue
        echo "---- last lines of $f" >&2
        tail -n 15 "$f" >&2
    done
}

# ---- munge --------------------------------------------------------------------
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
chmod 0755 /run/munge
if [ ! -s /etc/munge/munge.key ]; then
    say "creating /etc/munge/munge.key"
    mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
fi
if alive "$munge_pid" munged; then
    say "munged already running (pid $(cat "$munge_pid"))"
else
    rm -f "$munge_pid" /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
    say "starting munged"
    runuser -u munge -- /usr/sbin/munged || die "munged did not start (see /var/log/munge/munged.log)"
fi
i=0
until munge -n 2>/dev/null | unmunge >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -lt 50 ] || { show_logs; die "munge does not answer after 5 s (munge -n | unmunge)"; }
    sleep 0.1
done

# ---- slurm.conf -----------------------------------------------------------------
mkdir -p "$conf_dir" /var/spool/slurmctld /var/spool/slurmd "$logdir"
new=$(mktemp)
cat >"$new" <<EOF
$marker
# One node on 127.0.0.1 for fabcoll's launcher tests; see slurm-down.sh.
ClusterName=ci
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$ctld_pid
SlurmdPidFile=$slurmd_pid
SlurmctldLogFile=$logdir/slurmctld.log
SlurmdLogFile=$logdir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
conf_changed=0
if [ -f "$conf" ] && cmp -s "$new" "$conf"; then
    rm -f "$new"
else
    if [ -f "$conf" ] && ! head -1 "$conf" | grep -qF "$marker"; then
        bak="$conf.before-fabcoll.$(date +%Y%m%d%H%M%S)"
        say "keeping the existing $conf (not ours) as $bak"
        cp -p "$conf" "$bak"
    fi
    say "writing $conf (1 node, CPUs=$cpus)"
    mv "$new" "$conf"
    chmod 0644 "$conf"
    conf_changed=1
fi

# ---- daemons ----------------------------------------------------------------------
if alive "$ctld_pid" slurmctld; then
    if [ $conf_changed = 1 ]; then
        say "slurmctld running (pid $(cat "$ctld_pid")); config changed: scontrol reconfigure"
        scontrol reconfigure || true
    else
        say "slurmctld already running (pid $(cat "$ctld_pid"))"
    fi
else
    rm -f "$ctld_pid"
    say "starting slurmctld (log $logdir/slurmctld.log)"
    # -c: start from a clean state (no jobs or node states of an earlier run)
    /usr/sbin/slurmctld -c || { show_logs; die "slurmctld did not start"; }
fi
if alive "$slurmd_pid" slurmd; then
    say "slurmd already running (pid $(cat "$slurmd_pid"))"
else
    rm -f "$slurmd_pid"
    say "starting slurmd (log $logdir/slurmd.log)"
    /usr/sbin/slurmd -N localhost || { show_logs; die "slurmd did not start"; }
fi

# ---- wait for the node --------------------------------------------------------------
start=$(date +%s)
state=""
resumed=0
while :; do
    state=$(node_state || true)
    case $state in
    idle|mixed|allocated) break ;;
    down*|drain*|fail*)
        # ReturnToService=2 normally does this; a node left down by an
        # earlier run may need it once
        if [ $resumed = 0 ]; then
            say "node is '$state': scontrol update nodename=localhost state=resume"
            scontrol update nodename=localhost state=resume 2>/dev/null || true
            resumed=1
        fi ;;
    esac
    if [ $(($(date +%s) - start)) -ge "$timeout_s" ]; then
        echo "slurm-up: error: node 'localhost' is not idle after ${timeout_s} s (state: '${state:-no answer from slurmctld}')" >&2
        scontrol show node localhost 2>/dev/null | grep -E "State|Reason" >&2 || true
        show_logs
        exit 1
    fi
    sleep 0.5
done
say "up in $(($(date +%s) - start)) s: node localhost is $state; srun --mpi= plugins:$(srun --mpi=list 2>/dev/null | sed '/MPI plugin types/d; s/specific pmix plugin versions available://' | tr -s ' \t\n,' ' ' | sed 's/ *$//')"
