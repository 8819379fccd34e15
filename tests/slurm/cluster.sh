#!/usr/bin/env bash
# A real two-node Slurm cluster on this machine, for the tests (recipe: shared/docs/local-slurm.md).
# Two slurmd daemons (node1, node2) share the host; each has its own /tmp (private mount namespace) so
# that Slurm's PMIx plugin does not collide between them. Needs root and Debian's slurm-wlm + munge.
#
#   tests/slurm/cluster.sh start    start (idempotent) and wait until both nodes are idle
#   tests/slurm/cluster.sh stop     stop the daemons started here
#   tests/slurm/cluster.sh status   sinfo
#   tests/slurm/cluster.sh logs     print every daemon log (for failed tests)
#   tests/slurm/cluster.sh env      print the variables clients need (eval "$(cluster.sh env)")
#
# Partitions: debug (the default) and urgent, whose jobs preempt debug's (PreemptMode=REQUEUE: a preempted
# batch job is requeued), for the preemption test.
# Files a job reads must not live under /tmp: each node sees its own. Use the staging directory
# $DLAUNCH_SLURM_BASE/shared (tests/slurm/stage.sh copies the build there).
set -euo pipefail

base=${DLAUNCH_SLURM_BASE:-/var/lib/dlaunch-test-slurm}
conf=$base/slurm.conf
host=$(hostname)

log() { echo "cluster: $*" >&2; }

write_config() {
  mkdir -p "$base"/{state,shared} "$base"/spool-node{1,2}
  for n in 1 2; do mkdir -p "$base/tmp-node$n"; chmod 1777 "$base/tmp-node$n"; done
  chmod 755 "$base" "$base/shared"
  [[ -f $base/plugstack.conf ]] || : > "$base/plugstack.conf"
  cat > "$conf.new" <<CONF
ClusterName=dlaunchtest
SlurmctldHost=$host
SlurmctldPort=16817
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
StateSaveLocation=$base/state
SlurmdSpoolDir=$base/spool-%n
SlurmctldPidFile=$base/slurmctld.pid
SlurmdPidFile=$base/slurmd-%n.pid
SlurmctldLogFile=$base/slurmctld.log
SlurmdLogFile=$base/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobRequeue=1
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=30
TaskProlog=$base/task_prolog.sh
PlugStackConfig=$base/plugstack.conf
NodeName=node[1-2] NodeHostname=$host NodeAddr=127.0.0.1 Port=17001-17002 CPUs=2 RealMemory=2000 State=UNKNOWN
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES PriorityTier=1
PartitionName=urgent Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=2
CONF
  mv "$conf.new" "$conf"
  # A TaskProlog that leaves a mark in every task's environment (tests check it still runs).
  cat > "$base/task_prolog.sh" <<'PROLOG'
#!/bin/sh
echo "export DLAUNCH_TEST_TASK_PROLOG=ran"
PROLOG
  chmod 755 "$base/task_prolog.sh"
}

alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return; fi
  [[ -f /etc/munge/munge.key ]] || { log "no /etc/munge/munge.key (install munge)"; exit 1; }
  mkdir -p /run/munge && chown munge:munge /run/munge
  su munge -s /bin/sh -c munged
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return; sleep 0.1; done
  log "munged did not come up"; exit 1
}

wait_idle() {
  for _ in $(seq 150); do
    state=$(SLURM_CONF=$conf sinfo -h -N -p debug -o '%N %t' 2>/dev/null || true)
    if [[ $(grep -c ' idle$' <<<"$state" || true) -eq 2 ]]; then return 0; fi
    if grep -qE ' (down|drain|drng|fail)' <<<"$state"; then
      SLURM_CONF=$conf scontrol update nodename=node1,node2 state=resume >/dev/null 2>&1 || true
    fi
    sleep 0.2
  done
  log "nodes not idle after 30 s:"; SLURM_CONF=$conf sinfo -N >&2 || true; return 1
}

start() {
  command -v slurmctld >/dev/null || { log "slurmctld missing (apt-get install slurm-wlm)"; exit 1; }
  write_config
  start_munge
  alive "$base/slurmctld.pid" || slurmctld -f "$conf"
  for n in 1 2; do
    alive "$base/slurmd-node$n.pid" && continue
    unshare -m --propagation private sh -c \
      "mount --bind '$base/tmp-node$n' /tmp && exec slurmd -f '$conf' -N node$n"
  done
  wait_idle || { logs; exit 1; }
  log "up: $(SLURM_CONF=$conf sinfo -h -o '%D nodes %t')"
}

stop() {
  for f in "$base"/slurmd-node1.pid "$base"/slurmd-node2.pid "$base"/slurmctld.pid; do
    if alive "$f"; then kill "$(cat "$f")"; fi
  done
  for _ in $(seq 50); do
    alive "$base/slurmctld.pid" || alive "$base/slurmd-node1.pid" || alive "$base/slurmd-node2.pid" || return 0
    sleep 0.1
  done
}

logs() {
  for f in "$base"/slurmctld.log "$base"/slurmd-node1.log "$base"/slurmd-node2.log; do
    [[ -f $f ]] && { echo "===== $f (last 60 lines)"; tail -n 60 "$f"; }
  done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) SLURM_CONF=$conf sinfo ;;
  logs) logs ;;
  env) echo "export SLURM_CONF=$conf DLAUNCH_SLURM_SHARED=$base/shared" ;;
  *) echo "usage: $0 start|stop|status|logs|env" >&2; exit 2 ;;
esac
