#!/usr/bin/env bash
# Agent peak memory: peak resident set size of the launcher process itself (not its workers).
#
# Usage: bench/agent_memory.sh
#   DLAUNCH=/path/to/dlaunch   binary to measure (default: ../build/launcher/dlaunch from this script)
#   BENCH_OUT_DIR=DIR          where results go (default: bench/results/<date>_<time>)
#   NPROC=8                    workers per launch
#   REPS=5                     repetitions per launcher and workload
#
# Two methods, both per launcher, each repeated REPS times:
#
#  A. VmHWM sampling (the headline number). Workers are `sleep 1`. The launcher is started in the
#     background and /proc/<its pid>/status is read every 10 ms until it exits; VmHWM ("peak RSS"
#     as the kernel keeps it for that one process) never decreases, so the last value read is the
#     peak up to ~10 ms before exit. This is exactly the agent: for dlaunch the dlaunch process,
#     for mpirun the mpirun process (Open MPI 4.1 on one node forks the ranks itself; no orted),
#     for torchrun the Python process running torch.distributed.run. Also kept: the largest
#     RssAnon seen (private memory; the rest of RSS is mostly shared-library pages) and the
#     largest thread count seen. Caveat: growth in the last ~10 ms before exit is missed; Python
#     grows by ~7 MB while it shuts down, so for torchrun B below is the truer peak.
#
#  B. GNU time (cross-check). `/usr/bin/time -f %M LAUNCHER ... 8x /bin/true` and `... 8x sleep 1`.
#     %M is ru_maxrss from wait4() on the launcher: the largest peak RSS of any single process
#     among the launcher and the descendants it reaped -- not a sum. It equals the agent's own peak
#     only while every worker is smaller than the agent, which holds for /bin/true and sleep
#     (about 1-2 MB each) against launchers of several MB.
#
# Writes agent_memory.csv (one line per measurement) and agent_memory.md to the results dir.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

NPROC="${NPROC:-8}"
REPS="${REPS:-5}"
[[ -x /usr/bin/time ]] || die "GNU time is needed at /usr/bin/time (apt-get install -y time)"
[[ -f "$OUT_DIR/machine.txt" ]] || write_machine_info "$OUT_DIR/machine.txt"
note "results in $OUT_DIR"

# launcher_cmd TOOL WORKER...: the command line for one launch.
launcher_cmd() {
    local tool="$1"
    shift
    case "$tool" in
    dlaunch) CMD=("$DL" --nproc-per-node "$NPROC" --no-python "$@") ;;
    mpirun) CMD=(mpirun --allow-run-as-root --oversubscribe -np "$NPROC" "$@") ;;
    torchrun) CMD=("${TORCHRUN[@]}" --nproc_per_node "$NPROC" --no_python "$@") ;;
    *) die "unknown tool $tool" ;;
    esac
}

# sample TOOL: method A once; sets PEAK_KB, ANON_KB (largest RssAnon seen), THREADS, SAMPLES.
sample() {
    launcher_cmd "$1" /bin/sleep 1
    "${CMD[@]}" >/dev/null 2>"$WORK/sample.err" &
    local pid=$! hwm=0 anon=0 threads=0 n=0 status
    while [[ -r /proc/$pid/status ]]; do
        # One read of the whole file: reading it line by line makes bash seek back after each
        # line, and every seek regenerates /proc/PID/status, so lines can shift or be lost while
        # the values change (seen once in 15 torchrun runs before this was fixed).
        status=""
        IFS= read -r -d '' status </proc/$pid/status 2>/dev/null || true
        [[ $status =~ State:[[:space:]]*Z ]] && break # a zombie: its memory is gone, the last sample stands
        if [[ $status =~ VmHWM:[[:space:]]*([0-9]+) ]]; then
            ((BASH_REMATCH[1] > hwm)) && hwm=${BASH_REMATCH[1]}
            n=$((n + 1))
        fi
        if [[ $status =~ RssAnon:[[:space:]]*([0-9]+) ]]; then
            ((BASH_REMATCH[1] > anon)) && anon=${BASH_REMATCH[1]}
        fi
        if [[ $status =~ Threads:[[:space:]]*([0-9]+) ]]; then
            ((BASH_REMATCH[1] > threads)) && threads=${BASH_REMATCH[1]}
        fi
        sleep 0.01
    done
    local rc=0
    wait "$pid" || rc=$?
    if [[ $rc != 0 ]]; then
        cat "$WORK/sample.err" >&2
        die "$1 exited $rc"
    fi
    PEAK_KB=$hwm ANON_KB=$anon THREADS=$threads SAMPLES=$n
}

# gnu_time TOOL WORKER...: method B once; sets MAXRSS_KB.
gnu_time() {
    local tool="$1"
    shift
    launcher_cmd "$tool" "$@"
    /usr/bin/time -f %M -o "$WORK/time.out" "${CMD[@]}" >/dev/null 2>"$WORK/time.err" || {
        cat "$WORK/time.err" >&2
        die "$tool $* failed"
    }
    MAXRSS_KB="$(tail -n 1 "$WORK/time.out")"
}

CSV="$OUT_DIR/agent_memory.csv"
echo "tool,method,workers,rep,peak_kb,anon_kb,threads,samples" >"$CSV"
TOOLS=(dlaunch mpirun torchrun)
for ((r = 1; r <= REPS; r++)); do
    # Interleave the tools so that a change in machine load hits all of them alike.
    for tool in "${TOOLS[@]}"; do
        sample "$tool"
        echo "$tool,vmhwm,sleep 1,$r,$PEAK_KB,$ANON_KB,$THREADS,$SAMPLES" >>"$CSV"
        gnu_time "$tool" /bin/sleep 1
        echo "$tool,gnu-time,sleep 1,$r,$MAXRSS_KB,,," >>"$CSV"
        gnu_time "$tool" /bin/true
        echo "$tool,gnu-time,/bin/true,$r,$MAXRSS_KB,,," >>"$CSV"
    done
    note "repetition $r of $REPS done"
done

# Median over the repetitions, in MiB, per tool and method.
"$PY" - "$CSV" "$OUT_DIR/agent_memory.md" "$NPROC" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
nproc = sys.argv[3]
def med(tool, method, workers, field="peak_kb"):
    v = [int(r[field]) for r in rows if r["tool"] == tool and r["method"] == method and r["workers"] == workers and r[field]]
    return statistics.median(v), min(v), max(v), len(v)
names = {"dlaunch": "dlaunch", "mpirun": "mpirun (Open MPI)", "torchrun": "torchrun (patched)"}
out = [f"| launcher ({nproc} workers) | A: VmHWM of the agent, sleep 1 (median [min-max]) | of which anonymous (max RssAnon seen) | threads | "
       f"B: GNU time %M, sleep 1 | B: GNU time %M, /bin/true | runs |", "|---|---|---|---|---|---|---|"]
fmt = lambda m: f"{m[0]/1024:.1f} MiB [{m[1]/1024:.1f}-{m[2]/1024:.1f}]"
for t in ("dlaunch", "mpirun", "torchrun"):
    a = med(t, "vmhwm", "sleep 1"); th = med(t, "vmhwm", "sleep 1", "threads"); an = med(t, "vmhwm", "sleep 1", "anon_kb")
    b1 = med(t, "gnu-time", "sleep 1"); b2 = med(t, "gnu-time", "/bin/true")
    out.append(f"| {names[t]} | {fmt(a)} | {an[0]/1024:.1f} MiB | {th[0]:g} | {fmt(b1)} | {fmt(b2)} | {a[3]} |")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
d, m = med("dlaunch", "vmhwm", "sleep 1")[0], med("mpirun", "vmhwm", "sleep 1")[0]
print(f"\ndlaunch {d/1024:.1f} MiB vs mpirun {m/1024:.1f} MiB (VmHWM medians): target dlaunch below mpirun: "
      f"{'MET' if d < m else 'MISSED'} ({d/m:.2f}x)")
EOF
