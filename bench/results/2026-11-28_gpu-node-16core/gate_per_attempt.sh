# The health gate's cost per attempt on a GPU node: one agent, a worker that always fails, 21 attempts.
D=.gpu-bundle/dlaunch/bin/dlaunch
for mode in default --no-health-check default --no-health-check; do
  extra=$([ $mode = default ] || echo $mode)
  s=$(date +%s%N)
  $D --nproc-per-node 1 --max-restarts 20 --restart-backoff 0 $extra --no-python /bin/false >/dev/null 2>&1
  rc=$?; e=$(date +%s%N); echo "$mode: exit $rc, $(( (e-s)/1000 )) us for 21 attempts of /bin/false"
done
