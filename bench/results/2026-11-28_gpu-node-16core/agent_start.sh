# What one agent's start costs on the GPU machine, with and without the health gate (NVML).
D=.gpu-bundle/dlaunch/bin/dlaunch
for mode in default --no-health-check; do
  extra=$([ $mode = default ] || echo $mode)
  s=$(date +%s%N)
  for i in $(seq 20); do $D --nproc-per-node 1 $extra --no-python /bin/true >/dev/null 2>&1 || echo fail; done
  e=$(date +%s%N); echo "$mode: $(( (e-s)/20000 )) us per run (20 runs, 1 x /bin/true)"
done
/usr/bin/time -v $D --nproc-per-node 1 --no-python /bin/true 2>&1 | grep -E "Maximum resident|Elapsed|User time|System time"
/usr/bin/time -v $D --nproc-per-node 1 --no-health-check --no-python /bin/true 2>&1 | grep -E "Maximum resident|Elapsed|User time|System time"
