#!/usr/bin/env python3
"""Times commands in alternation: ROUNDS rounds, each command once per round (in reverse order every other
round), so that a noisy VM's drift falls on every command alike, which hyperfine's batches do not do.
Prints each command's median and quartiles of wall time (spawn to reaped), in ms.

    bench/alternate.py ROUNDS 'CMD ARGS...' 'CMD ARGS...' ...

Commands are split on spaces and run without a shell (the first word a path); output goes to /dev/null."""
import os
import statistics
import sys
import time


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    rounds, cmds = int(sys.argv[1]), [c.split() for c in sys.argv[2:]]
    null = os.open(os.devnull, os.O_WRONLY)
    actions = [(os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)]

    def once(cmd):
        start = time.perf_counter_ns()
        os.waitpid(os.posix_spawn(cmd[0], cmd, os.environ, file_actions=actions), 0)
        return (time.perf_counter_ns() - start) / 1e6

    for _ in range(10):  # warm-up
        for cmd in cmds:
            once(cmd)
    times = [[] for _ in cmds]
    for i in range(rounds):
        for k in (range(len(cmds)) if i % 2 == 0 else reversed(range(len(cmds)))):
            times[k].append(once(cmds[k]))
    for text, t in zip(sys.argv[2:], times):
        t.sort()
        q = lambda p: t[int(p * (len(t) - 1))]  # noqa: E731
        print(f"{text[:58]:58} median {statistics.median(t):.3f}  p25 {q(.25):.3f}  p75 {q(.75):.3f} ms")


if __name__ == "__main__":
    main()
