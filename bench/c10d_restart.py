#!/usr/bin/env python3
"""torchrun's c10d form on the same three hosts as bench/group_restart.py: failure -> every rank of the next
round exec'd, for comparison with dlaunch's restart inside the allocation; with --launcher dlaunch the same
command line run by dlaunch's agents by hand (their group restarts every node together).

Needs the test cluster (tests/slurm/cluster.sh start) and a staged build (tests/slurm/stage.sh build DIR).
    bench/c10d_restart.py STAGE_DIR [--reps N] [--launcher torchrun|dlaunch]

Three torchrun agents (Debian's torch 1.13, through bench/torchrun_patched.py), one per node, started by hand
in the nodes' namespaces (cluster.sh exec), --nnodes 3 --nproc_per_node 2 --rdzv_backend c10d
--max_restarts 1, workers bench/restart_worker.cpp; rank 3 exits 1 once all six ranks run (its "fail" line
is t_fail). Reported: the sixth start after t_fail - t_fail (every rank back) and the first. Each node's
agent counts its own restarts: the ranks of the nodes whose workers did not fail start the next round
with TORCHELASTIC_RESTART_COUNT 0 again (printed as "restart counts"), and then block, so the script stops
the agents once six ranks are back.
"""
import os
import re
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "slurm"))
from slurmtest import CLUSTER, HOSTS, NODES, PYTHON, make_outdir, wait_for  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
stage = sys.argv[1]
reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 3
launcher = sys.argv[sys.argv.index("--launcher") + 1] if "--launcher" in sys.argv else "torchrun"
assert launcher in ("torchrun", "dlaunch"), "--launcher torchrun|dlaunch"
worker = f"{stage}/restart_worker"
subprocess.run(["g++", "-O2", "-o", worker, os.path.join(here, "restart_worker.cpp")], check=True)
shutil.copy(os.path.join(here, "torchrun_patched.py"), f"{stage}/torchrun_patched.py")


def lines(log):
    with open(log) as f:
        return f.read()


def one(rep):
    work = make_outdir(f"c10d-bench-{rep}-")
    log = f"{work}/bench.log"
    agents = []
    for n in NODES:
        agent = [PYTHON, f"{stage}/torchrun_patched.py"] if launcher == "torchrun" else \
            ["DLAUNCH_RDZV_SECRET=bench-secret-of-this-run", f"{stage}/dlaunch", "--grace", "5"]
        cmd = [CLUSTER, "exec", n, "env", f"BENCH_LOG={log}", "BENCH_NPROC=6", "BENCH_FAIL_RANK=3", *agent,
               "--nnodes", "3", "--nproc_per_node", "2", "--rdzv_backend", "c10d",
               "--rdzv_endpoint", f"{HOSTS[NODES[0]]}:{29400 + rep}", "--rdzv_id", f"bench{rep}",
               "--max_restarts", "1", "--no_python", worker]
        agents.append(subprocess.Popen(cmd, stdout=open(f"{work}/{n}.log", "w"), stderr=subprocess.STDOUT))
    try:
        def back():
            text = lines(log) if os.path.exists(log) else ""
            m = re.search(r"^fail (\d+)", text, re.M)
            return m and len(re.findall(r"^start ", text[m.end():], re.M)) >= 6 and text
        text = wait_for("six ranks back after the failure", back, 120)
    finally:
        for a in agents:
            a.kill()
        subprocess.run(["pkill", "-f", worker], check=False)
        subprocess.run(["pkill", "-f", f"{stage}/dlaunch "], check=False)
    m = re.search(r"^fail (\d+)", text, re.M)
    after = [(int(t), int(c)) for t, c in re.findall(r"^start (\d+) (-?\d+) ", text[m.end():], re.M)][:6]
    t_fail = int(m.group(1))
    return (max(t for t, _ in after) - t_fail) / 1e6, (min(t for t, _ in after) - t_fail) / 1e6, \
        sorted(c for _, c in after)


rows = [one(r) for r in range(reps)]
for r, (last, first, counts) in enumerate(rows):
    print(f"{launcher} c10d rep {r}: every rank back {last:.0f} ms, first rank {first:.0f} ms, "
          f"restart counts {counts}", flush=True)
lat = [r[0] for r in rows]
print(f"{launcher} c10d: median {statistics.median(lat):.0f} ms, min {min(lat):.0f}, max {max(lat):.0f}", flush=True)
