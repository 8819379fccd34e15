#!/usr/bin/env bash
# Runs every dlaunch test on a fresh Debian 12 machine: installs dependencies (Debian packages),
# builds with warnings as errors, builds and installs the Debian packages, runs the unit tests (also under
# ASan/UBSan), the integration and Slurm tests (real processes, real PyTorch, against the installed
# packages), the packages' checks and the examples through CTest; then the same on Debian 13 in a trixie
# root (tests/platforms/debian13.sh). Exit code 0 only if all pass on both platforms.
#   bash tests/run-tests.sh            (from the repository root; build trees go to build-test*/)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

bash packaging/debian-deps.sh

echo "== formatting (.clang-format)"
bash tests/check-format.sh

# Debian's python3 has torch; a python3 earlier on PATH (pyenv, venv) may not. Tests use this one.
python=/usr/bin/python3
"$python" -c "import torch, pytest" || { echo "run-tests: $python lacks torch or pytest" >&2; exit 1; }

echo "== build (Release with debug info, -Werror, NCCL library required: CUDA/NCCL are under /usr/local/cuda)"
# For /usr, as the Debian packages are: the integration and Slurm tests run the installed packages' files.
cmake -S . -B build-test -DDLAUNCH_WERROR=ON -DDLAUNCH_NCCL=ON -DDLAUNCH_TEST_PYTHON="$python" \
  -DCMAKE_INSTALL_PREFIX=/usr -DDLAUNCH_TEST_INSTALLED=ON >/dev/null
cmake --build build-test -j"$jobs"

echo "== Debian packages: build and install them (dlaunch, dlaunch-slurm, libdlaunch-dev)"
rm -rf build-test/packages
cmake --build build-test --target package >build-test/cpack.log 2>&1 || { cat build-test/cpack.log >&2; exit 1; }
as_root=()
if [[ $(id -u) -ne 0 ]]; then as_root=(sudo); fi
"${as_root[@]}" dpkg -i build-test/packages/*.deb >/dev/null

echo "== clang-tidy (.clang-tidy: a small set of bug checks and the 80-line function rule)"
run-clang-tidy-14 -p build-test -j "$jobs" -quiet "$PWD/(base|launcher|slurm|pmix|spank|topology|nccl)/.*\.cpp" \
  > build-test/clang-tidy.log 2>&1 || { grep -E "error:|warning:" build-test/clang-tidy.log >&2; exit 1; }

echo "== without CUDA/NCCL, under AddressSanitizer and UndefinedBehaviorSanitizer: build all, unit and bootstrap tests"
cmake -S . -B build-test-asan -DDLAUNCH_WERROR=ON -DCMAKE_BUILD_TYPE=Debug -DDLAUNCH_NCCL=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
  -DDLAUNCH_TEST_PYTHON="$python" >/dev/null
cmake --build build-test-asan -j"$jobs"
build-test-asan/tests/dlaunch_unit_tests --gtest_brief=1
# dlaunch caches the machine's topology ($TMPDIR/dlaunch-topology-<uid>). A full discovery loads hwloc's PCI
# plugin, whose libpciaccess allocations outlive its dlclose() and show as leaks of an "<unknown module>" that
# no suppression can name (third-party, as libpmix's in lsan.supp); the build without sanitizers fills the
# cache first, so that the sanitized agent checks dlaunch's own code.
build-test/launcher/dlaunch plan --nproc-per-node 1 --no-python /bin/true >/dev/null
(cd build-test-asan && LSAN_OPTIONS="suppressions=$PWD/../tests/sanitizer/lsan.supp" \
   ctest --output-on-failure -R 'integration\.test_bootstrap$')

# Debian 13's root, build and packages are made beside Debian 12's tests, which mostly wait on Slurm; at
# the lowest CPU and I/O priority, so that they take little from those tests. In a session of its own, so
# that it ends with this script however this script ends (a ^C too: background commands ignore SIGINT).
echo "== Debian 13 (trixie): root, build and packages, in the background (build-debian13/prepare.log)"
mkdir -p build-debian13
setsid nice -n 19 ionice -c3 bash tests/platforms/debian13.sh --prepare >build-debian13/prepare.log 2>&1 &
prepare=$!
trap 'kill -- -"$prepare" 2>/dev/null || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "== all tests (unit, integration, examples)"
debian12=0
rm -f build-test/failures.txt build-debian13/failures.txt
(cd build-test && ctest -j"$jobs" --output-on-failure --timeout 900) || debian12=$?
if ((debian12 != 0)); then bash tests/report-failures.sh build-test "Debian 12" >build-test/failures.txt; fi

# After Debian 12's tests: both platforms' Slurm clusters use the same names and addresses.
echo "== Debian 13 (trixie): tests in the trixie root"
debian13=0
wait "$prepare" || debian13=$?
if ((debian13 != 0)); then
  tail -n 40 build-debian13/prepare.log >&2
  echo "Debian 13: root, build or packages failed (exit $debian13; whole log: build-debian13/prepare.log)" >&2
else
  grep -E '^(debian13:|dlaunch-slurm depends)' build-debian13/prepare.log || true
  tests/slurm/cluster.sh stop >/dev/null 2>&1 || true  # whatever Debian 12's tests left of their cluster
  bash tests/platforms/debian13.sh --test || debian13=$?
fi
# The failed tests again, at the end, where a CI log's tail shows them.
cat build-test/failures.txt build-debian13/failures.txt 2>/dev/null || true
echo "== Debian 12: $( ((debian12 == 0)) && echo passed || echo "FAILED (ctest exit $debian12)");" \
  "Debian 13: $( ((debian13 == 0)) && echo passed || echo "FAILED (exit $debian13)")"
((debian12 == 0 && debian13 == 0))
