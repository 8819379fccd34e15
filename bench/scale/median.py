#!/usr/bin/env python3
"""The median of each column over every block of a c10d_agents.py table (one block per run), row by row.

    bench/scale/median.py TABLE > TABLE_median.txt

A block starts at a header line ("agents ..."); rows that say FAILED are left out. The last column (the agents'
exit codes) is the first run's. Only columns every block has are kept (older runs have fewer), in the first
block's order.
"""
import re
import statistics
import sys


def blocks(path):
    """[(header, rows)] of the table, each row a list of its fields."""
    out = []
    for line in open(path):
        if line.startswith("agents"):
            out.append((line.split(), []))
        elif out and re.match(r"\s*\d", line) and "FAILED" not in line:
            out[-1][1].append(line.split())
    return out


def shown(header, value):
    if header == "agents":
        return f"{int(value):6d}"
    if header.endswith("cpu_s/s"):
        return f"{value:.3f}"
    return f"{value:.2f}" if header.endswith("cpu_ms") else f"{value:.1f}"


def main():
    runs = blocks(sys.argv[1])
    if not runs:
        sys.exit(f"median.py: {sys.argv[1]} has no table (no line starts with 'agents')")
    header = [h for h in runs[0][0][:-1] if all(h in r[0] for r in runs)]
    print("  ".join(header + [runs[0][0][-1]]))
    for i, first in enumerate(runs[0][1]):
        rows = [dict(zip(h, row)) for h, rows in runs for row in rows[i:i + 1]]
        rows = [r for r in rows if r["agents"] == first[0]]
        values = [shown(h, statistics.median(float(r[h]) for r in rows)) for h in header]
        print("  ".join(values + [" ".join(first[len(runs[0][0]) - 1:])]))


if __name__ == "__main__":
    main()
