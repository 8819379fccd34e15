#!/usr/bin/env python3
"""When the restarted workers start, from a kept c10d_agents.py run's bench.log: the first, the 10th, 50th
and 90th percentiles and the last start of attempt 1, in ms after the failure. A first start long after the
failure is time spent before any worker could start (the group's stop and decision); the spread after it is
the starting itself.

    bench/scale/c10d_agents.py DLAUNCH --agents 1024 --keep    (prints the kept directory)
    bench/scale/restart_starts.py KEPT/n1024/bench.log
"""
import sys

if "-h" in sys.argv or "--help" in sys.argv:
    sys.exit(print(__doc__.strip()))
if len(sys.argv) != 2:
    sys.exit("usage: restart_starts.py KEPT/nN/bench.log (--help says more)")
fail, starts = None, []
for line in open(sys.argv[1]):
    fields = line.split()  # "fail NS", "start NS ATTEMPT ..."; other lines are not the workers'
    if fields[:1] == ["fail"] and len(fields) > 1:
        fail = int(fields[1])
    elif fields[:1] == ["start"] and len(fields) > 2 and fields[2] == "1":
        starts.append(int(fields[1]))
if fail is None or not starts:
    sys.exit("restart_starts.py: no failure, or no start of attempt 1, in " + sys.argv[1])
ms = sorted((s - fail) / 1e6 for s in starts)
at = lambda p: ms[int(p * (len(ms) - 1))]  # noqa: E731
print(f"{len(ms)} starts of attempt 1, ms after the failure: first {ms[0]:.1f}  p10 {at(.1):.1f}  "
      f"p50 {at(.5):.1f}  p90 {at(.9):.1f}  last {ms[-1]:.1f}")
