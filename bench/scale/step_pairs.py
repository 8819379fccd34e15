#!/usr/bin/env python3
"""`srun --dist-launch /bin/true` against plain `srun /bin/true` as steps of the allocation it runs in, in pairs.

    salloc -N N -n N bench/scale/step_pairs.py N [RUNS (default 15)]

Each pair runs both steps one after the other, the order swapped every pair, after one pair not counted: a drift
of the machine (64 slurmstepds on two cores) falls on both alike, where hyperfine's batches (all plain steps, then
all --dist-launch ones, as slurm_nodes.sh times them) put it on one. Prints each step's median, mean and standard
deviation in ms, and the ratio of the medians: what the plugin adds to a step's start and end.
"""
import statistics
import subprocess
import sys
import time

if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
    sys.exit(__doc__.strip() if len(sys.argv) < 2 else print(__doc__.strip()))
n, runs = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 15
if runs < 2:
    sys.exit("step_pairs.py: give RUNS of 2 or more (a median and a deviation of the pairs)")
steps = {"plain": ["srun", "--overlap", f"-N{n}", f"-n{n}", "/bin/true"],
         "dist-launch": ["srun", "--overlap", f"-N{n}", f"-n{n}", "--dist-launch", "/bin/true"]}
times = {name: [] for name in steps}
for i in range(runs + 1):
    for name, cmd in (list(steps.items()) if i % 2 == 0 else list(reversed(steps.items()))):
        start = time.monotonic()
        subprocess.run(cmd, check=True)
        if i:
            times[name].append((time.monotonic() - start) * 1000)
for name, t in times.items():
    print(f"N={n} {name}: median {statistics.median(t):.0f} ms, mean {statistics.mean(t):.0f} ± "
          f"{statistics.stdev(t):.0f} ms ({runs} runs)")
print(f"N={n} ratio of medians: {statistics.median(times['dist-launch']) / statistics.median(times['plain']):.3f}")
