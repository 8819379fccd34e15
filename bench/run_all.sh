#!/usr/bin/env bash
# Run every benchmark once, all results in one directory.
#
# Usage: bench/run_all.sh
#   DLAUNCH=/path/to/dlaunch   binary to measure (default: ../build/launcher/dlaunch from this script)
#   BENCH_OUT_DIR=DIR          where results go (default: bench/results/<date>_<time>)
#   Each script's own knobs (NPROC, MAX_RUNS, REPS_DLAUNCH, REPS, ...) pass through; see their headers.
#
# Takes about 6 minutes on a 2-core VM, most of it torchrun (about 6 s per launch, 11 s per restart
# run with its default 5 s monitor interval). Run it on a quiet machine, and run it twice: on a
# shared 2-core box other jobs move the numbers (see README.md).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export BENCH_OUT_DIR="${BENCH_OUT_DIR:-$here/results/$(date +%Y-%m-%d_%H%M%S)}"
mkdir -p "$BENCH_OUT_DIR"

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$BENCH_OUT_DIR/load.txt"
"$here/launch_overhead.sh"
echo "load after launch_overhead: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$BENCH_OUT_DIR/load.txt"
"$here/restart_latency.sh"
echo "load after restart_latency: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$BENCH_OUT_DIR/load.txt"
"$here/agent_memory.sh"
echo "load after agent_memory: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$BENCH_OUT_DIR/load.txt"
echo
echo "all results: $BENCH_OUT_DIR"
