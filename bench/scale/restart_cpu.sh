#!/usr/bin/env bash
# What one group restart costs an agent in CPU, leader and member: two agents in torchrun's c10d form on this
# machine (127.0.0.1 and 127.0.1.1), one worker each that exits 1 at once (a static C program, so that the
# dynamic loader is not counted), --max-restarts N --restart-backoff 0: N+1 attempts, every one a group
# restart. Each agent runs under /usr/bin/time, whose user and system time include its children's (the
# worker and the guardian). A worker's exec and exit alone cost ~0.5 ms here: compare builds, not totals.
#   bench/scale/restart_cpu.sh DLAUNCH [N (default 300)]
# TMPDIR decides where the logs go (tmpfs: TMPDIR=/dev/shm).
set -euo pipefail
dlaunch=${1:?usage: restart_cpu.sh DLAUNCH [N]}
n=${2:-300}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf 'int main(void) { return 1; }\n' >"$dir/fail.c"
gcc -O2 -static -o "$dir/fail" "$dir/fail.c"
port=$((30000 + RANDOM % 1000))
export DLAUNCH_RDZV_SECRET=restart-cpu-bench-secret
common=(--nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" --rdzv-id restart-cpu
        --max-restarts "$n" --restart-backoff 0 --log-dir "$dir/logs" --no-python "$dir/fail")
start=$(date +%s%N)
/usr/bin/time -f "leader %U %S" -o "$dir/leader" "$dlaunch" --local-addr 127.0.0.1 "${common[@]}" 2>/dev/null &
sleep 0.2
/usr/bin/time -f "member %U %S" -o "$dir/member" "$dlaunch" --local-addr 127.0.1.1 "${common[@]}" 2>/dev/null || true
wait || true
wall_ms=$((($(date +%s%N) - start) / 1000000))
grep -hv '^Command' "$dir/leader" "$dir/member" | awk -v n="$n" -v wall="$wall_ms" '{
    printf "%s: %4.0f us of CPU per attempt (user %4.0f, system %4.0f); %d attempts in %d ms\n",
           $1, ($2 + $3) * 1e6 / (n + 1), $2 * 1e6 / (n + 1), $3 * 1e6 / (n + 1), n + 1, wall }'
