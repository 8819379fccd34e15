#!/usr/bin/env python3
"""Failure -> every rank of the next attempt exec'd, for agents restarting as a group inside a Slurm
allocation (three nodes of the test cluster, two workers each, no requeue).

Needs the test cluster (tests/slurm/cluster.sh start) and a staged build (tests/slurm/stage.sh build DIR).
    bench/group_restart.py STAGE_DIR [--reps N] [--heartbeat-timeout S]

Workers are bench/restart_worker.cpp (built here; no Python in the measured path). Each logs
"start <CLOCK_MONOTONIC ns> <attempt> <local rank> <pid> <rank>" to a log on the shared directory as its
first action; every node of the cluster is a namespace of this host, so CLOCK_MONOTONIC is one clock.
  crash  rank 3 (on the second node) waits for all 6 ranks, logs "fail <ns>" and exits 1; the others block
         in pause() (SIGTERM kills them at once). t_fail is that line.
  lost   no rank fails: once all 6 ranks run, this script kills the third node (cluster.sh kill: its agent,
         workers and link) and takes t_fail from CLOCK_MONOTONIC just before the kill. The group continues on
         two nodes (--nnodes 2:3), world size 4.
Reported per repetition: latency = the last start of attempt 1 - t_fail (every rank back), first = the
first start of attempt 1 - t_fail.
"""
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "slurm"))
from slurmtest import CLUSTER, ENV, NODES, all_idle, ended, make_outdir, wait_for, wait_job  # noqa: E402

stage = sys.argv[1]
reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 5
heartbeat = sys.argv[sys.argv.index("--heartbeat-timeout") + 1] if "--heartbeat-timeout" in sys.argv else "10"
worker = f"{stage}/restart_worker"
subprocess.run(["g++", "-O2", "-o", worker, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                         "restart_worker.cpp")], check=True)


def starts(log, attempt):
    with open(log) as f:
        return [int(m.group(1)) for m in re.finditer(rf"^start (\d+) {attempt} ", f.read(), re.M)]


def one(kind, rep):
    work = make_outdir(f"group-bench-{kind}-{rep}-")
    log = f"{work}/bench.log"
    agent = [f"{stage}/dlaunch", "--nproc-per-node", "2", "--max-restarts", "1", "--grace", "5"]
    if kind == "lost":
        agent += ["--nnodes", "2:3", "--heartbeat-timeout", heartbeat]
    step = " ".join(["srun", "--no-kill", "--ntasks-per-node=1", *agent, "--no-python", worker])
    env = dict(ENV, BENCH_LOG=log, BENCH_NPROC="6", BENCH_FAIL_RANK="3" if kind == "crash" else "-1")
    wait_for("every node idle", all_idle, 120)
    job = subprocess.run(["sbatch", "--parsable", f"-N{len(NODES)}", "--no-kill", f"--chdir={work}",
                          f"--output={work}/job.out", "--export=ALL", "--wrap", step],
                         capture_output=True, text=True, env=env, check=True).stdout.strip()
    t_fail = None
    try:
        wait_for("attempt 0 running", lambda: os.path.exists(log) and len(starts(log, 0)) == 6, 120)
        if kind == "lost":
            time.sleep(0.5)
            t_fail = time.monotonic_ns()
            subprocess.run([CLUSTER, "kill", NODES[2]], check=True)
        f = wait_job(job, "the job ended", ended)
    finally:
        if kind == "lost":
            subprocess.run([CLUSTER, "start"], check=True, capture_output=True)
    assert f.get("JobState") == "COMPLETED", open(f"{work}/job.out").read()
    if t_fail is None:
        t_fail = int(re.search(r"^fail (\d+)", open(log).read(), re.M).group(1))
    back = starts(log, 1)
    assert len(back) == (6 if kind == "crash" else 4), open(log).read()
    return (max(back) - t_fail) / 1e6, (min(back) - t_fail) / 1e6


for kind in ("crash", "lost"):
    rows = [one(kind, r) for r in range(reps)]
    for r, (last, first) in enumerate(rows):
        print(f"{kind} rep {r}: every rank back {last:.0f} ms, first rank {first:.0f} ms", flush=True)
    lat = [r[0] for r in rows]
    print(f"{kind}: median {statistics.median(lat):.0f} ms, min {min(lat):.0f}, max {max(lat):.0f} "
          f"(heartbeat timeout {heartbeat} s)" if kind == "lost" else
          f"{kind}: median {statistics.median(lat):.0f} ms, min {min(lat):.0f}, max {max(lat):.0f}", flush=True)
