#!/usr/bin/env bash
# Copies what Slurm jobs in the tests run (the dlaunch binaries, the SPANK plugin, examples, test workers)
# to a directory every node of the test cluster sees (not /tmp: each node has its own), and lists the
# staged plugin in the cluster's plugstack.conf (required: a plugin that fails to load fails the tests).
#   tests/slurm/stage.sh BUILD_DIR DEST_DIR
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
dest=$2
rm -rf "$dest.new" && mkdir -p "$dest.new"
cp "$build/launcher/dlaunch" "$build/launcher/dlaunch-mpi" "$build/launcher/dlaunch-python" "$build/launcher/dlaunch-watch" \
   "$build/launcher/spank_dlaunch.so" "$dest.new/"
cp "$build/tests/bootstrap_check" "$dest.new/"
# Built only with CUDA/NCCL (DLAUNCH_NCCL); the tests that need them say so when they are missing.
for optional in tests/nccl_ids examples/nccl_allreduce nccl/libdlaunch_nccl.so; do
  if [ -e "$build/$optional" ]; then cp "$build/$optional" "$dest.new/"; fi
done
# dlaunch's sitecustomize.py and dlaunch_heartbeat.py, found next to the dlaunch binary (python/).
cp -r "$build/launcher/python" "$dest.new/"
cp -r "$src/examples" "$src/tests/slurm/workers" "$dest.new/"
rm -rf "$dest" && mv "$dest.new" "$dest"
chmod -R a+rX "$dest"
chmod a-x "$dest"/examples/*.py  # srun --dist-launch must run .py files without an exec bit
base=${DLAUNCH_SLURM_BASE:-/var/lib/dlaunch-test-cluster}
echo "required $dest/spank_dlaunch.so pyexec=$dest/dlaunch-python" > "$base/plugstack.conf"
echo "$dest"
