#!/usr/bin/env python3
"""Failure -> ranks running again under dlaunch --requeue, split into dlaunch's part and Slurm's.

Submits examples/sbatch/requeue.sbatch (2 nodes x 2 ranks, rank 3 crashes at step 15 of attempt 0) to the
test cluster (tests/slurm/cluster.sh start; the build staged by tests/slurm/stage.sh BUILD DIR), and reads:
  t_fail     the root-cause worker's exit (attempts.jsonl, from dlaunch's waitpid)
  t_requeue  the failing agent's ledger record, written just before slurm_requeue
  t_pending  the first poll (every 0.1 s) that sees the job PENDING again
  t_eligible the job's EligibleTime (Slurm's BeginTime hold)
  t_running  the workers of attempt 1 start (the header dlaunch writes into rank_0's log)
With --release, the hold is lifted with `scontrol update StartTime=now` as soon as the job is pending.
    bench/requeue_latency.py STAGE_DIR [--release]
"""
import datetime
import json
import os
import re
import subprocess
import sys
import time

stage = sys.argv[1]
release = "--release" in sys.argv
base = os.environ.get("DLAUNCH_SLURM_BASE", "/var/lib/dlaunch-test-cluster")
env = dict(os.environ, SLURM_CONF=f"{base}/slurm.conf", PYTHON_EXEC="/usr/bin/python3")
work = f"{base}/shared/out/requeue-bench-{os.getpid()}"
os.makedirs(work)
os.chmod(work, 0o777)
extra = dict(DLAUNCH=f"{stage}/dlaunch", EXAMPLE=f"{stage}/examples/ddp_checkpoint.py", WORKDIR=work,
             TRAIN_ARGS="--crash-at-step 15 --crash-rank 3 --crash-on-attempt 0")
job = subprocess.run(["sbatch", "--parsable", f"--output={work}/job.out", "--export=ALL",
                      f"{stage}/examples/sbatch/requeue.sbatch"], capture_output=True, text=True,
                     env=dict(env, **extra), check=True).stdout.strip()


def fields():
    out = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, env=env).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


t_pending = eligible = None
while True:
    f = fields()
    if f.get("JobState") == "PENDING" and f.get("Restarts") == "1":
        if t_pending is None:
            t_pending = time.time()
            eligible = datetime.datetime.fromisoformat(f["EligibleTime"]).timestamp()
        busy = "completing" in subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True,
                                              env=env).stdout.lower()
        busy = busy or "COMPLETING" in subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True,
                                                      text=True, env=env).stdout
        if release and f.get("Reason") == "BeginTime" and not busy and time.time() - t_pending > 7:
            subprocess.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], env=env, capture_output=True)
    if f.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED"):
        break
    time.sleep(0.1)
jobdir = f"{work}/dlaunch-logs/{job}"
rec = [json.loads(line) for line in open(f"{jobdir}/attempts.jsonl")][0]
t_fail = min(x["epoch"] for x in rec["failures"] if x["root_cause"])
t_requeue = rec["epoch"]
head = re.search(r"==== dlaunch: job \d+, attempt 1: rank 0 .* ==== (\S+)Z", open(f"{jobdir}/rank_0/stdout.log").read())
t_running = datetime.datetime.fromisoformat(head.group(1)).replace(tzinfo=datetime.timezone.utc).timestamp()
print(f"job {job} ({f['JobState']}), hold {'released' if release else 'kept'}")
print(f"  failure -> requeue call (dlaunch: stop the node's workers, summary, ledger): {t_requeue - t_fail:8.3f} s")
print(f"  requeue call -> pending again (Slurm: ending the attempt, KillWait=5):     {t_pending - t_requeue:8.3f} s")
print(f"  pending -> eligible (Slurm's BeginTime hold):                             {eligible - t_pending:8.3f} s")
print(f"  pending -> workers of attempt 1 running (Slurm start + dlaunch start):     {t_running - t_pending:8.3f} s")
print(f"  total failure -> running again:                                           {t_running - t_fail:8.3f} s")
