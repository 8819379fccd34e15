#!/usr/bin/env bash
# Checks every GPU path of dlaunch on this machine from a bundle made by tests/gpu/bundle.sh (the bundle
# carries this script in BUNDLE/check/). One verdict line per check; outputs under $OUT (else --out DIR,
# else ./gpu-check-out). Exit 0 when no check failed. See tests/gpu/README.md.
#   bash BUNDLE/check/device-check.sh BUNDLE [--expect gpu|none|auto] [--out DIR] [--python PYTHON]
set -euo pipefail
bundle=${1:?usage: device-check.sh BUNDLE [--expect gpu|none|auto] [--out DIR] [--python PYTHON]}
shift
here=$(cd "$(dirname "$0")" && pwd)
exec "${PYTHON_EXEC:-python3}" "$here/device_check.py" "$bundle" "$@"
