#!/usr/bin/env bash
# What dlaunch-mpi adds to an mpirun launch: `mpirun -np N dlaunch-mpi --no-python /bin/true` against
# `mpirun -np N /bin/true`, N = 4, 8, 16 (oversubscribed on this machine), timed by hyperfine in one run.
# N = 32 and 64: Open MPI 4.1.4's own `mpirun -np 32 /bin/true` hangs now and then on this 2-core VM (1 run in 5,
# seen 2026-11-21), and -np 64 always, so they are left out.
# dlaunch-mpi's share per launch = the difference of the means; it covers process start, the topology
# (from the per-boot cache), the node-local fence that agrees on MASTER_ADDR/PORT (no PMIx client on one
# node), and exec. DLAUNCH_BENCH_TAG=x writes to results/mpi_overhead-DATE_x.
#   DLAUNCH_MPI=build/launcher/dlaunch-mpi bench/mpi_overhead.sh [RUNS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${DLAUNCH_MPI:-$here/../build/launcher/dlaunch-mpi}
runs=${1:-10}
out=$here/results/mpi_overhead-$(date +%F)${DLAUNCH_BENCH_TAG:+_$DLAUNCH_BENCH_TAG}
mkdir -p "$out"
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
for n in 4 8 16; do
  hyperfine --warmup 2 --runs "$runs" --export-json "$out/np$n.json" --export-markdown "$out/np$n.md" \
    -n "mpirun -np $n /bin/true" "${mpirun[*]} -np $n /bin/true" \
    -n "mpirun -np $n dlaunch-mpi /bin/true" "${mpirun[*]} -np $n $bin --no-python /bin/true"
done
python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
print("| N | mpirun /bin/true (ms) | mpirun dlaunch-mpi /bin/true (ms) | added (ms) | added (%) |")
print("|---|---|---|---|---|")
for n in (4, 8, 16):
    r = json.load(open(os.path.join(out, f"np{n}.json")))["results"]
    base, ours = r[0]["mean"] * 1000, r[1]["mean"] * 1000
    print(f"| {n} | {base:.0f} ± {r[0]['stddev']*1000:.0f} | {ours:.0f} ± {r[1]['stddev']*1000:.0f} | {ours-base:.0f} | {100*(ours-base)/base:.0f} % |")
PY
