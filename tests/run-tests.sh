#!/usr/bin/env bash
# Runs every dlaunch test on a fresh Debian 12 machine: installs dependencies (Debian packages),
# builds with warnings as errors, builds and installs the Debian packages, runs the unit tests (also under
# ASan/UBSan), the integration and Slurm tests (real processes, real PyTorch, against the installed
# packages), the packages' checks and the examples through CTest. Exit code 0 only if all pass.
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

echo "== all tests (unit, integration, examples)"
cd build-test
ctest -j"$jobs" --output-on-failure --timeout 900
