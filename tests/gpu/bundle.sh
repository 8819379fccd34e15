#!/usr/bin/env bash
# Makes a self-contained dlaunch bundle for a machine that is not Debian 12 (the one-GPU check machine:
# docs in tests/gpu/README.md). What it holds, under OUT/dlaunch:
#   bin/            dlaunch (and dlaunch-launch, dlaunch-paddle), dlaunch-mpi; hwloc's lstopo-no-graphics
#   libexec/dlaunch dlaunch-python, dlaunch-watch, python/ (sitecustomize.py, dlaunch_heartbeat.py)
#   lib/            libdlaunch_nccl.so and every shared library the programs need that is not glibc
#   share/dlaunch/examples/nccl_allreduce
#   check/          tests/gpu (the check script and its workers)
# The programs carry an RPATH ($ORIGIN/../lib), so they run from wherever the bundle lands. Left out on
# purpose: glibc and libstdc++ (the programs link libstdc++ statically; libdlaunch_nccl and the example use
# the target's, which must be as new as Debian 12's: the check's `bundle` line says when one is not), the
# driver's libcuda/libnvidia-ml, and libnccl.so.2 (218 MiB here): the check uses the target's own (torch's
# nvidia-nccl wheel).
#   bash tests/gpu/bundle.sh OUT [BUILD]   (BUILD: a configured tree with DLAUNCH_NCCL=ON; default build-test,
#                                           configured and built by this script when absent)
set -euo pipefail
out=${1:?usage: bash tests/gpu/bundle.sh OUT [BUILD]}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${2:-$root/build-test}
limit_mib=60

if [[ ! -f $build/CMakeCache.txt ]]; then
    cmake -S "$root" -B "$build" -DDLAUNCH_NCCL=ON -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target dlaunch dlaunch-mpi dlaunch-python dlaunch-watch dlaunch_nccl nccl_allreduce

command -v patchelf >/dev/null || { echo "bundle: patchelf is missing; run packaging/debian-deps.sh" >&2; exit 1; }
dest=$out/dlaunch
rm -rf "$dest"
mkdir -p "$dest"
for component in runtime nccl; do
    cmake --install "$build" --prefix "$dest" --component "$component" >/dev/null
done
# One lib/ for the whole bundle, whatever the tree's libdir is.
if [[ -d $dest/lib/x86_64-linux-gnu ]]; then
    mv "$dest"/lib/x86_64-linux-gnu/* "$dest/lib/" && rmdir "$dest/lib/x86_64-linux-gnu"
fi
rm -rf "$dest/share/man" "$dest/include"
# hwloc's own view of the machine, beside dlaunch's (does hwloc see the GPU where PCI sysfs is partial?).
cp "$(command -v lstopo-no-graphics)" "$dest/bin/"
mkdir -p "$dest/check"
cp -r "$root/tests/gpu/." "$dest/check/"
rm -rf "$dest/check/__pycache__" "$dest/check/workers/__pycache__"

# What dlaunch loads with dlopen when it uses it: PMIx (dlaunch-mpi across nodes, doctor), Nettle (proofs and
# digests of several nodes, etcd; base/include/dlaunch/nettle_api.hpp), and hwloc's PCI plugin (how hwloc sees
# GPUs and NICs), found through lib/hwloc (topology/src/discover.cpp).
for name in libpmix.so.2 libnettle.so.8; do
    # awk reads to the end: leaving early would kill ldconfig with SIGPIPE, which pipefail reports.
    path=$(ldconfig -p | awk -v n="$name" '$1 == n && /x86-64/ && !found {print $NF; found = 1}')
    if [[ -z $path ]]; then
        echo "bundle: $name is not installed; run packaging/debian-deps.sh" >&2
        exit 1
    fi
    cp -L "$path" "$dest/lib/$name"
done
hwloc_plugins=$(pkg-config --variable=libdir hwloc)/hwloc
mkdir -p "$dest/lib/hwloc"
cp "$hwloc_plugins/hwloc_pci.so" "$dest/lib/hwloc/"

is_elf() { [[ $(head -c4 "$1" | od -An -c | tr -d ' ') == '177ELF' ]]; }
elves() { find "$dest/bin" "$dest/libexec" "$dest/lib" "$dest/share" -type f | while read -r f; do if is_elf "$f"; then echo "$f"; fi; done; }

# What the programs need, from this machine, except what the target has or must bring itself.
skip='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda|libnvidia-ml|libnccl)\.so'
cuda_libs=$(dirname "$(grep '^CUDA_cudart_LIBRARY:' "$build/CMakeCache.txt" | cut -d= -f2)")
nccl_libs=$(dirname "$(grep '^NCCL_LIBRARY:' "$build/CMakeCache.txt" | cut -d= -f2)")
elves | while read -r f; do
    LD_LIBRARY_PATH=$cuda_libs:$nccl_libs ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
    if [[ $name =~ $skip ]]; then continue; fi
    cp -L "$path" "$dest/lib/$name"
done

# Without debug information (the programs are 100+ MiB with it); RPATH (not RUNPATH): it is also searched
# for the libraries' own dependencies and for dlopen.
elves | while read -r f; do
    strip --strip-debug "$f"

    rel=$(realpath --relative-to="$(dirname "$f")" "$dest/lib")
    patchelf --force-rpath --set-rpath "\$ORIGIN/$rel" "$f"
done

# Nothing may be left unresolved but what the target brings (NCCL, the driver).
missing=$(elves | while read -r f; do ldd "$f" | awk -v f="$f" '/not found/ {print f ": " $1}'; done |
          grep -v -E ': (libnccl|libcuda|libnvidia-ml)\.so' || true)
if [[ -n $missing ]]; then
    echo "bundle: unresolved libraries:" >&2
    echo "$missing" >&2
    exit 1
fi
size_kib=$(du -sk "$dest" | cut -f1)
echo "bundle: $dest: $((size_kib / 1024)) MiB ($(find "$dest" -type f | wc -l) files; limit $limit_mib MiB)"
if ((size_kib > limit_mib * 1024)); then
    echo "bundle: larger than $limit_mib MiB" >&2
    exit 1
fi
