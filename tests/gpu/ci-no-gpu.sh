#!/usr/bin/env bash
# CTest's gpu.bundle_no_gpu: makes the GPU check's bundle from BUILD and runs the check in its no-GPU mode
# (every GPU check must say "not present"; the bundle's programs must run from the bundle).
#   bash tests/gpu/ci-no-gpu.sh BUILD PYTHON
set -euo pipefail
build=${1:?usage: ci-no-gpu.sh BUILD PYTHON}
python=${2:?usage: ci-no-gpu.sh BUILD PYTHON}
here=$(cd "$(dirname "$0")" && pwd)
out=$build/gpu-check
rm -rf "$out"
bash "$here/bundle.sh" "$out/bundle" "$build"
# The bundle must not lean on this tree: the check runs from the bundle's own copy of itself.
PYTHON_EXEC=$python bash "$out/bundle/dlaunch/check/device-check.sh" "$out/bundle/dlaunch" --expect none \
  --out "$out/results" --python "$python"
