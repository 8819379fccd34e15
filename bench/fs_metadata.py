#!/usr/bin/env python3
"""What the file system under a directory charges for what a launch makes there: a run directory with its
attempt directory and one directory per rank (the env contract's attempt_<n>/<local_rank>/, torchrun's
layout), made and then removed, and an empty file created; the median of ROUNDS, in microseconds.

    bench/fs_metadata.py [ROUNDS] DIR...        e.g. bench/fs_metadata.py 50 /tmp /dev/shm

dlaunch's temporary run directory is made under $TMPDIR (else /tmp): this tells what a launch of N ranks
pays there beside its fork/exec."""
import os
import shutil
import statistics
import sys
import tempfile
import time


def run_dir_made_and_removed(base, ranks):
    start = time.perf_counter_ns()
    d = tempfile.mkdtemp(dir=base, prefix="dlaunch-bench-")
    os.mkdir(d + "/attempt_0")
    for i in range(ranks):
        os.mkdir(f"{d}/attempt_0/{i}")
    made = time.perf_counter_ns()
    shutil.rmtree(d)
    return (made - start) / 1e3, (time.perf_counter_ns() - made) / 1e3


def file_created(base):
    d = tempfile.mkdtemp(dir=base, prefix="dlaunch-bench-")
    start = time.perf_counter_ns()
    with open(d + "/f", "w"):
        pass
    took = (time.perf_counter_ns() - start) / 1e3
    shutil.rmtree(d)
    return took


def main():
    args = sys.argv[1:]
    rounds = int(args.pop(0)) if args and args[0].isdigit() else 50
    if not args:
        raise SystemExit(__doc__)
    for base in args:
        for ranks in (8, 256):
            times = [run_dir_made_and_removed(base, ranks) for _ in range(rounds)]
            made = statistics.median(t[0] for t in times)
            removed = statistics.median(t[1] for t in times)
            print(f"{base}: run directory of {ranks} ranks: made {made:.0f} us ({made / (ranks + 2):.1f} per "
                  f"directory), removed {removed:.0f} us")
        print(f"{base}: an empty file created: {statistics.median(file_created(base) for _ in range(rounds)):.0f} us")


if __name__ == "__main__":
    main()
