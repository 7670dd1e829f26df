#!/usr/bin/env bash
# A real one-node Slurm cluster on this machine, for `cptsim sweep run --executor slurm` and its
# end-to-end test: munged, slurmctld and slurmd with a minimal config.
#
#   scripts/slurm-local.sh start    # idempotent: starts what is not running, waits for the node
#   scripts/slurm-local.sh stop     # stops what this script started
#   scripts/slurm-local.sh status   # prints sinfo, exit 1 when the cluster is not up
#
# Needs root and the Debian packages slurmctld slurmd slurm-client munge
# (`apt-get install -y slurmctld slurmd slurm-client munge`). State, logs and spool live under
# $CPTSIM_SLURM_DIR (default: $TMPDIR/cptsim-slurm or /tmp/cptsim-slurm). The config is written
# there and installed as /etc/slurm/slurm.conf (where sbatch/squeue look) unless that file exists
# and was not written by this script.
set -euo pipefail

state="${CPTSIM_SLURM_DIR:-${TMPDIR:-/tmp}/cptsim-slurm}"
conf="$state/slurm.conf"
etc_conf=/etc/slurm/slurm.conf
marker="# written by cptsim scripts/slurm-local.sh"

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

need() {
    for tool in munged slurmctld slurmd sinfo sbatch; do
        command -v "$tool" >/dev/null || {
            echo "slurm-local: $tool not found; install: apt-get install -y slurmctld slurmd slurm-client munge" >&2
            exit 1
        }
    done
}

write_config() {
    mkdir -p "$state/ctld" "$state/d" "$state/log"
    local host cpus
    host="$(hostname)"
    cpus="$(nproc)"
    cat >"$conf.tmp" <<EOF
$marker
ClusterName=cptsim
SlurmctldHost=$host
AuthType=auth/munge
SlurmUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
MpiDefault=none
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/d
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
MinJobAge=30
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    mv "$conf.tmp" "$conf"
    mkdir -p /etc/slurm
    if [ -f "$etc_conf" ] && ! grep -qF "$marker" "$etc_conf"; then
        echo "slurm-local: $etc_conf exists and is not ours; clients need SLURM_CONF=$conf" >&2
    else
        cp "$conf" "$etc_conf"
    fi
}

start_munge() {
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        return
    fi
    if [ ! -s /etc/munge/munge.key ]; then
        dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    runuser -u munge -- munged
    touch "$state/started-munged"
    for _ in $(seq 50); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return
        sleep 0.1
    done
    echo "slurm-local: munged did not come up" >&2
    exit 1
}

start() {
    need
    mkdir -p "$state"
    write_config
    start_munge
    export SLURM_CONF="$conf"
    alive "$state/slurmctld.pid" || slurmctld -f "$conf"
    alive "$state/slurmd.pid" || slurmd -f "$conf"
    for _ in $(seq 60); do
        node_state="$(sinfo -h -o %T 2>/dev/null | head -n1 || true)"
        case "$node_state" in
        idle* | mixed* | allocated*)
            echo "slurm-local: up (node $node_state, state in $state)"
            return
            ;;
        down* | drain*)
            scontrol update nodename="$(hostname)" state=resume >/dev/null 2>&1 || true
            ;;
        esac
        sleep 1
    done
    echo "slurm-local: the node did not become idle; logs in $state/log" >&2
    sinfo >&2 || true
    exit 1
}

stop() {
    for daemon in slurmd slurmctld; do
        if alive "$state/$daemon.pid"; then
            kill "$(cat "$state/$daemon.pid")"
        fi
    done
    if [ -f "$state/started-munged" ]; then
        if alive /run/munge/munged.pid; then
            kill "$(cat /run/munge/munged.pid)"
        fi
        rm -f "$state/started-munged"
    fi
    echo "slurm-local: stopped"
}

status() {
    if alive "$state/slurmctld.pid" && alive "$state/slurmd.pid" && sinfo; then
        exit 0
    fi
    echo "slurm-local: not running" >&2
    exit 1
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
*)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
