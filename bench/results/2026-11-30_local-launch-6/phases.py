#!/usr/bin/env python3
"""Runs a dlaunch built with phases.patch (DLT=1 prints 'T <step> <ms since main> <abs ms>' and
'A first-spawn|last-spawn <abs ms>', CLOCK_MONOTONIC) ROUNDS times after 5 warm-up runs, and prints the median
of each step, from the caller's spawn ("spawned") to the exit it sees ("exit seen").

    phases.py ROUNDS CMD [ARGS...]"""
import os
import statistics
import subprocess
import sys
import time


def marks_of(stderr, spawned, exited):
    marks = [("spawned", spawned)]
    for line in stderr.splitlines():
        f = line.split()
        if f and f[0] == "T":
            marks.append((f[1], float(f[3])))
        elif f and f[0] == "A":
            marks.append((f[1], float(f[2])))
    marks.sort(key=lambda m: m[1])
    return marks + [("exit seen", exited)]


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    rounds, cmd = int(sys.argv[1]), sys.argv[2:]
    env = dict(os.environ, DLT="1")
    steps = {}
    for i in range(rounds + 5):
        t0 = time.clock_gettime(time.CLOCK_MONOTONIC) * 1e3
        p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        t1 = time.clock_gettime(time.CLOCK_MONOTONIC) * 1e3
        if i < 5:
            continue
        marks = marks_of(p.stderr, t0, t1)
        for (a, ta), (b, tb) in zip(marks, marks[1:]):
            steps.setdefault(f"{a} -> {b}", []).append(tb - ta)
        steps.setdefault("total", []).append(t1 - t0)
    for step, ms in steps.items():
        print(f"{step:32s} median {statistics.median(ms):7.3f} ms  (n={len(ms)})")


if __name__ == "__main__":
    main()
