#!/usr/bin/env bash
# `dlaunch doctor` on every node of 8 … 64 Slurm nodes of the test cluster (tests/slurm/cluster.sh start
# --nodes N), with the installed packages' dlaunch (tests/slurm/stage.sh --installed). Per N:
#   time   `srun -N N --ntasks-per-node=1 dlaunch doctor` (node 0 gathers every node's report) against
#          `srun -N N --ntasks-per-node=1 /bin/true`, both steps of one allocation (salloc, --overlap), timed
#          by hyperfine. PYTHON_EXEC is a stub that answers the python check at once: the torch import
#          (seconds per node, in parallel on real nodes) would be all these nodes' two cores measure.
#   rpcs   slurmctld's RPCs (sdiag) for a batch job whose step is the doctor on every node, against a plain
#          `srun /bin/true` job (bench/scale/slurm_common.sh)
# Results go to bench/results/DATE_slurm-doctor/ or $BENCH_OUT (hyperfine JSON, RPC counts, summary.txt).
#   bench/scale/slurm_doctor.sh BUILD_DIR [NODES (default 8,16,32,64)] [RUNS (default 3)]
# Needs root and the installed dlaunch packages; leaves the cluster at three nodes, as the tests want it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: slurm_doctor.sh BUILD_DIR [NODES] [RUNS]}
IFS=, read -ra counts <<<"${2:-8,16,32,64}"
runs=${3:-3}
out=${BENCH_OUT:-$here/../results/$(date +%F)_slurm-doctor}
mkdir -p "$out"
summary=$out/summary.txt
: > "$summary"
source "$here/slurm_common.sh"
stub=$DLAUNCH_SLURM_SHARED/python-stub
logs=$DLAUNCH_SLURM_SHARED/doctor-logs
doctor="env PYTHON_EXEC=$stub $stage/dlaunch doctor --log-dir $logs"
for n in "${counts[@]}"; do
  cluster_of "$n" "$build" "$summary"
  printf '#!/bin/sh\necho DLAUNCH_PY=3.11.2\necho DLAUNCH_TORCH=stub\n' > "$stub"
  chmod 755 "$stub"
  mkdir -p "$logs" && chmod 777 "$logs"
  # Every command must succeed before it is timed: a doctor that fails fast would look fast.
  salloc -N "$n" --quiet srun -N "$n" --ntasks-per-node=1 $doctor > "$out/doctor-$n.txt" 2>&1 ||
    { echo "N=$n: the doctor on every node did not pass (see $out/doctor-$n.txt)" | tee -a "$summary"; exit 1; }
  salloc -N "$n" --quiet hyperfine --warmup 1 --runs "$runs" --export-json "$out/time-$n.json" \
    -n plain "srun --overlap -N $n --ntasks-per-node=1 /bin/true" \
    -n doctor "srun --overlap -N $n --ntasks-per-node=1 $doctor" >/dev/null
  job_rpcs "$n" plain srun --ntasks-per-node=1 /bin/true
  job_rpcs "$n" doctor srun --ntasks-per-node=1 $doctor
  python3 - "$n" "$out" "$(job_rpc_total plain "$n")" "$(job_rpc_total doctor "$n")" >>"$summary" <<'PY'
import json, sys
n, out, rpcs_plain, rpcs_doctor = sys.argv[1:]
r = {x["command"]: x for x in json.load(open(f"{out}/time-{n}.json"))["results"]}
plain, doctor = r["plain"]["mean"] * 1000, r["doctor"]["mean"] * 1000
print(f"N={n}: doctor on every node {doctor:.0f} ms ± {(r['doctor']['stddev'] or 0) * 1000:.0f}, a plain step "
      f"{plain:.0f} ms ± {(r['plain']['stddev'] or 0) * 1000:.0f}; slurmctld RPCs per job (the nodes' epilog "
      f"messages aside) plain {rpcs_plain}, doctor {rpcs_doctor}")
PY
  tail -n 1 "$summary"
done
