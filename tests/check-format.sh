#!/usr/bin/env bash
# Fails when a C++ file differs from .clang-format (the diff is printed). Fix with:
#   clang-format -i $(git ls-files '*.cpp' '*.hpp' '*.h')
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format missing (packaging/debian-deps.sh installs it)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h')
bad=0
for f in "${files[@]}"; do
  if ! diff -u "$f" <(clang-format --style=file "$f") > /tmp/check-format.$$ 2>&1; then
    sed "s|^+++ /dev/fd/[0-9]*|+++ $f (clang-format)|" /tmp/check-format.$$
    bad=$((bad + 1))
  fi
done
rm -f /tmp/check-format.$$
if ((bad > 0)); then
  echo "check-format: $bad of ${#files[@]} files differ from .clang-format; run clang-format -i on them" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files match .clang-format"
