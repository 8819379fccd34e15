#!/usr/bin/env bash
# What one group restart costs an agent in CPU, leader and member: two agents in torchrun's c10d form on this
# machine (127.0.0.1 and 127.0.1.1), one worker each that exits 1 at once (a static C program, so that the
# dynamic loader is not counted), --max-restarts N --restart-backoff 0: N+1 attempts, every one a group
# restart. Each agent runs under /usr/bin/time, whose user and system time include its children's (the
# worker and the guardian). A worker's exec and exit alone cost ~0.5 ms here: compare builds, not totals.
# With `stopped` the leader's worker fails after 20 ms and the member's runs until the group stops it: the
# member's CPU is then a group restart's on every member but the one that failed (the 1,024-agent bench's).
# TMPDIR decides where the logs go (tmpfs: TMPDIR=/dev/shm).
#   bench/scale/restart_cpu.sh DLAUNCH [N (default 300)] [failed|stopped (default failed)]
set -euo pipefail
dlaunch=${1:?usage: restart_cpu.sh DLAUNCH [N] [failed|stopped]}
n=${2:-300}
mode=${3:-failed}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
case $mode in
failed) printf 'int main(void) { return 1; }\n' >"$dir/fail.c" ;;
stopped) printf '%s\n' '#include <stdlib.h>' '#include <string.h>' '#include <unistd.h>' \
    'int main(void) { const char* r = getenv("RANK"); if (r && !strcmp(r, "0")) { usleep(20000); return 1; }' \
    '  sleep(60); return 0; }' >"$dir/fail.c" ;;
*) echo "restart_cpu.sh: the third argument is failed or stopped, not $mode" >&2; exit 2 ;;
esac
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
