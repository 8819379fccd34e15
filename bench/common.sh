# shellcheck shell=bash disable=SC2034
# Shared setup for the bench/*.sh scripts. Sourced, not run. Defines:
#   BENCH_DIR      this directory
#   DLAUNCH_SRC    the dlaunch binary asked for ($DLAUNCH, else ../build/launcher/dlaunch from here)
#   WORK           a private temporary directory, removed on exit (unless BENCH_KEEP_WORK=1)
#   DL             a snapshot copy of DLAUNCH_SRC inside $WORK: a rebuild of build/ by someone
#                  else while a benchmark runs cannot swap the binary under it
#   OUT_DIR        where results go: $BENCH_OUT_DIR, else bench/results/<date>_<time>
#   TORCHRUN       the command prefix for torchrun (patched for Python 3.11, see torchrun_patched.py)
#   PY             /usr/bin/python3 (the interpreter that has torch)
# and the helpers die, note, build_cpp, write_machine_info.

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DLAUNCH_SRC="${DLAUNCH:-$BENCH_DIR/../build/launcher/dlaunch}"
PY="${BENCH_PYTHON:-/usr/bin/python3}"
TORCHRUN=("$PY" "$BENCH_DIR/torchrun_patched.py")

die() { echo "bench: $*" >&2; exit 1; }
note() { echo "bench: $*" >&2; }

[[ -x "$DLAUNCH_SRC" ]] || die "no dlaunch binary at $DLAUNCH_SRC (build it, or set DLAUNCH=/path/to/dlaunch)"
DLAUNCH_SRC="$(cd "$(dirname "$DLAUNCH_SRC")" && pwd)/$(basename "$DLAUNCH_SRC")"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/dlaunch-bench.XXXXXX")"
if [[ "${BENCH_KEEP_WORK:-0}" != 1 ]]; then
    trap 'rm -rf "$WORK"' EXIT
else
    note "keeping the work directory $WORK"
fi
cp "$DLAUNCH_SRC" "$WORK/dlaunch"
DL="$WORK/dlaunch"
# Every launcher's scratch files go under $WORK and are removed with it: dlaunch's run directories
# and its port lock files ($TMPDIR/dlaunch-ports/<port>, one per launch, never removed by dlaunch),
# Open MPI's session directories, torchrun's log directories. Same treatment for all of them.
mkdir -p "$WORK/tmp"
export TMPDIR="$WORK/tmp"

OUT_DIR="${BENCH_OUT_DIR:-$BENCH_DIR/results/$(date +%Y-%m-%d_%H%M%S)}"
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"

# build_cpp SOURCE OUTPUT: compile one of the helper programs here with g++ -O2.
build_cpp() {
    command -v g++ >/dev/null || die "g++ is needed to build $1 (apt-get install -y g++)"
    g++ -O2 -std=c++17 -o "$2" "$1"
}

# write_machine_info FILE: what the numbers were measured on and with.
write_machine_info() {
    {
        echo "date:      $(date -Iseconds)"
        echo "host:      $(uname -srm)"
        echo "os:        $(. /etc/os-release && echo "$PRETTY_NAME") (debian_version $(cat /etc/debian_version 2>/dev/null))"
        echo "nproc:     $(nproc)"
        echo "load:      $(cut -d' ' -f1-3 /proc/loadavg)"
        echo "dlaunch:   $DLAUNCH_SRC (sha256 $(sha256sum "$DL" | cut -c1-16), built $(date -r "$DLAUNCH_SRC" -Iseconds), $("$DL" --version 2>/dev/null | head -1))"
        local repo="$BENCH_DIR/.."
        if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
            # The repository this script lives in; the binary may have been built from another state.
            echo "repo HEAD: $(git -C "$repo" rev-parse --short HEAD)$(git -C "$repo" diff --quiet HEAD -- launcher topology 2>/dev/null || echo ' + uncommitted changes in launcher/ or topology/')"
        fi
        echo "mpirun:    $(mpirun --version 2>/dev/null | head -1)"
        echo "torch:     $("$PY" -c 'import torch, sys; print(torch.__version__, "on Python", sys.version.split()[0])' 2>/dev/null)"
        echo "hyperfine: $(hyperfine --version 2>/dev/null)"
        echo "lscpu | head:"
        lscpu | head -n 12 | sed 's/^/  /'
    } >"$1"
}
