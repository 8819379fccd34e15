"""Writes this rank's environment, node and CPU affinity as JSON to OUTDIR/rank<RANK>.json, with what the node
itself says: its hostname, the address MASTER_ADDR resolves to there, the CPUs the kernel lets this process
use (Cpus_allowed_list) and the cpuset cgroup Slurm put it in, with that step cgroup's CPUs."""
import json
import os
import re
import socket
import sys


def cpu_list(text):
    cpus = []
    for part in filter(None, text.strip().split(",")):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def cpuset_cgroup():
    """This process's cpuset cgroup (as the node's cgroup namespace shows it) and its step's CPUs."""
    with open("/proc/self/cgroup") as f:
        path = next((l.split(":", 2)[2].strip() for l in f if l.split(":")[1] == "cpuset"), "")
    step = re.sub(r"(/step_[^/]+)/.*$", r"\1", path)  # the step's cgroup, above any task_N
    try:
        with open(f"/sys/fs/cgroup/cpuset{step}/cpuset.cpus") as f:
            return path, cpu_list(f.read())
    except OSError:
        return path, []


out = sys.argv[1]
rank = os.environ.get("RANK", os.environ.get("PADDLE_TRAINER_ID"))
with open("/proc/self/status") as f:
    allowed = cpu_list(next(l.split(":")[1] for l in f if l.startswith("Cpus_allowed_list")))
master = os.environ.get("MASTER_ADDR")
try:
    master_ip = socket.gethostbyname(master) if master else ""
except OSError:
    master_ip = "unresolved"
cgroup, step_cpus = cpuset_cgroup()
with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
    json.dump({"env": dict(os.environ), "node": os.environ.get("SLURMD_NODENAME"), "hostname": socket.gethostname(),
               "master_ip": master_ip, "cpus": sorted(os.sched_getaffinity(0)), "cpus_allowed": allowed,
               "cpuset_cgroup": cgroup, "step_cpus": step_cpus, "argv": sys.argv}, f)
