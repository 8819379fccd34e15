#!/usr/bin/env bash
# srun --dist-launch on 8 … 64 Slurm nodes of the test cluster (tests/slurm/cluster.sh start --nodes N), with
# the installed packages' plugin (tests/slurm/stage.sh --installed). Per N:
#   start  `srun -N N -n N --dist-launch /bin/true` against `srun -N N -n N /bin/true`, both as steps of one
#          allocation (salloc, --overlap), timed by hyperfine: what the plugin adds to a step's start and end
#          (and again in alternating pairs, step_pairs.py: the ratio to read, a drift falling on both alike);
#          and agents per node, `srun -N N --ntasks-per-node=1 dlaunch --max-restarts 1 --nproc-per-node 1
#          --no-python /bin/true` (their group meets over MUNGE-authenticated connections before the worker runs)
#   rpcs   slurmctld's RPCs by type (sdiag, reset before each job) for a batch job whose one step is
#          `srun --dist-launch=requeue /bin/true` against one whose step is plain `srun /bin/true`: what the
#          plugin asks slurmctld, per job, as N grows (requeue is the mode that asks)
# Results go to bench/results/DATE_slurm-nodes/ or $BENCH_OUT (hyperfine JSON, RPC counts, summary.txt).
#   bench/scale/slurm_nodes.sh BUILD_DIR [NODES (default 8,16,32,64)] [RUNS (default 5)]
# Needs root and the installed dlaunch packages; leaves the cluster at three nodes, as the tests want it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: slurm_nodes.sh BUILD_DIR [NODES] [RUNS]}
IFS=, read -ra counts <<<"${2:-8,16,32,64}"
runs=${3:-5}
out=${BENCH_OUT:-$here/../results/$(date +%F)_slurm-nodes}
mkdir -p "$out"
summary=$out/summary.txt
: > "$summary"
source "$here/slurm_common.sh"

for n in "${counts[@]}"; do
  cluster_of "$n" "$build" "$summary"
  # --overlap: a step asked for while the last one still completes on some node is "temporarily disabled",
  # and Slurm 22.05's srun then waited minutes for the word that it may go on (seen here at 16 nodes).
  salloc -N "$n" -n "$n" --quiet hyperfine --warmup 1 --runs "$runs" --export-json "$out/start-$n.json" \
    -n plain "srun --overlap -N $n -n $n /bin/true" \
    -n dist-launch "srun --overlap -N $n -n $n --dist-launch /bin/true" \
    -n agents "srun --overlap -N $n --ntasks-per-node=1 $stage/dlaunch --max-restarts 1 --nproc-per-node 1 --no-python /bin/true" \
    >/dev/null
  job_rpcs "$n" plain srun /bin/true
  job_rpcs "$n" requeue srun --dist-launch=requeue /bin/true
  python3 - "$n" "$out" >>"$summary" <<'PY'
import json, sys
n, out = sys.argv[1], sys.argv[2]
r = {x["command"]: x for x in json.load(open(f"{out}/start-{n}.json"))["results"]}
plain, ours, agents = (r[k]["mean"] * 1000 for k in ("plain", "dist-launch", "agents"))
def counts(name):
    return {t: int(c) for t, c in (l.split() for l in open(f"{out}/rpcs-{name}-{n}.txt"))}
p, q = counts("plain"), counts("requeue")
extra = {t: q.get(t, 0) - p.get(t, 0) for t in set(p) | set(q) if q.get(t, 0) != p.get(t, 0)}
print(f"N={n}: step start plain {plain:.0f} ms ± {(r['plain']['stddev'] or 0) * 1000:.0f}, --dist-launch {ours:.0f} ms "
      f"± {(r['dist-launch']['stddev'] or 0) * 1000:.0f} ({ours/plain:.2f}x); slurmctld RPCs per job plain "
      f"{sum(p.values())}, --dist-launch=requeue {sum(q.values())}; differing: {extra or 'none'}; agents per node "
      f"{agents:.0f} ms ± {(r['agents']['stddev'] or 0) * 1000:.0f} ({agents/plain:.2f}x)")
PY
  tail -n 1 "$summary"
  # The plugin's share again, the two steps in alternating pairs (hyperfine's batches put a drift on one side).
  salloc -N "$n" -n "$n" --quiet python3 "$here/step_pairs.py" "$n" "$runs" | tee -a "$summary"
done
