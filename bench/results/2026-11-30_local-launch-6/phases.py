#!/usr/bin/env python3
"""Runs an instrumented dlaunch (DLT=1 prints 'T <phase> <since main> <abs>' and 'A first-spawn/last-spawn <abs>',
CLOCK_MONOTONIC ms) ROUNDS times; prints the median of each phase's duration, with start (spawn -> main) and the
end (last phase -> reaped by the caller)."""
import os, statistics, subprocess, sys, time
rounds, cmd = int(sys.argv[1]), sys.argv[2:]
env = dict(os.environ, DLT="1")
rows = {}
for i in range(rounds + 5):
    t0 = time.clock_gettime(time.CLOCK_MONOTONIC) * 1e3
    p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    t1 = time.clock_gettime(time.CLOCK_MONOTONIC) * 1e3
    if i < 5: continue
    marks = [("spawned", t0)]
    for line in p.stderr.splitlines():
        f = line.split()
        if f and f[0] == "T": marks.append((f[1], float(f[3])))
        if f and f[0] == "A": marks.append((f[1], float(f[2])))
    marks.sort(key=lambda m: m[1])
    marks.append(("exit seen", t1))
    for (a, ta), (b, tb) in zip(marks, marks[1:]):
        rows.setdefault(f"{a} -> {b}", []).append(tb - ta)
    rows.setdefault("total", []).append(t1 - t0)
for k, v in rows.items():
    print(f"{k:32s} median {statistics.median(v):7.3f} ms  (n={len(v)})")
