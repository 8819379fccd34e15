#!/usr/bin/env bash
# Agents per node (`srun --ntasks-per-node=1 dlaunch …`) on 8 … 64 Slurm nodes of the test cluster: group
# restart after a rank's crash, and a killed node found and the group going on without it, by
# bench/group_restart.py on a cluster of each size (tests/slurm/cluster.sh start --nodes N), with the
# installed packages' dlaunch (tests/slurm/stage.sh --installed). Output: bench/results/DATE_slurm-group/
# (or $BENCH_OUT).
#   bench/scale/slurm_group.sh BUILD_DIR [NODES (default 8,16,32,64)] [REPS (default 3)] [NPROC (default 1)]
#                              [KINDS (default crash,lost; or requeue)]
# requeue: a job of N-1 nodes with --requeue whose second node is killed; the group requeues it without that
# node and Slurm starts it again on the N-1 nodes left. Its slurmctld RPCs over the REPS jobs (sdiag, reset
# before them) go to rpcs-requeue-N.txt: those the bench makes itself (scontrol show job, sinfo) included.
# Leaves the cluster at three nodes, as the tests want it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: slurm_group.sh BUILD_DIR [NODES] [REPS] [NPROC]}
IFS=, read -ra counts <<<"${2:-8,16,32,64}"
reps=${3:-3}
nproc=${4:-1}
kinds=${5:-crash,lost}
out=${BENCH_OUT:-$here/../results/$(date +%F)_slurm-group}
mkdir -p "$out"
: > "$out/summary.txt"
source "$here/slurm_common.sh"
for n in "${counts[@]}"; do
  cluster_of "$n" "$build" "$out/summary.txt"
  sdiag -r >/dev/null
  /usr/bin/python3 "$here/../group_restart.py" "$stage" --reps "$reps" --kinds "$kinds" \
    --nproc "$nproc" --heartbeat-timeout 5 2>&1 | sed "s/^/N=$n /" | tee -a "$out/summary.txt"
  if [[ $kinds == requeue ]]; then
    rpc_counts > "$out/rpcs-requeue-$n.txt"
    echo "N=$n requeue: over $reps job(s): $(grep -E 'REQUEST_JOB_REQUEUE|REQUEST_UPDATE_JOB' \
      "$out/rpcs-requeue-$n.txt" | tr '\n' ' ')" | tee -a "$out/summary.txt"
  fi
done
