#!/usr/bin/env bash
# What srun --dist-launch adds: `srun -N2 -n4 --dist-launch /bin/true` against `srun -N2 -n4 /bin/true`,
# timed by hyperfine in one run on the two-node test cluster (tests/slurm/cluster.sh), with the plugin
# staged and listed in its plugstack.conf (tests/slurm/stage.sh). Target: at most 10 % added. The third command
# runs each task under dlaunch-watch (hang-timeout=S: one more fork and exec per task, docs/hangs.md).
#   bench/spank_overhead.sh [BUILD_DIR] [RUNS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
runs=${2:-20}
base=${DLAUNCH_SLURM_BASE:-/var/lib/dlaunch-test-cluster}
out=$here/results/spank_overhead-$(date +%F)
mkdir -p "$out"
"$here/../tests/slurm/cluster.sh" start
"$here/../tests/slurm/stage.sh" "$build" "$base/shared/stage-bench" >/dev/null
export SLURM_CONF=$base/slurm.conf
hyperfine --warmup 3 --runs "$runs" --export-json "$out/spank.json" --export-markdown "$out/spank.md" \
  -n "srun -N2 -n4 /bin/true" "srun -N2 -n4 /bin/true" \
  -n "srun -N2 -n4 --dist-launch /bin/true" "srun -N2 -n4 --dist-launch /bin/true" \
  -n "srun -N2 -n4 --dist-launch=hang-timeout=60 /bin/true" "srun -N2 -n4 --dist-launch=hang-timeout=60 /bin/true"
python3 - "$out/spank.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
base = r[0]["mean"] * 1000
print(f"srun: {base:.1f} ms ± {r[0]['stddev']*1000:.1f}")
for name, res in (("--dist-launch", r[1]), ("--dist-launch=hang-timeout=60", r[2])):
    ours = res["mean"] * 1000
    print(f"with {name}: {ours:.1f} ms ± {res['stddev']*1000:.1f}; added {ours-base:.1f} ms ({100*(ours-base)/base:.1f} %)")
PY
