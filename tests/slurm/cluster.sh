#!/usr/bin/env bash
# A real Slurm cluster of N nodes on this machine (three for the tests; facts: shared/docs/realistic-slurm.md).
# Each compute node nsn1..nsnN is a slurmd in its own network, UTS, mount and cgroup namespace: its own
# address (10.77.0.11, .12, …) on a bridge, its own hostname, /tmp and /etc/hosts (bind mounts; the host's files
# are never touched), and its own cgroup tree where Slurm confines jobs (proctrack/cgroup, task/cgroup with
# ConstrainCores and ConstrainRAMSpace, task/affinity). slurmctld runs in namespace nsctl (10.77.0.1).
# Clients on the host reach it through the host's side of the bridge (10.77.0.254). Needs root, slurm-wlm,
# munge, iproute2 and util-linux (packaging/debian-deps.sh).
#
#   cluster.sh start [--nodes N]
#                             bring up what is missing (idempotent) and wait until every node is idle; N
#                             compute nodes (at most 200; the scale benchmark uses up to 64), by default as
#                             many as the last start made (3 the first time: the tests' size, which CTest
#                             asks for). A different N starts a fresh cluster. Says how long start took and
#                             the slurmds' memory.
#   cluster.sh stop | down    remove everything start made: daemons, jobs, namespaces, bridge, cgroups
#   cluster.sh status         sinfo
#   cluster.sh logs           every daemon log (for failed tests)
#   cluster.sh env            the variables clients need (eval "$(cluster.sh env)")
#   cluster.sh exec NODE CMD  run CMD on NODE (nsctl, nsn1..nsnN): its namespaces and cgroup
#   cluster.sh kill NODE      a node's death: link down, then its slurmd and every process on it SIGKILLed;
#                             `start` brings it back
#
# Partitions: debug (the default) and urgent, whose jobs preempt debug's (PreemptMode=REQUEUE: a preempted
# batch job is requeued), for the preemption test.
# Files a job reads must not live under /tmp: each node sees its own. Use the staging directory
# $DLAUNCH_SLURM_BASE/shared (tests/slurm/stage.sh copies the build there).
set -euo pipefail

base=${DLAUNCH_SLURM_BASE:-/var/lib/dlaunch-test-cluster}
conf=$base/slurm.conf
self=$(readlink -f "$0")
bridge=nsbr0
net=10.77.0
host_ip=$net.254
ctl=nsctl
declare -a nodes
declare -A ip
# The compute nodes nsn1..nsnN and every address: the controller .1, node i .(10+i), this machine .254.
set_nodes() {
  local i
  nodes=()
  ip=([$ctl]=$net.1)
  for ((i = 1; i <= $1; i++)); do nodes+=("nsn$i"); ip[nsn$i]=$net.$((10 + i)); done
}
# How many nodes the last start made (3 when none did): stop, exec and kill act on those.
started_count() {
  local n
  n=$(cat "$base/node-count" 2>/dev/null || true)
  [[ $n =~ ^[1-9][0-9]*$ ]] && echo "$n" || echo 3
}
set_nodes "$(started_count)"
# cgroup v1 controllers a node gets as its own tree (freezer: proctrack/cgroup; cpuset, memory: task/cgroup).
controllers=(cpuset memory freezer devices cpu cpuacct pids)
cgroot=/sys/fs/cgroup

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }
client() { SLURM_CONF=$conf "$@"; }
# Every node's interface has a name of its own, so a test can tell which node chose it.
ifname() { echo "$1-eth0"; }

# This machine's own names for the nodes' hosts file, as a site's login node has them: clients run here, and
# Slurm 24.11's slurmctld answers srun by the short name of srun's host (unresolved, each call stalled
# slurmctld for 10 s and a job's completion for 75 s, so that the next test found the nodes busy). Nothing
# for a name the file already gives (localhost, the cluster's own).
this_machine() {
  local full short n
  full=$(hostname)
  short=${full%%.*}
  for n in localhost "$ctl" "${nodes[@]}"; do [[ $short == "$n" ]] && return 0; done
  if [[ $full == "$short" ]]; then echo "$host_ip $short"; else echo "$host_ip $full $short"; fi
}

write_config() {
  local n
  mkdir -p "$base"/{state,log,run,shared}
  for n in "$ctl" "${nodes[@]}"; do mkdir -p "$base/spool/$n"; done
  chmod 755 "$base" "$base/shared"
  [[ -f $base/plugstack.conf ]] || : > "$base/plugstack.conf"
  { echo "127.0.0.1 localhost"; for n in "$ctl" "${nodes[@]}"; do echo "${ip[$n]} $n"; done
    this_machine; } > "$base/hosts"
  # A TaskProlog that leaves a mark in every task's environment (tests check it still runs).
  printf '#!/bin/sh\necho "export DLAUNCH_TEST_TASK_PROLOG=ran"\n' > "$base/task_prolog.sh"
  chmod 755 "$base/task_prolog.sh"
  cat > "$base/cgroup.conf" <<CONF
CgroupPlugin=cgroup/v1
CgroupMountpoint=$cgroot
ConstrainCores=yes
ConstrainRAMSpace=yes
CONF
  slurm_conf > "$conf.new"
}

slurm_conf() {
  cat <<CONF
ClusterName=dlaunchtest
SlurmctldHost=$ctl(${ip[$ctl]})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# Slurm holds a requeued batch job for cred_expire seconds (default 120) before it may start again.
AuthInfo=cred_expire=10
StateSaveLocation=$base/state
SlurmdSpoolDir=$base/spool/%n
SlurmctldPidFile=$base/run/slurmctld.pid
SlurmdPidFile=$base/run/slurmd-%n.pid
SlurmctldLogFile=$base/log/slurmctld.log
SlurmdLogFile=$base/log/slurmd-%n.log
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup,task/affinity
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Two torch ranks per node fit in a node's 4000 MB; the default (500 MB per CPU in the recipe) does not.
DefMemPerCPU=2000
JobRequeue=1
# A held job whose BeginTime has come starts at the next scheduling pass, by default up to 30 s (backfill)
# or 60 s (main scheduler) later: every 2 s here, so requeued jobs come back when cred_expire allows.
SchedulerParameters=sched_interval=2,bf_interval=2
# A dead node is DOWN (and its requeued jobs free to start again) SlurmdTimeout seconds after its last
# answer: the dead-node requeue tests wait that long. 15 s was too little: while a killed node's address is
# silent, slurmctld's ping rounds wait on it, and on a busy 2-core machine a live node (the batch host) was
# once marked DOWN with it (Slurm 24.11), ending a job the group had already saved.
SlurmdTimeout=30
# When a node of a step dies, the step's first slurmstepd waits up to 60 s (Slurm's reverse-tree timeout) for
# the dead node's part of the step to complete, after every process of its own has ended. The default
# UnkillableStepTimeout is also 60 s: the first node then lost the race now and then and was drained ("Kill
# task failed"; seen at 16 nodes with bench/group_restart.py --kinds requeue, its step's cgroup empty since a
# minute). Sites raise it for the same reason.
UnkillableStepTimeout=120
SlurmctldTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=120
TaskProlog=$base/task_prolog.sh
PlugStackConfig=$base/plugstack.conf
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
CONF
  for n in "${nodes[@]}"; do
    echo "NodeName=$n NodeHostname=$n NodeAddr=${ip[$n]} CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2" \
         "ThreadsPerCore=1 RealMemory=4000 State=UNKNOWN"
  done
  echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES PriorityTier=1"
  echo "PartitionName=urgent Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=2"
}

pid_of() { local f=$base/run/$1.pid; [[ -s $f ]] && cat "$f"; }

# Alive and really our daemon: a pid file can outlive its process and the pid be reused.
alive() {
  local pid
  pid=$(pid_of "$1") || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qE "^(/usr/sbin/)?${1%%-*} "
}

start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return; fi
  [[ -f /etc/munge/munge.key ]] || die "no /etc/munge/munge.key (install munge)"
  mkdir -p /run/munge && chown munge:munge /run/munge
  su munge -s /bin/sh -c munged
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return; sleep 0.1; done
  die "munged did not come up"
}

ensure_bridge() {
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    ip addr add "$host_ip/24" dev "$bridge"
  fi
  ip link set "$bridge" up
}

# One namespace per node, joined to the bridge by a veth pair (host side v-NODE).
ensure_netns() {
  local n=$1 dev
  dev=$(ifname "$n")
  [[ -e /run/netns/$n ]] || ip netns add "$n"
  if ! ip link show "v-$n" >/dev/null 2>&1; then
    ip link add "v-$n" type veth peer name "$dev" netns "$n"
    ip -n "$n" addr add "${ip[$n]}/24" dev "$dev"
  fi
  ip link set "v-$n" master "$bridge" up
  ip -n "$n" link set lo up
  ip -n "$n" link set "$dev" up
}

# Where NODE's cgroup lives in a controller's hierarchy. Memory goes below this shell's memory cgroup,
# which a container may confine us to; the others below the root.
cgroup_parent() {
  local c=$1 cur=""
  [[ $c == memory ]] && cur=$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
  echo "$cgroot/$c${cur%/}/dlaunch-test"
}

# The node cgroups' parent in controller C: as recorded at start (the memory one depends on the caller).
cg_dir() {
  if [[ -s $base/run/cg-$1 ]]; then cat "$base/run/cg-$1"; else cgroup_parent "$1"; fi
}

ensure_cgroups() {
  local c parent n
  for c in "${controllers[@]}"; do
    [[ -d $cgroot/$c ]] || die "cgroup v1 controller $c is not mounted at $cgroot/$c; the test cluster confines" \
      "jobs with Slurm's cgroup/v1 plugin: boot with systemd.unified_cgroup_hierarchy=0, or mount it there"
    parent=$(cg_dir "$c")
    mkdir -p "$parent"
    # A new cpuset cgroup starts with no CPUs: give each level its parent's.
    [[ $c == cpuset ]] && copy_cpuset "$(dirname "$parent")" "$parent"
    for n in "${nodes[@]}"; do
      mkdir -p "$parent/$n"
      [[ $c == cpuset ]] && copy_cpuset "$parent" "$parent/$n"
    done
    echo "$parent" > "$base/run/cg-$c"
  done
}

copy_cpuset() {
  cat "$1/cpuset.cpus" > "$2/cpuset.cpus"
  cat "$1/cpuset.mems" > "$2/cpuset.mems"
}

# Runs inside the new namespaces (see enter): make them the node's, then exec the command.
inner() {
  local n=$1 c
  shift
  hostname "$n"
  mkdir -p "$base/tmp/$n" && chmod 1777 "$base/tmp/$n"
  mount --bind "$base/tmp/$n" /tmp
  mount --bind "$base/hosts" /etc/hosts
  # A fresh sysfs shows this namespace's interfaces only (/sys/class/net), as on a real node.
  mount -t sysfs sysfs /sys
  if [[ $n != "$ctl" ]]; then
    # The cgroup namespace is rooted at the node's cgroup: mounted again, it is the node's whole tree.
    mount -t tmpfs -o mode=755 cgroup_root "$cgroot"
    for c in "${controllers[@]}"; do
      mkdir -p "$cgroot/$c"
      mount -t cgroup -o "$c" cgroup "$cgroot/$c"
    done
  fi
  export SLURM_CONF=$conf
  exec "$@"
}

# Starts CMD as a new process of NODE: in the node's cgroups, its netns, and new UTS/mount/cgroup
# namespaces. `ip netns exec` would remount /sys and hide the cgroup tree, hence nsenter + unshare.
enter() {
  local n=$1 c
  shift
  if [[ $n == "$ctl" ]]; then
    exec nsenter --net="/run/netns/$n" unshare --uts --mount --propagation private "$self" __inner "$n" "$@"
  fi
  for c in "${controllers[@]}"; do echo $$ > "$(cg_dir "$c")/$n/cgroup.procs"; done
  exec nsenter --net="/run/netns/$n" unshare --uts --mount --cgroup --propagation private \
    "$self" __inner "$n" "$@"
}

# Runs CMD on a running NODE: in its cgroups and the namespaces its daemon lives in.
exec_on() {
  local n=$1 daemon c
  shift
  local namespaces=(--net --uts --mount)
  if [[ $n == "$ctl" ]]; then
    daemon=slurmctld
  else
    daemon=slurmd-$n
    namespaces+=(--cgroup)
  fi
  alive "$daemon" || die "$n is not running (cluster.sh start)"
  if [[ $n != "$ctl" ]]; then
    for c in "${controllers[@]}"; do echo $$ > "$(cg_dir "$c")/$n/cgroup.procs"; done
  fi
  # --root: the daemon's root, which in tests/platforms/debian13.sh is the trixie root, not the host's.
  exec nsenter -t "$(pid_of "$daemon")" "${namespaces[@]}" --root env SLURM_CONF="$conf" "$@"
}

wait_idle() {
  local state down tries=$((${#nodes[@]} > 15 ? ${#nodes[@]} * 10 : 150))
  for _ in $(seq "$tries"); do
    state=$(client sinfo -h -N -p debug -o '%N %t' 2>/dev/null || true)
    [[ $(grep -c ' idle$' <<<"$state" || true) -eq ${#nodes[@]} ]] && return 0
    # A node killed by a test comes back DOWN: it registered again, so it may run jobs.
    down=$(awk '$2 ~ /^(down|drain|drng|fail)$/ {print $1}' <<<"$state" | paste -sd, -)
    [[ -n $down ]] && client scontrol update nodename="$down" state=resume >/dev/null 2>&1 || true
    sleep 0.2
  done
  log "nodes not idle after $((tries / 5)) s:"; client sinfo -N >&2 || true; return 1
}

# Starts slurmd on NODE when it is not running, after clearing what a killed node left behind.
ensure_slurmd() {
  local n=$1
  alive "slurmd-$n" && return
  kill_node_processes "$n"
  remove_job_cgroups "$n"
  start_daemon "$n" slurmd -N "$n"
}

# Starts a daemon in NODE's namespaces (it forks into the background); on failure shows why and exits.
start_daemon() {
  local n=$1 out=$base/log/start-$1.log daemon_log=$base/log/slurmctld.log
  shift
  [[ $n == "$ctl" ]] || daemon_log=$base/log/slurmd-$n.log
  if ! setsid "$self" __enter "$n" "$@" </dev/null >>"$out" 2>&1; then
    log "$n: $* did not start:"
    cat "$out" >&2
    if [[ -f $daemon_log ]]; then tail -n 20 "$daemon_log" >&2; fi
    exit 1
  fi
}

start() {
  local want=$1 began=$EPOCHREALTIME
  command -v slurmctld >/dev/null || die "slurmctld missing (apt-get install slurm-wlm)"
  set_nodes "$want"
  write_config
  if ! alive slurmctld || ! cmp -s "$conf" "$conf.new"; then
    # A fresh controller (also after a change of configuration): no jobs, nodes or logs of an earlier run,
    # and none of the nodes the last start made.
    set_nodes "$(started_count)"
    down
    set_nodes "$want"
    rm -rf "$base"/{state,log,tmp}/* "$base"/spool/* "$base/shared/out"
    write_config
  fi
  mv "$conf.new" "$conf"
  echo "$want" > "$base/node-count"
  start_munge
  ensure_bridge
  for n in "$ctl" "${nodes[@]}"; do ensure_netns "$n"; done
  ensure_cgroups
  alive slurmctld || start_daemon "$ctl" slurmctld
  for n in "${nodes[@]}"; do ensure_slurmd "$n"; done
  wait_idle || { logs; exit 1; }
  log "up: $(client sinfo -h -o '%D nodes %t') after $(elapsed_since "$began") s; $(slurmd_memory)"
}

elapsed_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# The compute nodes' slurmd resident memory: the sum and the mean per node.
slurmd_memory() {
  local n pid kb total=0
  for n in "${nodes[@]}"; do
    pid=$(pid_of "slurmd-$n") || continue
    kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    total=$((total + kb))
  done
  echo "slurmd RSS $((total / 1024)) MB in all, $((total / 1024 / ${#nodes[@]})) MB per node"
}

# start's argument: --nodes N (default: as many as the last start made, so that bringing a killed node back
# keeps the cluster's size).
node_count_arg() {
  (($# == 0)) && { started_count; return; }
  [[ $1 == --nodes && $# == 2 && $2 =~ ^[1-9][0-9]*$ ]] && (($2 <= 200)) && { echo "$2"; return; }
  die "start takes --nodes N with N from 1 to 200 (got: $*); e.g. cluster.sh start --nodes 16"
}

# SIGKILL to every process in NODE's cgroups (all of them are in the freezer hierarchy's; thawed first:
# a frozen task cannot die).
kill_node_processes() {
  local n=$1 dir f pids
  dir=$(cg_dir freezer)/$n
  [[ -d $dir ]] || return 0
  find "$dir" -name freezer.state | while read -r f; do echo THAWED > "$f" 2>/dev/null || true; done
  for _ in $(seq 20); do
    pids=$(find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null | grep -vx "$$" || true)
    [[ -z $pids ]] && return 0
    kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  done
  log "$n: processes still alive after SIGKILL: $pids"
}

# The job cgroups a killed node's slurmd left: empty now, removed so a new slurmd starts clean.
remove_job_cgroups() {
  local n=$1 c dir
  for c in "${controllers[@]}"; do
    dir=$(cg_dir "$c")/$n
    [[ -d $dir ]] || continue
    find "$dir" -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

kill_node() {
  local n=$1
  [[ " ${nodes[*]} " == *" $n "* ]] || die "kill: $n is not a compute node (${nodes[*]})"
  # Link first: the other nodes see silence, as after a power loss, not connections being closed.
  ip link set "v-$n" down
  if alive "slurmd-$n"; then kill -KILL "$(pid_of "slurmd-$n")"; fi
  kill_node_processes "$n"
  rm -f "$base/run/slurmd-$n.pid"
  log "$n: link down, slurmd and its processes killed"
}

stop_daemons() {
  local d pids=() left
  for d in "${nodes[@]/#/slurmd-}" slurmctld; do
    if alive "$d"; then pids+=("$(pid_of "$d")"); kill -TERM "$(pid_of "$d")"; fi
  done
  for _ in $(seq 50); do
    left=()
    for d in "${pids[@]}"; do kill -0 "$d" 2>/dev/null && left+=("$d"); done
    ((${#left[@]} == 0)) && break
    sleep 0.1
  done
  ((${#left[@]} == 0)) || kill -KILL "${left[@]}" 2>/dev/null || true
  rm -f "$base"/run/*.pid
}

# Depth-first: a cgroup directory can only go once it has no children (and no processes).
remove_cgroups() {
  local c parent
  for c in "${controllers[@]}"; do
    parent=$(cg_dir "$c")
    if [[ -d $parent ]]; then find "$parent" -depth -type d -exec rmdir {} \; 2>/dev/null || true; fi
    if [[ -d $parent ]]; then log "cannot remove $parent"; continue; fi
    rm -f "$base/run/cg-$c"
  done
}

down() {
  local n
  mkdir -p "$base/run"
  stop_daemons
  for n in "${nodes[@]}"; do kill_node_processes "$n"; done
  for n in "$ctl" "${nodes[@]}"; do
    ip link del "v-$n" 2>/dev/null || true
    if [[ -e /run/netns/$n ]]; then ip netns del "$n"; fi
  done
  if ip link show "$bridge" >/dev/null 2>&1; then ip link del "$bridge"; fi
  remove_cgroups
}

logs() {
  local f
  for f in "$base"/log/*.log; do
    if [[ -f $f ]]; then echo "===== $f (last 60 lines)"; tail -n 60 "$f"; fi
  done
}

usage() { echo "usage: $0 start [--nodes N]|stop|down|status|logs|env|exec NODE CMD...|kill NODE" >&2; exit 2; }

case "${1:-}" in
  start) shift; count=$(node_count_arg "$@") || exit 2; start "$count" ;;
  stop | down) down ;;
  status) client sinfo -N ;;
  logs) logs ;;
  env) echo "export SLURM_CONF=$conf DLAUNCH_SLURM_BASE=$base DLAUNCH_SLURM_SHARED=$base/shared" ;;
  exec) (($# >= 3)) || usage; shift; exec_on "$@" ;;
  kill) (($# == 2)) || usage; kill_node "$2" ;;
  __enter) shift; enter "$@" ;;
  __inner) shift; inner "$@" ;;
  *) usage ;;
esac
