#!/usr/bin/env python3
"""Two dlaunch builds and the floor, alternating, at one number of agents: the group restart of each, and each
one's ratio to the floor measured in the same run.

    bench/scale/ab.py A B [--runs 10] [--agents 1024] [--settle-s 4] [--out DIR] [--build-dir DIR]

A and B are each a dlaunch binary or a git commit of this repository; a commit is built once (RelWithDebInfo,
as the packages are; no NCCL; target dlaunch only) in a worktree under --build-dir (default
~/.cache/dlaunch-ab) and reused. A run is one c10d_agents.py pass of each of A, B and the floor at --agents, in
an order that turns around every run (A B floor, floor B A, ...), so that a drift of the machine falls on all
three alike. Prints every run's restart times and ratios, then per build the median and range of its restart
and of its ratio to the floor, and B's median against A's. The agents' log directories go under TMPDIR, whose
file system the summary names: each restart makes four entries per agent there (docs/scale.md says what a
disk costs), so compare runs on one file system, a tmpfs (TMPDIR=/dev/shm) for the launcher's own cost. With
--out DIR, each pass's c10d_agents.py output goes to DIR/RUN_NAME.txt and the summary to DIR/summary.txt.
"""
import os
import statistics
import subprocess
import sys
import tempfile

if "-h" in sys.argv or "--help" in sys.argv:
    sys.exit(print(__doc__.strip()))
if len(sys.argv) < 3 or sys.argv[1].startswith("-") or sys.argv[2].startswith("-"):
    sys.exit("usage: ab.py A B [options]: two dlaunch binaries or commits first (--help says more)")
here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(os.path.dirname(here))


def option(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


runs = int(option("--runs", "10"))
agents = int(option("--agents", "1024"))
settle = option("--settle-s", "4")
out = option("--out", None)
cache = os.path.expanduser(option("--build-dir", "~/.cache/dlaunch-ab"))


def built(what):
    """A binary as given, or a commit built once in its own worktree."""
    if os.path.isfile(what) and os.access(what, os.X_OK):
        return os.path.abspath(what), what
    sha = subprocess.run(["git", "-C", repo, "rev-parse", "--verify", what + "^{commit}"], check=True,
                         capture_output=True, text=True).stdout.strip()
    tree, build = f"{cache}/{sha[:12]}", f"{cache}/{sha[:12]}-build"
    binary = f"{build}/launcher/dlaunch"
    if not os.path.exists(binary):
        if not os.path.exists(tree):
            subprocess.run(["git", "-C", repo, "worktree", "add", "--detach", tree, sha], check=True)
        subprocess.run(["cmake", "-S", tree, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DDLAUNCH_NCCL=OFF",
                        "-DDLAUNCH_BUILD_TESTS=OFF"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", build, "-j", str(os.cpu_count()), "--target", "dlaunch"], check=True)
    return binary, sha[:12]


def restart_ms(binary, name, run):
    """One c10d_agents.py pass; its restart at `agents`, in ms (None when it failed)."""
    cmd = [sys.executable, f"{here}/c10d_agents.py", binary, "--agents", str(agents), "--settle-s", settle]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if out:
        with open(f"{out}/{run:02d}_{name}.txt", "w") as f:
            f.write(result.stdout + result.stderr)
    for line in result.stdout.splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[0] == str(agents) and fields[1] != "FAILED":
            return float(fields[2])
    print(f"run {run} {name}: no restart measured:\n{result.stdout[-800:]}{result.stderr[-800:]}", flush=True)
    return None


def spread(values):
    return f"median {statistics.median(values):8.2f}  range {min(values):.2f}-{max(values):.2f}"


def main():
    if out:
        os.makedirs(out, exist_ok=True)
    (a, a_name), (b, b_name) = built(sys.argv[1]), built(sys.argv[2])
    names = {"A": a_name, "B": b_name, "floor": "floor"}
    binaries = {"A": a, "B": b, "floor": "floor"}
    times = {k: [] for k in names}
    ratios = {"A": [], "B": []}
    tmp = tempfile.gettempdir()
    fs = subprocess.run(["stat", "-f", "-c", "%T", tmp], capture_output=True, text=True).stdout.strip()
    lines = [f"A = {a_name} ({a}), B = {b_name} ({b}); {agents} agents, settle {settle} s, {runs} runs; "
             f"the agents' log directories in {tmp} ({fs})",
             "run  order          A_ms     B_ms  floor_ms   A/floor  B/floor"]
    print("\n".join(lines), flush=True)
    for run in range(runs):
        order = ["A", "B", "floor"] if run % 2 == 0 else ["floor", "B", "A"]
        got = {k: restart_ms(binaries[k], k, run) for k in order}
        if None in got.values():
            continue
        for k, v in got.items():
            times[k].append(v)
        for k in ratios:
            ratios[k].append(got[k] / got["floor"])
        line = (f"{run:3d}  {' '.join(order):13} {got['A']:8.0f} {got['B']:8.0f} {got['floor']:9.0f}  "
                f"{ratios['A'][-1]:8.2f} {ratios['B'][-1]:8.2f}")
        lines.append(line)
        print(line, flush=True)
    if not times["floor"]:
        sys.exit("ab.py: no run measured all three")
    summary = [f"{k} ({names[k]}) restart ms: {spread(times[k])}" for k in names]
    summary += [f"{k} ({names[k]}) ratio to the floor: {spread(ratios[k])}" for k in ratios]
    summary.append(f"B's median over A's: {statistics.median(times['B']) / statistics.median(times['A']):.3f}; "
                   f"B faster than A in {sum(x < y for x, y in zip(times['B'], times['A']))} of "
                   f"{len(times['A'])} runs")
    print("\n".join(summary))
    if out:
        with open(f"{out}/summary.txt", "w") as f:
            f.write("\n".join(lines + summary) + "\n")


if __name__ == "__main__":
    main()
