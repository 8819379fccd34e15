#!/usr/bin/env bash
# Debian 13 (trixie), dlaunch's second tested platform: Slurm 24.11, PMIx 5, Open MPI 5, torch 2.6,
# Python 3.13, GCC 14, hwloc 2.12 (README.md, "Support matrix").
#
# Makes a trixie root with mmdebstrap from the Debian mirror in this machine's own apt sources, holding the
# packages packaging/debian-deps.sh --list names. The root is cached in $DLAUNCH_PLATFORM_CACHE
# (/var/cache/dlaunch-platforms), keyed by that list: a second run does not download it again. Every run
# then works on an overlay of it (the cache stays as made) in a mount namespace of its own, chrooted, and
# there builds dlaunch with -Werror, builds and installs its Debian packages and runs CTest: the unit tests,
# the integration tests (torch 2.6, Open MPI 5's mpirun, PMIx 5), the packages' checks, and the Slurm tests
# on the three-node cluster of tests/slurm/cluster.sh started from the root's own slurmctld, slurmd and
# munged. Tests left out are named with the reason before CTest starts.
#
#   bash tests/platforms/debian13.sh             (root; build tree: build-debian13/ in the repository)
#   bash tests/platforms/debian13.sh --prepare   only the root, the build and the packages (tests/run-tests.sh
#                                                runs this beside Debian 12's tests, which mostly wait)
#   bash tests/platforms/debian13.sh --test      only the tests, in what --prepare left
# Exit status: CTest's, or 1 when the root or the build could not be made. Needs what
# packaging/debian-deps.sh installs on the Debian 12 host (mmdebstrap, util-linux) and network access to
# the mirror for the first run.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
suite=trixie
cache=${DLAUNCH_PLATFORM_CACHE:-/var/cache/dlaunch-platforms}
work=$repo/build-debian13
log() { echo "debian13: $*" >&2; }

# The host's Debian mirror: the first URIs of a deb822 source, else the first `deb` line (never written
# into the repository).
debian_mirror() {
  local uri
  uri=$(awk '$1 == "URIs:" {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [[ -n $uri ]] || uri=$(awk '$1 == "deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  [[ -n $uri ]] || { log "no Debian mirror in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list"; exit 1; }
  echo "$uri"
}

# The cached root for this package list, made when missing (into a temporary name, then renamed: a run that
# was interrupted leaves no half-made root behind). Older roots are removed.
ensure_root() {
  local packages key root
  packages="$(bash "$repo/packaging/debian-deps.sh" --list) procps"
  key=$(printf '%s\n' "$suite" "$packages" | sha256sum | cut -c1-16)
  root=$cache/debian13-$key
  if [[ ! -d $root ]]; then
    mkdir -p "$cache"
    rm -rf "$root.tmp"
    log "making the $suite root (packages: $packages) from $(debian_mirror)"
    mmdebstrap --variant=apt --aptopt='APT::Install-Recommends "false"' --include="${packages// /,}" \
      "$suite" "$root.tmp" "$(debian_mirror)" >"$work/mmdebstrap.log" 2>&1 ||
      { tail -n 30 "$work/mmdebstrap.log" >&2; log "mmdebstrap failed (whole log: $work/mmdebstrap.log)"; exit 1; }
    mv "$root.tmp" "$root"
  fi
  find "$cache" -mindepth 1 -maxdepth 1 -name 'debian13-*' ! -path "$root" -exec rm -rf {} +
  echo "$root"
}

# In a mount namespace of our own: the overlay, the kernel file systems, and the repository at /src.
enter_root() {
  local root=$1 phase=$2 merged=$work/root
  if [[ $phase == prepare ]]; then
    rm -rf "$work/upper" "$work/overlay-work" "$work/prepared"
  elif [[ ! -f $work/prepared || $(cat "$work/prepared") != "$root" ]]; then
    log "nothing prepared for $root: run bash tests/platforms/debian13.sh --prepare first"
    exit 1
  fi
  mkdir -p "$work/upper" "$work/overlay-work" "$merged"
  mount -t overlay overlay -o "lowerdir=$root,upperdir=$work/upper,workdir=$work/overlay-work" "$merged"
  mount -t proc proc "$merged/proc"
  mount --rbind /sys "$merged/sys" && mount --make-rslave "$merged/sys"
  mount --rbind /dev "$merged/dev" && mount --make-rslave "$merged/dev"
  mount -t tmpfs -o mode=755 run "$merged/run"
  mount -t tmpfs -o mode=1777 tmp "$merged/tmp"
  # This machine's own name resolves in the root as on the host (MASTER_ADDR is often the hostname).
  mount --bind /etc/hosts "$merged/etc/hosts"
  mkdir -p "$merged/src"
  mount --bind "$repo" "$merged/src"
  chroot "$merged" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    LANG=C.UTF-8 TERM=dumb bash /src/tests/platforms/debian13.sh __in_root "$phase"
  if [[ $phase == prepare ]]; then echo "$root" >"$work/prepared"; fi
}

# Tests that do not run here, each with its reason (said before CTest starts).
declare -A left_out=(
  [gpu.bundle_no_gpu]="the GPU bundle is made on Debian 12 only (CUDA and NCCL are not in the root)"
  [golden.plans]="golden files are Debian 12's byte for byte (torch 1.13's names); test_torchrun_parity compares with torch 2.6's own torchrun instead"
  [golden.env]="as golden.plans"
  [build.hardening]="checked on Debian 12's build; the flags come from the same CMakeLists.txt"
  [slurm.hangs]="no call into Slurm that differs between releases; run on Debian 12"
  [slurm.byhand]="no Slurm job at all (agents started in the nodes' namespaces); run on Debian 12"
  [slurm.etcd_hosts]="no Slurm job at all (agents started in the nodes' namespaces, etcd on the bridge); run on Debian 12; etcd 3.5 is tested here by integration.test_etcd"
  [slurm.hostile]="the group channel under attack does not depend on the Slurm release; run on Debian 12"
)
# Run in part: the tests that exercise the libslurm calls slurm/src/slurm_compat.hpp adapts (requeue, the
# job's state and excluded nodes, signalling a step, a batch job's flag) and the group's restarts.
# A dead node and a hot spare too: from Slurm 23.02 on srun --no-kill exits 1 after a node failure, which
# examples/sbatch/group.sbatch answers with the group leader's exit code (dlaunch report --exit-code).
slurm_part='scontrol_requeue or fewer_than_min_nodes or requeue_outside_a_batch_job or spank_a_crash_is_requeued or a_crash_on_one_node or a_dead_node_is_left_out or a_hot_spare_replaces'
# Of those files' tests, left out of the part although they would belong to it, each with its reason.
declare -A part_left_out=()

# Inside the root: build with -Werror, then the packages, built and installed.
prepare_in_root() {
  cd /src
  local python=/usr/bin/python3 build=/src/build-debian13/build
  . /etc/os-release
  log "$PRETTY_NAME: $(gcc --version | head -n1); $(slurmctld -V); PMIx $(pkg-config --modversion pmix);" \
    "$(mpirun --version 2>/dev/null | head -n1); torch $("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
  echo "== Debian 13: build (-Werror, against Slurm $(slurmctld -V | cut -d' ' -f2))"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDLAUNCH_WERROR=ON -DDLAUNCH_NCCL=OFF \
    -DDLAUNCH_TEST_PYTHON="$python" -DCMAKE_INSTALL_PREFIX=/usr -DDLAUNCH_TEST_INSTALLED=ON >/dev/null
  cmake --build "$build" -j"$(nproc)"
  echo "== Debian 13: Debian packages, built and installed"
  rm -rf "$build/packages"
  cmake --build "$build" --target package >"$build/cpack.log" 2>&1 || { cat "$build/cpack.log" >&2; exit 1; }
  dpkg -i "$build"/packages/*.deb >/dev/null
  echo "dlaunch-slurm depends on: $(dpkg-deb -f "$build"/packages/dlaunch-slurm_*.deb Depends)"
}

# After a CTest run in build directory $1 that failed: which tests, for run-tests.sh to say again at its end
# (LastTest.log is rewritten by the next run).
report() {
  bash /src/tests/report-failures.sh "$1" "Debian 13" >>/src/build-debian13/failures.txt
}

# Inside the prepared root: CTest, without the tests left out, and the Slurm tests run in part.
test_in_root() {
  local build=/src/build-debian13/build name exclude="" rc=0
  echo "== Debian 13: tests"
  rm -f /src/build-debian13/failures.txt
  for name in "${!left_out[@]}"; do
    echo "   not run here: $name: ${left_out[$name]}"
    exclude+="${exclude:+|}^${name//./\\.}\$"
  done
  echo "   run in part: slurm.requeue and slurm.group: pytest -k '$slurm_part'"
  for name in "${!part_left_out[@]}"; do echo "   not run here: $name: ${part_left_out[$name]}"; done
  cd "$build"
  ctest -j"$(nproc)" --output-on-failure --timeout 900 -E "$exclude|^slurm\\.(requeue|group)\$" ||
    { report "$build"; rc=1; }
  PYTEST_ADDOPTS="-k '$slurm_part'" ctest --output-on-failure --timeout 900 -R '^slurm\.(requeue|group)$' ||
    { report "$build"; rc=1; }
  # The cluster's start ran the root's munged, which the cluster's stop leaves (on a host it is the system's):
  # it would outlive the run, holding the overlay and whatever descriptors the caller gave this script.
  if [[ -s /run/munge/munged.pid ]]; then kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true; fi
  return $rc
}

case "${1:-}" in
  __in_root) "$2"_in_root ;;
  __namespace) enter_root "$2" "$3" ;;
  "" | --prepare | --test)
    [[ $(id -u) -eq 0 ]] || { log "needs root (mmdebstrap, mounts, chroot, the Slurm cluster)"; exit 1; }
    mkdir -p "$work"
    root=$(ensure_root)
    phases=(prepare test)
    [[ ${1:-} == --prepare ]] && phases=(prepare)
    [[ ${1:-} == --test ]] && phases=(test)
    for phase in "${phases[@]}"; do
      unshare --mount --propagation private bash "$0" __namespace "$root" "$phase"
    done
    ;;
  *) echo "usage: bash tests/platforms/debian13.sh [--prepare|--test]" >&2; exit 64 ;;
esac
