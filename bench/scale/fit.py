#!/usr/bin/env python3
"""How each curve of c10d_agents.py tables grows: the exponent b of time = a * N^b, fitted to every run's point.

    bench/scale/fit.py TABLE... [--from N] [--columns COL,COL,...]

A least-squares line through (log2 N, log2 value) over every row of every block (run) of each TABLE with at
least --from agents (default 256), with its 95 % confidence interval (Student's t, n - 2 degrees of freedom):
b = 1 is linear, and an interval that holds 1 is a curve this machine cannot tell from linear. A column whose
values are not all positive is left out (a CPU figure with the steady rate taken off may be 0 or below).
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from median import blocks  # noqa: E402

# Student's t at 97.5 % for 1..30 degrees of freedom; 1.96 beyond.
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
COLUMNS = "rendezvous_ms,restart_ms,restart_free_ms,leader_restart_cpu_ms,member_restart_cpu_ms"


def option(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def points(path, column, least):
    out = []
    for header, rows in blocks(path):
        for row in rows:
            r = dict(zip(header, row))
            if column in r and int(r["agents"]) >= least:
                out.append((math.log2(int(r["agents"])), float(r[column])))
    return out


def fit(xy):
    """(b, half width of its 95 % interval), or None when it cannot be fitted."""
    n = len(xy)
    if n < 3 or any(v <= 0 for _, v in xy):
        return None
    xs, ys = [x for x, _ in xy], [math.log2(v) for _, v in xy]
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    residual = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    t = T975[n - 3] if n - 2 <= len(T975) else 1.96
    return b, t * math.sqrt(residual / (n - 2) / sxx)


def main():
    least = int(option("--from", "256"))
    columns = option("--columns", COLUMNS).split(",")
    tables = [a for i, a in enumerate(sys.argv[1:], 1) if not a.startswith("--") and sys.argv[i - 1] not in
              ("--from", "--columns")]
    if not tables:
        sys.exit(__doc__)
    for path in tables:
        for column in columns:
            xy = points(path, column, least)
            got = fit(xy)
            if got is None:
                continue
            b, half = got
            verdict = ("faster than linear" if b - half > 1 else "slower than linear" if b + half < 1 else
                       "not told from linear")
            print(f"{os.path.basename(path)}  {column}: exponent {b:.3f} ± {half:.3f} (95 %, {len(xy)} points from "
                  f"{least} agents), {2 ** b:.3f}x per doubling: {verdict}")


if __name__ == "__main__":
    main()
