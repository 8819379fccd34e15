#!/usr/bin/env bash
# Installs what dlaunch needs to build and test on Debian 12 (bookworm) or 13 (trixie), from Debian's
# packages. Idempotent: does nothing when every package is already installed. Needs root (or sudo).
#   bash packaging/debian-deps.sh            build + test dependencies
#   bash packaging/debian-deps.sh --bench    also what bench/ compares against (hyperfine, Open MPI)
#   bash packaging/debian-deps.sh --list     prints the build + test packages, without the host's own tools,
#                                            and installs nothing (tests/platforms/debian13.sh makes its root)
set -euo pipefail

# The host's own tools: formatting and clang-tidy run on Debian 12 only (one compiler's view is enough);
# mmdebstrap makes the Debian 13 root (tests/platforms/debian13.sh).
host_only=(clang-format clang-tidy mmdebstrap)
packages=(
  build-essential cmake pkg-config git
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev
  hwloc libhwloc-dev
  libpmix-dev libpmix-bin openmpi-bin libopenmpi-dev
  mpich  # dlaunch-mpi under Hydra (mpiexec.hydra); Debian's alternatives keep mpirun on Open MPI (checked below)
  libibverbs-dev  # dlaunch doctor and the health gate: RDMA port states
  nettle-dev  # the rendezvous's HMAC-SHA256 and SHA-256, etcd's base64
  slurm-wlm slurmctld slurmd slurm-client munge libslurm-dev libmunge-dev
  iproute2 util-linux  # the test cluster's namespaces, bridge and veths (ip, nsenter, unshare)
  python3 python3-torch python3-pytest python3-mpi4py
  elfutils gdb  # native stacks of a hung rank (eu-stack; gdb where eu-stack is missing)
  help2man file lintian  # the Debian packages: man pages, dpkg-shlibdeps' file detection, the packages' check
  patchelf  # tests/gpu/bundle.sh: the bundle's programs find its libraries through their RPATH
  libcurl4-openssl-dev etcd-server  # --rdzv-backend etcd: etcd's v3 JSON gateway; the tests' real etcd
  python3-etcd  # torch's own etcd-v2 rendezvous (the reference the parity tests compare dlaunch with)
)
case "${1:-}" in
  --list) echo "${packages[@]}"; exit 0 ;;
  --bench) packages+=(hyperfine time libbenchmark-dev) ;;
esac
packages+=("${host_only[@]}")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# With mpich beside Open MPI, Debian's alternatives choose mpirun by priority (Open MPI's is higher); the
# tests' `mpirun` must stay Open MPI's, so a machine whose choice was changed by hand is named, not changed.
check_mpirun() {
  local chosen
  chosen=$(readlink -f "$(command -v mpirun)" 2>/dev/null || true)
  case $chosen in
    */orterun|*/prterun|*/mpirun.openmpi) ;;
    *) echo "debian-deps: mpirun is $chosen, not Open MPI's; run: update-alternatives --auto mpirun" >&2; exit 1 ;;
  esac
}

if ((${#missing[@]} == 0)); then
  check_mpirun
  echo "debian-deps: all ${#packages[@]} packages present"
  exit 0
fi

as_root=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "debian-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  as_root=(sudo)
fi
echo "debian-deps: installing ${missing[*]}"
"${as_root[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
check_mpirun
