#!/usr/bin/env bash
# srun --dist-launch on 8 … 64 Slurm nodes of the test cluster (tests/slurm/cluster.sh start --nodes N), with
# the installed packages' plugin (tests/slurm/stage.sh --installed). Per N:
#   start  `srun -N N -n N --dist-launch /bin/true` against `srun -N N -n N /bin/true`, both as steps of one
#          allocation (salloc, --overlap), timed by hyperfine: what the plugin adds to a step's start and end
#   rpcs   slurmctld's RPCs by type (sdiag, reset before each job) for a batch job whose one step is
#          `srun --dist-launch=requeue /bin/true` against one whose step is plain `srun /bin/true`: what the
#          plugin asks slurmctld, per job, as N grows (requeue is the mode that asks)
# Results go to bench/results/DATE_slurm-nodes/ or $BENCH_OUT (hyperfine JSON, RPC counts, summary.txt).
#   bench/scale/slurm_nodes.sh BUILD_DIR [NODES (default 8,16,32,64)] [RUNS (default 5)]
# Needs root and the installed dlaunch packages; leaves the cluster at three nodes, as the tests want it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/../../tests/slurm/cluster.sh
build=${1:?usage: slurm_nodes.sh BUILD_DIR [NODES] [RUNS]}
IFS=, read -ra counts <<<"${2:-8,16,32,64}"
runs=${3:-5}
out=${BENCH_OUT:-$here/../results/$(date +%F)_slurm-nodes}
mkdir -p "$out"
eval "$("$cluster" env)"
# However it ends, the cluster goes back to the tests' three nodes.
trap '"$cluster" start --nodes 3 >/dev/null 2>&1' EXIT
summary=$out/summary.txt
: > "$summary"

# RPC counts by message type, from sdiag, as "TYPE COUNT" lines.
rpc_counts() { sdiag | awk '/by message type/ {on=1; next} /by user/ {on=0} on && match($0, /count:[0-9]+/) {
  print $1, substr($0, RSTART + 6, RLENGTH - 6) }'; }

# One batch job of N nodes whose step is STEP...; the RPCs slurmctld served from its submission until its
# nodes are idle again, less the nodes' registrations (periodic, not the job's) and this script's own
# questions (sdiag; sinfo while it waits). It waits for a file the job writes, not with `sbatch --wait`,
# which asks slurmctld about the job every few seconds.
job_rpcs() {
  local n=$1 name=$2 done_file=$DLAUNCH_SLURM_SHARED/bench-rpcs-done
  shift 2
  rm -f "$done_file"
  sdiag -r >/dev/null
  # From the shared directory: requeue's ledger goes to the submission directory's dlaunch-logs/.
  (cd "$DLAUNCH_SLURM_SHARED" && sbatch -N "$n" -n "$n" --output /dev/null --wrap "$*; touch $done_file" >/dev/null)
  local deadline=$((SECONDS + 300))
  while [[ ! -e $done_file ]]; do ((SECONDS < deadline)) || { echo "job of $n nodes: no end in 300 s" >&2; exit 1; }; sleep 0.2; done
  until [[ $(sinfo -h -p debug -t idle -o %D) == "$n" ]]; do
    ((SECONDS < deadline)) || { echo "$n nodes: not idle 300 s after the job" >&2; exit 1; }
    sleep 0.2
  done
  rpc_counts | grep -vE 'NODE_REGISTRATION|STATS_INFO|NODE_INFO|PARTITION_INFO' > "$out/rpcs-$name-$n.txt"
}

for n in "${counts[@]}"; do
  "$cluster" start --nodes "$n" 2>&1 | tail -n 1 | tee -a "$summary"
  "$here/../../tests/slurm/stage.sh" --installed "$build" "$DLAUNCH_SLURM_SHARED/stage-bench" >/dev/null
  # --overlap: a step asked for while the last one still completes on some node is "temporarily disabled",
  # and Slurm 22.05's srun then waited minutes for the word that it may go on (seen here at 16 nodes).
  salloc -N "$n" -n "$n" --quiet hyperfine --warmup 1 --runs "$runs" --export-json "$out/start-$n.json" \
    -n plain "srun --overlap -N $n -n $n /bin/true" \
    -n dist-launch "srun --overlap -N $n -n $n --dist-launch /bin/true" >/dev/null
  job_rpcs "$n" plain srun /bin/true
  job_rpcs "$n" requeue srun --dist-launch=requeue /bin/true
  python3 - "$n" "$out" >>"$summary" <<'PY'
import json, sys
n, out = sys.argv[1], sys.argv[2]
r = {x["command"]: x for x in json.load(open(f"{out}/start-{n}.json"))["results"]}
plain, ours = r["plain"]["mean"] * 1000, r["dist-launch"]["mean"] * 1000
def counts(name):
    return {t: int(c) for t, c in (l.split() for l in open(f"{out}/rpcs-{name}-{n}.txt"))}
p, q = counts("plain"), counts("requeue")
extra = {t: q.get(t, 0) - p.get(t, 0) for t in set(p) | set(q) if q.get(t, 0) != p.get(t, 0)}
print(f"N={n}: step start plain {plain:.0f} ms ± {r['plain']['stddev']*1000:.0f}, --dist-launch {ours:.0f} ms "
      f"± {r['dist-launch']['stddev']*1000:.0f} ({ours/plain:.2f}x); slurmctld RPCs per job plain "
      f"{sum(p.values())}, --dist-launch=requeue {sum(q.values())}; differing: {extra or 'none'}")
PY
  tail -n 1 "$summary"
done
