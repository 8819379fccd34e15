#!/usr/bin/env python3
"""The scale curves as SVG pictures (no plotting library: Debian's python3 has none by default).

    bench/scale/plot.py OUT_DIR [--agents FILE [--floor FILE]] [--slurm-nodes FILE] [--slurm-group FILE]

The files are what the scale benchmarks wrote: bench/scale/c10d_agents.py's table (its last block is
plotted), and the summary.txt of bench/scale/slurm_nodes.sh and of bench/scale/slurm_group.sh. Writes
c10d_agents.svg (with --agents) and slurm_nodes.svg (with either Slurm file) to OUT_DIR: each
curve on log-log axes with a dotted line of slope 1 through its first point, so that "linear or better"
reads as "never steeper than the dotted line". --floor is c10d_agents.py's table of bench/scale/floor_agent.cpp
(the least N agents can do, on this machine): its rendezvous and restart are drawn beside dlaunch's, and
c10d_vs_floor.svg shows dlaunch's time over the floor's at each N (flat or falling: what dlaunch adds grows no
faster than the machine's own cost of N agents). Tables with restart_free_ms (c10d_agents.py: the restart on
the CPU the agents' steady heartbeats leave free) get that curve, and its ratio when both tables have it.
"""
import math
import os
import re
import sys

W, H, M = 640, 400, 60  # picture, margin
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]


def last_table(path):
    """Rows of the last `agents ...` block of c10d_agents.txt: {column: [values]}."""
    blocks, header, rows = [], None, []
    for line in open(path):
        if line.startswith("agents"):
            if header:
                blocks.append((header, rows))
            header, rows = line.split(), []
        elif header and re.match(r"\s*\d", line) and "FAILED" not in line:
            rows.append(line.split())
    blocks.append((header, rows))
    header, rows = blocks[-1]
    return {h: [float(r[i]) for r in rows] for i, h in enumerate(header[:-1])}


def slurm_series(nodes_file, group_file):
    series = {}
    if os.path.exists(nodes_file):
        for m in re.finditer(r"N=(\d+): step start plain (\d+) ms.*?--dist-launch (\d+) ms", open(nodes_file).read()):
            n, plain, ours = map(int, m.groups())
            series.setdefault("srun, plain step (ms)", []).append((n, plain))
            series.setdefault("srun --dist-launch step (ms)", []).append((n, ours))
    if os.path.exists(group_file):
        for m in re.finditer(r"N=(\d+) (crash|lost): median (\d+) ms", open(group_file).read()):
            n, kind, ms = int(m.group(1)), m.group(2), int(m.group(3))
            name = "agents: group restart after a crash (ms)" if kind == "crash" else \
                "agents: a killed node -> training again (ms)"
            series.setdefault(name, []).append((n, ms))
    return series


def svg(title, xlabel, series, path, guide=True):
    points = [p for s in series.values() for p in s if p[1] > 0]
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    y0, y1 = min(p[1] for p in points), max(p[1] for p in points) * 4
    lx = lambda x: M + (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0) or 1) * (W - 2 * M)
    ly = lambda y: H - M - (math.log(y) - math.log(y0)) / (math.log(y1) - math.log(y0) or 1) * (H - 2 * M)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" '
           f'font-size="11"><rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{M}" y1="{H - M}" x2="{W - M}" y2="{H - M}" stroke="black"/>',
           f'<line x1="{M}" y1="{M}" x2="{M}" y2="{H - M}" stroke="black"/>',
           f'<text x="{W / 2}" y="{H - 20}" text-anchor="middle">{xlabel} (log scale)</text>']
    for x in sorted({p[0] for p in points}):
        out.append(f'<text x="{lx(x):.1f}" y="{H - M + 15}" text-anchor="middle">{x:g}</text>')
    decade = 10 ** math.floor(math.log10(y0))
    steps = (1,) if y1 / y0 > 100 else (1, 2, 5)  # a narrow range (a ratio) gets 1, 2, 5 per decade
    while decade <= y1:
        for tick in (decade * k for k in steps):
            if y0 <= tick <= y1:
                out.append(f'<text x="{M - 5}" y="{ly(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>'
                           f'<line x1="{M}" y1="{ly(tick):.1f}" x2="{W - M}" y2="{ly(tick):.1f}" stroke="#eee"/>')
        decade *= 10
    for i, (name, pts) in enumerate(series.items()):
        pts = sorted(p for p in pts if p[1] > 0)
        colour = COLOURS[i % len(COLOURS)]
        line = " ".join(f"{lx(x):.1f},{ly(y):.1f}" for x, y in pts)
        dash = ' stroke-dasharray="6,3"' if name.startswith("floor") else ""
        out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        for x, y in pts:
            out.append(f'<circle cx="{lx(x):.1f}" cy="{ly(y):.1f}" r="3" fill="{colour}"/>')
        (ax, ay), bx = pts[0], pts[-1][0]  # slope 1 from the first point, clipped at the top
        by = ay * bx / ax if guide else ay
        if by > y1:
            bx, by = y1 * ax / ay, y1
        out.append(f'<line x1="{lx(ax):.1f}" y1="{ly(ay):.1f}" x2="{lx(bx):.1f}" y2="{ly(by):.1f}" '
                   f'stroke="{colour}" stroke-dasharray="2,3"/>')
        out.append(f'<text x="{M + 10}" y="{M + 14 * i - 20}" fill="{colour}">{name}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def option(name):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else ""


def main():
    dest = sys.argv[1]
    os.makedirs(dest, exist_ok=True)
    agents_file = option("--agents")
    if agents_file:
        t = last_table(agents_file)
        n = t["agents"]
        series = {"rendezvous (ms)": list(zip(n, t["rendezvous_ms"])),
                  "group restart (ms)": list(zip(n, t["restart_ms"])),
                  "leader CPU (ms per s)": [(a, c * 1000) for a, c in zip(n, t["leader_cpu_s/s"])],
                  "leader descriptors": list(zip(n, t["leader_fds"]))}
        if "restart_free_ms" in t:  # the restart on the CPU the agents' heartbeats leave (since 2026-11-29, noon)
            series["group restart on free CPU (ms)"] = list(zip(n, t["restart_free_ms"]))
        if "member_restart_cpu_ms" in t:  # flat where the restart is linear (tables since 2026-11-29)
            series["a member's CPU per restart (us)"] = [(a, c * 1000) for a, c in zip(n, t["member_restart_cpu_ms"])]
        floor_file = option("--floor")
        if floor_file:
            f = last_table(floor_file)
            fn = dict(zip(f["agents"], zip(f["rendezvous_ms"], f["restart_ms"])))
            series["floor: rendezvous (ms)"] = [(a, r) for a, (r, _) in fn.items()]
            series["floor: group restart (ms)"] = [(a, r) for a, (_, r) in fn.items()]
            both = [(a, r, s, fn[a]) for a, r, s in zip(n, t["rendezvous_ms"], t["restart_ms"]) if a in fn]
            if not both:
                sys.exit(f"plot.py: {floor_file} and {agents_file} have no number of agents in common")
            ratios = {"rendezvous: dlaunch / floor": [(a, r / fr) for a, r, _, (fr, _) in both],
                      "group restart: dlaunch / floor": [(a, s / fs) for a, _, s, (_, fs) in both]}
            if "restart_free_ms" in t and "restart_free_ms" in f:
                ff = dict(zip(f["agents"], f["restart_free_ms"]))
                ratios["group restart on free CPU: dlaunch / floor"] = [
                    (a, s / ff[a]) for a, s in zip(n, t["restart_free_ms"]) if a in ff]
            svg("dlaunch's time over the floor's (floor_agent.cpp), same machine", "agents", ratios,
                os.path.join(dest, "c10d_vs_floor.svg"), guide=False)
        svg("N agents, torchrun's c10d form, one 2-core machine", "agents", series,
            os.path.join(dest, "c10d_agents.svg"))
    series = slurm_series(option("--slurm-nodes"), option("--slurm-group"))
    if series:
        svg("Slurm: N nodes of the namespaced test cluster, one 2-core machine", "nodes", series,
            os.path.join(dest, "slurm_nodes.svg"))


if __name__ == "__main__":
    main()
