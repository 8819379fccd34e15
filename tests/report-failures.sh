#!/usr/bin/env bash
# Says which tests the last CTest run in BUILD failed, each with what its output says went wrong: pytest's
# "E " lines or GoogleTest's failures, and the output's last lines, from BUILD/Testing/Temporary/LastTest.log. run-tests.sh prints
# this at its very end, so that a CI log's tail names the failures (the whole output is further up).
#   bash tests/report-failures.sh BUILD LABEL
set -euo pipefail
build=$1 label=$2
failed=$build/Testing/Temporary/LastTestsFailed.log log=$build/Testing/Temporary/LastTest.log
if [[ ! -s $failed ]]; then
  echo "$label: CTest failed, and it named no failed test ($failed is missing or empty): see the output above"
  exit 0
fi
names=$(cut -d: -f2- "$failed")
echo "$label: failed: $(echo "$names" | paste -sd' ')"
shown=0
while read -r name; do
  if ((shown++ == 4)); then
    echo "   (the rest's output: further up, or in $log)"
    break
  fi
  # The test's output: between "Output:" and "<end of output>" in its block of LastTest.log.
  output=$(awk -v test="$name" '
    $0 ~ /^[0-9]+\/[0-9]+ Test: / { mine = (substr($0, index($0, ": ") + 2) == test); next }
    mine && $0 == "Output:" { getline; inside = 1; next }
    inside && $0 == "<end of output>" { inside = 0; mine = 0 }
    inside { print }' "$log" 2>/dev/null || true)
  echo "-- $name"
  # pytest's "E " lines, or GoogleTest's "FILE:LINE: Failure" with the lines that say what differed.
  { grep -E -A5 '^E |: Failure$' <<<"$output" | grep -v '^--$' | head -n 12 || true; } | sed 's/^/   /'
  tail -n 6 <<<"$output" | sed 's/^/   | /'
done <<<"$names"
