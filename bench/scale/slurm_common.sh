# What the Slurm scale benchmarks share (bench/scale/slurm_nodes.sh, slurm_group.sh, slurm_doctor.sh): the
# test cluster's environment, its return to the tests' three nodes however the script ends, a cluster of N
# nodes with the installed packages staged, and slurmctld's RPCs for one batch job. Sourced after $out (where
# results go) is set.
cluster=$here/../../tests/slurm/cluster.sh
eval "$("$cluster" env)"
trap '"$cluster" start --nodes 3 >/dev/null 2>&1' EXIT
stage=$DLAUNCH_SLURM_SHARED/stage-bench

# A cluster of N nodes (its line into FILE) with BUILD_DIR's test programs and the installed dlaunch staged.
cluster_of() {
  local n=$1 build=$2 file=$3
  "$cluster" start --nodes "$n" 2>&1 | tail -n 1 | tee -a "$file"
  "$here/../../tests/slurm/stage.sh" --installed "$build" "$stage" >/dev/null
}

# RPC counts by message type, from sdiag, as "TYPE COUNT" lines.
rpc_counts() { sdiag | awk '/by message type/ {on=1; next} /by user/ {on=0} on && match($0, /count:[0-9]+/) {
  print $1, substr($0, RSTART + 6, RLENGTH - 6) }'; }

# One batch job of N nodes whose step is STEP...; the RPCs slurmctld served from its submission until its
# nodes are idle again, less the nodes' registrations (periodic, not the job's) and this script's own
# questions (sdiag; sinfo while it waits). It waits for a file the job writes, not with `sbatch --wait`,
# which asks slurmctld about the job every few seconds.
job_rpcs() {
  local n=$1 name=$2 done_file=$DLAUNCH_SLURM_SHARED/bench-rpcs-done
  shift 2
  rm -f "$done_file"
  sdiag -r >/dev/null
  # From the shared directory: requeue's ledger goes to the submission directory's dlaunch-logs/.
  (cd "$DLAUNCH_SLURM_SHARED" && sbatch -N "$n" -n "$n" --output /dev/null --wrap "$*; echo \$? > $done_file" >/dev/null)
  local deadline=$((SECONDS + 300))
  while [[ ! -s $done_file ]]; do ((SECONDS < deadline)) || { echo "job of $n nodes: no end in 300 s" >&2; exit 1; }; sleep 0.2; done
  [[ $(<"$done_file") == 0 ]] || { echo "job of $n nodes ($*): its step exited $(<"$done_file")" >&2; exit 1; }
  until [[ $(sinfo -h -p debug -t idle -o %D) == "$n" ]]; do
    ((SECONDS < deadline)) || { echo "$n nodes: not idle 300 s after the job" >&2; exit 1; }
    sleep 0.2
  done
  rpc_counts | grep -vE 'NODE_REGISTRATION|STATS_INFO|NODE_INFO|PARTITION_INFO' > "$out/rpcs-$name-$n.txt"
}

# The RPCs job_rpcs counted for NAME at N nodes, less the nodes' own epilog messages (one per node, Slurm's,
# and some arrive after the nodes are idle again: their count is noise).
job_rpc_total() {
  grep -v MESSAGE_EPILOG_COMPLETE "$out/rpcs-$1-$2.txt" | awk '{ s += $2 } END { print s + 0 }'
}
