#!/usr/bin/env bash
# Copies what Slurm jobs in the tests run (the dlaunch binaries, examples, test workers) to a directory
# every node of the test cluster sees (not /tmp: each node has its own).
#   tests/slurm/stage.sh BUILD_DIR DEST_DIR
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "$1" && pwd)
dest=$2
rm -rf "$dest.new" && mkdir -p "$dest.new"
cp "$build/launcher/dlaunch" "$build/launcher/dlaunch-mpi" "$dest.new/"
cp -r "$src/examples" "$src/tests/slurm/workers" "$dest.new/"
rm -rf "$dest" && mv "$dest.new" "$dest"
chmod -R a+rX "$dest"
echo "$dest"
