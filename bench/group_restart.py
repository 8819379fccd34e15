#!/usr/bin/env python3
"""Failure -> every rank of the next attempt exec'd, for agents restarting as a group inside a Slurm
allocation (every node of the test cluster, N of them, --nproc workers each, default 2), and for the job
requeued by the group when fewer than MIN nodes are left.

Needs the test cluster (tests/slurm/cluster.sh start [--nodes N]; three nodes unless told) and a staged build
(tests/slurm/stage.sh build DIR).
    bench/group_restart.py STAGE_DIR [--reps N] [--heartbeat-timeout S] [--kinds crash,lost,requeue]
                           [--nproc P] [--no-health-check]
The agents restart at once (--restart-backoff 0: the mechanism, as bench/restart_latency.sh measures it);
--no-health-check leaves out the health gate every node runs before each attempt (for an A/B).

Workers are bench/restart_worker.cpp (built here; no Python in the measured path). Each logs
"start <CLOCK_MONOTONIC ns> <attempt> <local rank> <pid> <rank>" to a log on the shared directory as its
first action; every node of the cluster is a namespace of this host, so CLOCK_MONOTONIC is one clock.
  crash  rank P (the first on the second node) waits for all N*P ranks, logs "fail <ns>" and exits 1; the others
         block in pause() (SIGTERM kills them at once). t_fail is that line.
  lost   no rank fails: once all N*P ranks run, this script kills the last node (cluster.sh kill: its agent,
         workers and link) and takes t_fail from CLOCK_MONOTONIC just before the kill. The group continues on
         N-1 nodes (--nnodes N-1:N), world size (N-1)*P.
  requeue  as lost, but a job of N-1 nodes with --requeue and a fixed --nnodes: the group requeues the job
         with the killed (second) node excluded, and Slurm starts it again on the N-1 nodes left. Slurm's share
         (from node 0's ledger record of the attempt to the first start of attempt 1: slurmctld waits
         until the dead node is DOWN, SlurmdTimeout, then holds the job cred_expire) is given apart.
Reported per repetition: latency = the last start of attempt 1 - t_fail (every rank back), first = the
first start of attempt 1 - t_fail.
"""
import json
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
kinds = sys.argv[sys.argv.index("--kinds") + 1].split(",") if "--kinds" in sys.argv else ["crash", "lost", "requeue"]
nproc = int(sys.argv[sys.argv.index("--nproc") + 1]) if "--nproc" in sys.argv else 2
worker = f"{stage}/restart_worker"
subprocess.run(["g++", "-O2", "-o", worker, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                         "restart_worker.cpp")], check=True)


def starts(log, attempt):
    with open(log) as f:
        return [int(m.group(1)) for m in re.finditer(rf"^start (\d+) {attempt} ", f.read(), re.M)]


def one(kind, rep):
    work = make_outdir(f"group-bench-{kind}-{rep}-")
    log = f"{work}/bench.log"
    agent = [f"{stage}/dlaunch", "--nproc-per-node", str(nproc), "--max-restarts", "1", "--grace", "5",
             "--restart-backoff", "0", *(["--no-health-check"] if "--no-health-check" in sys.argv else [])]
    nodes = len(NODES)
    victim, before, after = NODES[-1], nodes * nproc, (nodes if kind == "crash" else nodes - 1) * nproc
    if kind == "lost":
        agent += ["--nnodes", f"{nodes - 1}:{nodes}", "--heartbeat-timeout", heartbeat]
    if kind == "requeue":
        agent += ["--requeue", "--log-dir", f"{work}/logs", "--heartbeat-timeout", heartbeat]
        nodes, victim = nodes - 1, NODES[1]
        before = after = nodes * nproc
    step = " ".join(["srun", "--no-kill", "--ntasks-per-node=1", *agent, "--no-python", worker])
    env = dict(ENV, BENCH_LOG=log, BENCH_NPROC=str(before),
               BENCH_FAIL_RANK=str(nproc) if kind == "crash" else "-1")
    wait_for("every node idle", all_idle, 120)
    job = subprocess.run(["sbatch", "--parsable", f"-N{nodes}", "--no-kill", "--requeue", f"--chdir={work}",
                          "--open-mode=append", f"--output={work}/job.out", "--export=ALL", "--wrap", step],
                         capture_output=True, text=True, env=env, check=True).stdout.strip()
    t_fail = t_fail_wall = None
    try:
        wait_for("attempt 0 running", lambda: os.path.exists(log) and len(starts(log, 0)) == before, 120)
        if kind != "crash":
            time.sleep(0.5)
            t_fail, t_fail_wall = time.monotonic_ns(), time.time()
            subprocess.run([CLUSTER, "kill", victim], check=True)
        f = wait_job(job, "the job ended", ended, timeout=300)
    finally:
        if kind != "crash":
            subprocess.run([CLUSTER, "start"], check=True, capture_output=True)
    assert f.get("JobState") == "COMPLETED", open(f"{work}/job.out").read()
    if t_fail is None:
        t_fail = int(re.search(r"^fail (\d+)", open(log).read(), re.M).group(1))
    back = starts(log, 1)
    assert len(back) == after, open(log).read()
    row = [(max(back) - t_fail) / 1e6, (min(back) - t_fail) / 1e6]
    if kind == "requeue":
        assert f["Restarts"] == "1" and victim in f["ExcNodeList"], f
        with open(f"{work}/logs/{job}/attempts.jsonl") as fl:
            decided = json.loads(fl.readline())["epoch"]
        row.append((decided - t_fail_wall) * 1e3)  # dlaunch's share: the failure -> the requeue's record
    return row


for kind in kinds:
    rows = [one(kind, r) for r in range(reps)]
    for r, row in enumerate(rows):
        print(f"{kind} rep {r}: every rank back {row[0]:.0f} ms, first rank {row[1]:.0f} ms" +
              (f", dlaunch's share (failure -> requeued) {row[2]:.0f} ms, Slurm's the rest" if len(row) > 2 else ""),
              flush=True)
    lat = [r[0] for r in rows]
    print(f"{kind}: median {statistics.median(lat):.0f} ms, min {min(lat):.0f}, max {max(lat):.0f} "
          f"(heartbeat timeout {heartbeat} s)" if kind != "crash" else
          f"{kind}: median {statistics.median(lat):.0f} ms, min {min(lat):.0f}, max {max(lat):.0f}", flush=True)
