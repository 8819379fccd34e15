#!/usr/bin/env bash
# Launch overhead: wall time to start 8 workers that do nothing (/bin/true) and see them all exit.
#
# Usage: bench/launch_overhead.sh
#   DLAUNCH=/path/to/dlaunch   binary to measure (default: ../build/launcher/dlaunch from this script)
#   BENCH_OUT_DIR=DIR          where results go (default: bench/results/<date>_<time>)
#   NPROC=8                    workers per launch
#   MAX_RUNS=300 MIN_RUNS=10   hyperfine run counts (fast commands run up to MAX_RUNS within
#                              hyperfine's ~3 s budget per command; torchrun gets MIN_RUNS)
#   WARMUP=3                   hyperfine warmup runs per command
#   BREAKDOWN=1                also time the parts of dlaunch's start-up (0 to skip)
#
# Compared in one hyperfine invocation, so under the same machine load:
#   floor      bench/forkexec_floor.cpp: fork+exec 8 /bin/true, wait for all (built here with g++)
#   dlaunch    dlaunch --nproc-per-node 8 --no-python /bin/true
#   mpirun     mpirun --allow-run-as-root --oversubscribe -np 8 /bin/true
#   torchrun   /usr/bin/python3 bench/torchrun_patched.py --nproc_per_node 8 --no_python /bin/true
#   torchrun (monitor 0.1 s)  the same with --monitor_interval 0.1 (informational: most of
#              torchrun's default time is its 5 s monitor interval, not its start-up)
# Writes launch_overhead.{json,md} (and launch_breakdown.{json,md}) and machine.txt to the results dir.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

NPROC="${NPROC:-8}"
MAX_RUNS="${MAX_RUNS:-300}"
MIN_RUNS="${MIN_RUNS:-10}"
WARMUP="${WARMUP:-3}"
BREAKDOWN="${BREAKDOWN:-1}"

command -v hyperfine >/dev/null || die "hyperfine is needed (apt-get install -y hyperfine)"
command -v mpirun >/dev/null || die "mpirun is needed (apt-get install -y openmpi-bin)"

build_cpp "$BENCH_DIR/forkexec_floor.cpp" "$WORK/forkexec_floor"
FLOOR="$WORK/forkexec_floor"

# Every command must succeed before it is timed (a launcher that fails fast would look fast).
"$FLOOR" "$NPROC" /bin/true || die "floor program failed"
"$DL" -q --nproc-per-node "$NPROC" --no-python /bin/true || die "dlaunch failed on /bin/true"
mpirun --allow-run-as-root --oversubscribe -np "$NPROC" /bin/true || die "mpirun failed on /bin/true"
"$PY" "$BENCH_DIR/torchrun_patched.py" --self-check >/dev/null || die "torchrun_patched.py self-check failed"
"${TORCHRUN[@]}" --nproc_per_node "$NPROC" --monitor_interval 0.1 --no_python /bin/true 2>/dev/null ||
    die "torchrun (patched) failed on /bin/true"

write_machine_info "$OUT_DIR/machine.txt"
note "results in $OUT_DIR"

hyperfine -N --style basic --warmup "$WARMUP" --min-runs "$MIN_RUNS" --max-runs "$MAX_RUNS" \
    --export-json "$OUT_DIR/launch_overhead.json" --export-markdown "$OUT_DIR/launch_overhead.md" \
    -n "floor: fork+exec ${NPROC}x /bin/true" "$FLOOR $NPROC /bin/true" \
    -n "dlaunch --nproc-per-node $NPROC --no-python /bin/true" "$DL --nproc-per-node $NPROC --no-python /bin/true" \
    -n "mpirun --oversubscribe -np $NPROC /bin/true" "mpirun --allow-run-as-root --oversubscribe -np $NPROC /bin/true" \
    -n "torchrun --nproc_per_node $NPROC --no_python /bin/true" \
    "$PY $BENCH_DIR/torchrun_patched.py --nproc_per_node $NPROC --no_python /bin/true" \
    -n "torchrun ... --monitor_interval 0.1 (informational)" \
    "$PY $BENCH_DIR/torchrun_patched.py --nproc_per_node $NPROC --monitor_interval 0.1 --no_python /bin/true"

if [[ "$BREAKDOWN" == 1 ]]; then
    # Where dlaunch's time goes: process start-up alone (--version), start-up + planning (hwloc
    # topology discovery, free-port reservation, no workers), and both again with hwloc's I/O
    # (PCI) discovery turned off through hwloc's own HWLOC_COMPONENTS variable.
    hyperfine -N --style basic --warmup "$WARMUP" --min-runs "$MIN_RUNS" --max-runs "$MAX_RUNS" \
        --export-json "$OUT_DIR/launch_breakdown.json" --export-markdown "$OUT_DIR/launch_breakdown.md" \
        -n "floor: fork+exec ${NPROC}x /bin/true" "$FLOOR $NPROC /bin/true" \
        -n "dlaunch --version" "$DL --version" \
        -n "dlaunch plan (no workers)" "$DL plan --nproc-per-node $NPROC --no-python /bin/true" \
        -n "dlaunch plan, HWLOC_COMPONENTS=-linuxio,-pci" \
        "env HWLOC_COMPONENTS=-linuxio,-pci $DL plan --nproc-per-node $NPROC --no-python /bin/true" \
        -n "dlaunch run" "$DL --nproc-per-node $NPROC --no-python /bin/true" \
        -n "dlaunch run, HWLOC_COMPONENTS=-linuxio,-pci" \
        "env HWLOC_COMPONENTS=-linuxio,-pci $DL --nproc-per-node $NPROC --no-python /bin/true"
fi

echo
echo "== launch overhead ($OUT_DIR/launch_overhead.md)"
cat "$OUT_DIR/launch_overhead.md"
if [[ "$BREAKDOWN" == 1 ]]; then
    echo
    echo "== dlaunch start-up breakdown ($OUT_DIR/launch_breakdown.md)"
    cat "$OUT_DIR/launch_breakdown.md"
fi
# The target: dlaunch within 2x the floor (means, same run).
"$PY" - "$OUT_DIR/launch_overhead.json" <<'EOF'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
floor = next(v for k, v in r.items() if k.startswith("floor"))
dl = next(v for k, v in r.items() if k.startswith("dlaunch"))
ratio = dl["mean"] / floor["mean"]
print(f"\ndlaunch / floor = {ratio:.2f}x (means {dl['mean']*1e3:.1f} ms / {floor['mean']*1e3:.1f} ms; "
      f"medians {dl['median']*1e3:.1f} / {floor['median']*1e3:.1f} ms); target <= 2x: "
      f"{'MET' if ratio <= 2 else 'MISSED'}")
EOF
