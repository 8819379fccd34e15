#!/usr/bin/env bash
# Copies what Slurm jobs in the tests run (the dlaunch binaries, the SPANK plugin, examples, test workers)
# to a directory every node of the test cluster sees (not /tmp: each node has its own), and lists the
# staged plugin in the cluster's plugstack.conf (required: a plugin that fails to load fails the tests).
#   tests/slurm/stage.sh BUILD_DIR DEST_DIR
#   tests/slurm/stage.sh --installed BUILD_DIR DEST_DIR
# With --installed, dlaunch's own files are those the Debian packages installed (symbolic links to them, so
# that the programs find their helpers where the packages put them) and plugstack.conf is the package's
# /etc/slurm/plugstack.conf.d/dlaunch.conf with the plugin required; the test programs still come from BUILD_DIR.
set -euo pipefail
installed=""
if [ "${1:-}" = "--installed" ]; then installed=1; shift; fi
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
dest=$2
rm -rf "$dest.new" && mkdir -p "$dest.new"
if [ -n "$installed" ]; then
  snippet=/etc/slurm/plugstack.conf.d/dlaunch.conf
  [ -r "$snippet" ] || { echo "stage.sh: $snippet is missing: install the dlaunch-slurm package first" >&2; exit 1; }
  plugin=$(awk '$1 == "optional" || $1 == "required" { print $2 }' "$snippet")
  for f in /usr/bin/dlaunch /usr/bin/dlaunch-mpi /usr/libexec/dlaunch/dlaunch-python /usr/libexec/dlaunch/dlaunch-watch \
           "$plugin"; do
    [ -x "$f" ] || [ -f "$f" ] || { echo "stage.sh: $f is missing: install the dlaunch packages first" >&2; exit 1; }
    ln -s "$f" "$dest.new/"
  done
else
  cp "$build/launcher/dlaunch" "$build/launcher/dlaunch-mpi" "$build/launcher/dlaunch-python" "$build/launcher/dlaunch-watch" \
     "$build/launcher/spank_dlaunch.so" "$dest.new/"
  # dlaunch's sitecustomize.py and dlaunch_heartbeat.py, found next to the dlaunch binary (python/).
  cp -r "$build/launcher/python" "$dest.new/"
fi
cp "$build/tests/bootstrap_check" "$dest.new/"
# Built only with CUDA/NCCL (DLAUNCH_NCCL); the tests that need them say so when they are missing.
for optional in tests/nccl_ids examples/nccl_allreduce nccl/libdlaunch_nccl.so; do
  if [ -e "$build/$optional" ]; then cp "$build/$optional" "$dest.new/"; fi
done
cp -r "$src/examples" "$src/tests/slurm/workers" "$dest.new/"
mkdir "$dest.new/topologies" && cp "$src/tests/data/topologies/jwc09n003.xml" "$dest.new/topologies/"
rm -rf "$dest" && mv "$dest.new" "$dest"
chmod -R a+rX "$dest"
chmod a-x "$dest"/examples/*.py  # srun --dist-launch must run .py files without an exec bit
base=${DLAUNCH_SLURM_BASE:-/var/lib/dlaunch-test-cluster}
if [ -n "$installed" ]; then
  sed 's/^optional /required /; /^required /!d' "$snippet" > "$base/plugstack.conf"
else
  echo "required $dest/spank_dlaunch.so pyexec=$dest/dlaunch-python" > "$base/plugstack.conf"
fi
echo "$dest"
