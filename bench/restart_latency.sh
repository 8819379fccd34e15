#!/usr/bin/env bash
# Restart latency: from a worker exiting non-zero to the whole group running again.
#
# Usage: bench/restart_latency.sh
#   DLAUNCH=/path/to/dlaunch   binary to measure (default: ../build/launcher/dlaunch from this script)
#   BENCH_OUT_DIR=DIR          where results go (default: bench/results/<date>_<time>)
#   NPROC=8                    workers per group
#   REPS_DLAUNCH=20            repetitions for dlaunch
#   REPS_TORCHRUN=5            repetitions for torchrun (about 11 s each with its defaults)
#   REPS_TORCHRUN_FAST=10      repetitions for torchrun --monitor_interval 0.1 (0 to skip)
#
# Method. Workers are bench/restart_worker.cpp (built here with g++; no shell in between). Each
# worker appends "start <CLOCK_MONOTONIC ns> <TORCHELASTIC_RESTART_COUNT> <LOCAL_RANK> <pid> <RANK>" to a
# log as its first action. On attempt 0, local rank 0 waits until all ranks have started, waits
# 100 ms more, appends "fail <ns>" and exits 1; the other ranks block in pause() and die at once on
# SIGTERM. With --max-restarts 1 the launcher stops the group and starts it again; on attempt 1
# every rank exits 0. For each repetition:
#     latency      = max(start ns over the ranks of attempt 1) - fail ns   (the whole group is back)
#     first rank   = min(start ns over the ranks of attempt 1) - fail ns
# The workers' own exec and dynamic-linker start-up is inside both numbers, as it would be for
# any real worker.
# Writes restart_<tool>.csv (one line per repetition) and restart_latency.md to the results dir.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

NPROC="${NPROC:-8}"
REPS_DLAUNCH="${REPS_DLAUNCH:-20}"
REPS_TORCHRUN="${REPS_TORCHRUN:-5}"
REPS_TORCHRUN_FAST="${REPS_TORCHRUN_FAST:-10}"

build_cpp "$BENCH_DIR/restart_worker.cpp" "$WORK/restart_worker"
WORKER="$WORK/restart_worker"
[[ -f "$OUT_DIR/machine.txt" ]] || write_machine_info "$OUT_DIR/machine.txt"
note "results in $OUT_DIR"

# one_rep TOOL REP: run the launcher once, append "rep,latency_ms,first_rank_ms,total_s" to the CSV.
one_rep() {
    local tool="$1" rep="$2" log="$WORK/$1.$2.log" out="$WORK/$1.$2.out" rc=0 t0 t1
    local -a cmd
    case "$tool" in
    # --restart-backoff 0: the mechanism's latency, as torchrun restarts at once (dlaunch waits 1 s by default).
    dlaunch) cmd=("$DL" --nproc-per-node "$NPROC" --max-restarts 1 --restart-backoff 0 --log-dir "$WORK/logs.$tool.$rep" --no-python "$WORKER") ;;
    torchrun) cmd=("${TORCHRUN[@]}" --nproc_per_node "$NPROC" --max_restarts 1 --no_python "$WORKER") ;;
    torchrun_fast) cmd=("${TORCHRUN[@]}" --nproc_per_node "$NPROC" --max_restarts 1 --monitor_interval 0.1 --no_python "$WORKER") ;;
    *) die "unknown tool $tool" ;;
    esac
    t0=$(date +%s%N)
    BENCH_LOG="$log" BENCH_NPROC="$NPROC" "${cmd[@]}" >"$out" 2>&1 || rc=$?
    t1=$(date +%s%N)
    if [[ $rc != 0 ]]; then
        cat "$out" >&2
        die "$tool repetition $rep: the launcher exited $rc (expected 0 after one restart)"
    fi
    awk -v n="$NPROC" -v rep="$rep" -v total="$(( (t1 - t0) / 1000000 ))" -v tool="$tool" '
        $1 == "fail" { fail = $2; nfail++ }
        $1 == "start" && $3 == 1 { s1++; if (max == "" || $2 > max) max = $2; if (min == "" || $2 < min) min = $2 }
        END {
            if (nfail != 1 || s1 != n) { printf "%s rep %d: expected 1 fail and %d restarted ranks, got %d and %d\n", tool, rep, n, nfail, s1 > "/dev/stderr"; exit 1 }
            printf "%d,%.3f,%.3f,%.3f\n", rep, (max - fail) / 1e6, (min - fail) / 1e6, total / 1e3
        }' "$log" >>"$WORK/restart_$tool.csv" || die "$tool repetition $rep: bad worker log $log"
}

# summarize TOOL LABEL: one markdown table row from the CSV (nearest-rank percentiles).
summarize() {
    local csv="$WORK/restart_$1.csv"
    [[ -s "$csv" ]] || return 0
    cp "$csv" "$OUT_DIR/restart_$1.csv"
    sed -i '1i rep,latency_ms,first_rank_ms,total_s' "$OUT_DIR/restart_$1.csv"
    local lat first
    lat="$(cut -d, -f2 "$csv" | sort -g | awk '{ v[NR] = $1 } END {
        i50 = int((NR + 1) / 2); i90 = int(0.9 * NR + 0.999999)
        med = (NR % 2) ? v[i50] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%d | %s | %s | %s | %s", NR, fmt(med), fmt(v[i90]), fmt(v[NR]), fmt(v[1]) }
        function fmt(x) { return x >= 1000 ? sprintf("%.2f s", x / 1000) : sprintf("%.1f ms", x) }')"
    first="$(cut -d, -f3 "$csv" | sort -g | awk '{ v[NR] = $1 } END {
        med = (NR % 2) ? v[int((NR + 1) / 2)] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%s", (med >= 1000 ? sprintf("%.2f s", med / 1000) : sprintf("%.1f ms", med)) }')"
    echo "| $2 | $lat | $first |" >>"$OUT_DIR/restart_latency.md"
}

for ((i = 1; i <= REPS_DLAUNCH; i++)); do one_rep dlaunch "$i"; done
note "dlaunch: $REPS_DLAUNCH repetitions done"
for ((i = 1; i <= REPS_TORCHRUN; i++)); do one_rep torchrun "$i"; done
note "torchrun: $REPS_TORCHRUN repetitions done"
for ((i = 1; i <= REPS_TORCHRUN_FAST; i++)); do one_rep torchrun_fast "$i"; done
note "torchrun --monitor_interval 0.1: $REPS_TORCHRUN_FAST repetitions done"

{
    echo "| launcher ($NPROC workers, --max-restarts 1) | runs | median | p90 | max | min | median to first rank |"
    echo "|---|---|---|---|---|---|---|"
} >"$OUT_DIR/restart_latency.md"
summarize dlaunch "dlaunch"
summarize torchrun "torchrun (patched, defaults)"
summarize torchrun_fast "torchrun (patched) --monitor_interval 0.1 (informational)"

echo
echo "== restart latency ($OUT_DIR/restart_latency.md)"
cat "$OUT_DIR/restart_latency.md"
med="$(cut -d, -f2 "$WORK/restart_dlaunch.csv" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[int((NR + 1) / 2)] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
awk -v m="$med" 'BEGIN { printf "\ndlaunch median restart latency %.1f ms; target <= 50 ms: %s\n", m, (m <= 50 ? "MET" : "MISSED") }'
