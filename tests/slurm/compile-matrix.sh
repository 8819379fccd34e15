#!/usr/bin/env bash
# Compiles dlaunch's Slurm code (slurm/ and spank/) against the public headers of each given Slurm release,
# the way a site's build would (CMake's FindSlurm, the plugin's feature checks, -Werror), and prints one line
# per release. A developer check (it needs Slurm's sources, and CI has no network); CI builds against the
# two releases it installs (Debian 12's 22.05 and Debian 13's 24.11).
#
#   bash tests/slurm/compile-matrix.sh DIR...              header trees: an installed prefix or its include/
#                                                          (holding slurm/slurm.h), or a Slurm source checkout
#   bash tests/slurm/compile-matrix.sh --git REPO [TAG...] tags of a clone of SchedMD's Slurm
#                                                          (https://github.com/SchedMD/slurm); no TAG: the
#                                                          newest slurm-XX-YY-Z-1 of every release from 22.05
# Exit status: 0 when every release compiled, 1 when one did not, 64 on bad arguments.
# Needs what the Debian 12 build needs (packaging/debian-deps.sh): compiling is done with this machine's
# compiler and libraries; only Slurm's headers change. Takes ~20 s per release on 2 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
usage() {
    { echo "usage:"; sed -n '7,12p' "$0" | sed 's/^#//'; } >&2
    exit 64
}
[[ $# -gt 0 ]] || usage
work=$(mktemp -d "${TMPDIR:-/tmp}/dlaunch-compile-matrix-XXXXXX")
trap 'rm -rf "$work"' EXIT
# Only headers change; the library is only read for its SONAME (dlaunch opens libslurm by it at run time).
libslurm=$(ldconfig -p | awk '$1 ~ /^libslurm\.so/ && /x86-64/ && !found {print $NF; found = 1}')
[[ -n $libslurm ]] || { echo "compile-matrix: no libslurm on this machine; run packaging/debian-deps.sh" >&2; exit 1; }

# A header tree for a source checkout: its slurm/*.h and the slurm_version.h `configure` would write from META.
tree_from_source() {  # SRC_DIR OUT_DIR
    local src=$1 out=$2 major minor micro
    major=$(awk '$1 == "Major:" {print $2}' "$src/META")
    minor=$(awk '$1 == "Minor:" {print $2}' "$src/META")
    micro=$(awk '$1 == "Micro:" {print $2}' "$src/META")
    mkdir -p "$out/slurm"
    cp "$src"/slurm/*.h "$out/slurm/"
    printf '#ifndef _SLURM_VERSION_H_\n#define _SLURM_VERSION_H_\n#define SLURM_VERSION_NUMBER 0x%02x%02x%02x\n' \
        "$((10#$major))" "$((10#$minor))" "$((10#$micro))" >"$out/slurm/slurm_version.h"
    sed -n '/define SLURM_VERSION_NUM(/,/MICRO/p' "$src/slurm/slurm_version.h.in" >>"$out/slurm/slurm_version.h"
    echo '#endif' >>"$out/slurm/slurm_version.h"
}

# DIR as given -> a directory holding slurm/slurm.h and slurm/slurm_version.h.
header_tree() {  # DIR SCRATCH
    local dir=$1 scratch=$2
    if [[ -f $dir/slurm/slurm_version.h ]]; then echo "$dir"
    elif [[ -f $dir/include/slurm/slurm_version.h ]]; then echo "$dir/include"
    elif [[ -f $dir/slurm/slurm_version.h.in && -f $dir/META ]]; then tree_from_source "$dir" "$scratch" && echo "$scratch"
    else return 1; fi
}

# One line: the release, ok or FAILED with the first error.
compile_one() {  # DIR LABEL
    local dir=$1 label=$2 scratch=$work/$2 tree build number version
    mkdir -p "$scratch"
    if ! tree=$(header_tree "$dir" "$scratch/include"); then
        printf '%-12s FAILED  %s holds no slurm/slurm.h with slurm_version.h, nor a Slurm source checkout\n' "$label" "$dir"
        return 1
    fi
    number=$(awk '/define SLURM_VERSION_NUMBER/ {print $3}' "$tree/slurm/slurm_version.h")
    version=$(printf '%d.%02d.%d' $((number >> 16)) $(((number >> 8) & 255)) $((number & 255)))
    build=$scratch/build
    if ! cmake -S "$root" -B "$build" -DDLAUNCH_WERROR=ON -DDLAUNCH_BUILD_TESTS=OFF -DDLAUNCH_NCCL=OFF \
        -DSlurm_INCLUDE_DIR="$tree" -DSlurm_LIBRARY="$libslurm" >"$scratch/log" 2>&1 ||
        ! make -C "$build/slurm" src/client.cpp.o src/task_facts.cpp.o >>"$scratch/log" 2>&1 ||
        ! make -C "$build/spank" src/spank_dlaunch.cpp.o >>"$scratch/log" 2>&1; then
        printf '%-12s FAILED  %s errors; first: %s\n' "${version:-$label}" "$(grep -c 'error:' "$scratch/log" || true)" \
            "$(grep -m1 -E 'error:|Error' "$scratch/log" | cut -c1-200)"
        return 1
    fi
    printf '%-12s ok      slurm/src/client.cpp slurm/src/task_facts.cpp spank/src/spank_dlaunch.cpp\n' "$version"
}

failed=0
if [[ $1 == --git ]]; then
    repo=${2:?usage: compile-matrix.sh --git REPO [TAG...]}
    shift 2
    tags=("$@")
    if [[ ${#tags[@]} -eq 0 ]]; then
        mapfile -t tags < <(git -C "$repo" tag -l 'slurm-[0-9][0-9]-[0-9][0-9]-*-1' | sort -V |
            awk -F- '$2 * 100 + $3 >= 2205 {newest[$2 "." $3] = $0} END {for (r in newest) print newest[r]}' | sort -V)
    fi
    for tag in "${tags[@]}"; do
        src=$work/src-$tag
        mkdir -p "$src"
        git -C "$repo" archive "$tag" slurm META | tar -x -C "$src"
        compile_one "$src" "$tag" || failed=1
    done
else
    for dir in "$@"; do
        compile_one "$dir" "$(basename "$dir")" || failed=1
    done
fi
exit $failed
