#!/usr/bin/env python3
"""Spawn -> main() of programs that print phases.patch's DLT=1 mark ('T main <ms> <abs ms>' on stderr,
CLOCK_MONOTONIC), in alternation (each command once per round, the order reversed every other round), ROUNDS
rounds after 5 warm-up rounds; prints each command's median.

    start_alt.py ROUNDS 'CMD ARGS' 'CMD ARGS' ..."""
import os
import statistics
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    rounds, cmds = int(sys.argv[1]), [c.split() for c in sys.argv[2:]]
    env = dict(os.environ, DLT="1")
    seen = [[] for _ in cmds]
    for r in range(rounds + 5):
        for i in list(range(len(cmds)))[:: 1 if r % 2 else -1]:
            t0 = time.clock_gettime(time.CLOCK_MONOTONIC) * 1e3
            p = subprocess.run(cmds[i], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            main_at = [float(line.split()[3]) for line in p.stderr.splitlines() if line.startswith("T main ")]
            if r >= 5 and main_at:
                seen[i].append(main_at[0] - t0)
    for cmd, ms in zip(cmds, seen):
        print(f"{' '.join(cmd)[:60]:60s} spawn -> main median {statistics.median(ms):.3f} ms (n={len(ms)})")


if __name__ == "__main__":
    main()
