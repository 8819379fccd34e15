"""What every Slurm test shares: where the three-node test cluster is (tests/slurm/cluster.sh), how to run a
client against it, and wait_for(), the one way a test waits: on a condition, with a bound, and a failure
message that names what did not happen."""
import json
import os
import re
import socket
import subprocess
import time

import pytest

BASE = os.environ.get("DLAUNCH_SLURM_BASE", "/var/lib/dlaunch-test-cluster")
CONF = os.path.join(BASE, "slurm.conf")
PYTHON = os.environ.get("PYTHON_EXEC", "/usr/bin/python3")
CLUSTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cluster.sh")
ENV = dict(os.environ, SLURM_CONF=CONF, PYTHON_EXEC=PYTHON)
# dlaunch's own exit codes (base/include/dlaunch/exit_codes.hpp).
USAGE = 64
GROUP_FAILED = 69
LAUNCH_FAILED = 71


def cluster_hosts():
    """Node name -> address, from the hosts file every node of the cluster sees as /etc/hosts."""
    hosts = {}
    with open(os.path.join(BASE, "hosts")) as f:
        for line in f:
            addr, name = line.split()[:2]
            hosts[name] = addr
    return hosts


HOSTS = cluster_hosts() if os.path.exists(os.path.join(BASE, "hosts")) else {}
# The compute nodes, in Slurm's order (nsn2 before nsn10: cluster.sh start --nodes N defines them so).
NODES = sorted((n for n in HOSTS if re.fullmatch(r"nsn\d+", n)), key=lambda n: int(n[3:]))


def wait_for(what, condition, timeout, interval=0.2, diagnose=None):
    """Calls condition() until it returns something true, and returns that. After `timeout` seconds fails
    the test with "`what` did not happen within N s" and what diagnose() (if given) returns."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            detail = diagnose() if diagnose else ""
            pytest.fail(f"{what} did not happen within {timeout} s{': ' + str(detail) if detail else ''}")
        time.sleep(interval)


def slurm(cmd, args, timeout=120, env=None, conf=CONF, **kw):
    """Runs a Slurm client (or any command) with the test cluster's configuration; returns the result."""
    full_env = dict(ENV, SLURM_CONF=conf, **(env or {}))
    return subprocess.run([cmd, *args], capture_output=True, text=True, timeout=timeout, env=full_env, **kw)


def srun(args, **kw):
    return slurm("srun", ["--immediate=60", *args], **kw)


def make_outdir(name=""):
    """A fresh directory every node can write to (not /tmp: each node has its own)."""
    path = os.path.join(BASE, "shared", "out", f"{name}{os.getpid()}-{time.monotonic_ns()}")
    os.makedirs(path)
    os.chmod(path, 0o777)
    return path


def dumps(outdir, n):
    """The n rank<R>.json files workers/dump_env.py wrote, in rank order."""
    out = []
    for r in range(n):
        with open(os.path.join(outdir, f"rank{r}.json")) as f:
            out.append(json.load(f))
    return out


def check_multi_host(ranks):
    """What only a real multi-host cluster shows, for ranks dumped by workers/dump_env.py: every rank has
    the first node's address (or a name that resolves to it on its own node) as MASTER_ADDR, never a
    loopback one; each node's ranks chose that node's own interface for NCCL; each rank runs inside the
    cpuset Slurm's task/cgroup gave its step on its node."""
    first = ranks[0]["node"]
    for d in ranks:
        env, rank = d["env"], d["env"].get("RANK", d["env"].get("PADDLE_TRAINER_ID"))
        assert d["hostname"] == d["node"], (rank, d["hostname"], d["node"])
        assert not d["master_ip"].startswith("127."), (rank, env["MASTER_ADDR"], d["master_ip"])
        assert d["master_ip"] == HOSTS[first], \
            f"rank {rank} on {d['node']}: MASTER_ADDR {env['MASTER_ADDR']} is {d['master_ip']}, not {first}"
        assert env.get("NCCL_SOCKET_IFNAME") == f"={d['node']}-eth0", \
            f"rank {rank} on {d['node']}: NCCL_SOCKET_IFNAME={env.get('NCCL_SOCKET_IFNAME')}"
        job, step = env["SLURM_JOB_ID"], env["SLURM_STEP_ID"]
        assert f"/job_{job}/step_{step}" in d["cpuset_cgroup"], (rank, d["cpuset_cgroup"])
        assert d["cpus"] and set(d["cpus"]) <= set(d["step_cpus"]), \
            f"rank {rank} on {d['node']}: CPUs {d['cpus']} outside the step's cpuset {d['step_cpus']}"


# Batch jobs on the cluster: their fields, their output, the start lines of examples/ddp_checkpoint.py.

def job_fields(job):
    out = subprocess.run(["scontrol", "-o", "show", "job", str(job)], capture_output=True, text=True, env=ENV)
    return dict(re.findall(r"(\w+)=(\S*)", out.stdout))


def sbatch_example(stage, workdir, script, nodes, settings, sbatch_args=()):
    """Submits examples/sbatch/SCRIPT as users get it, on `nodes` nodes, from `workdir` (its output in
    job.out there); its settings (DLAUNCH, EXAMPLE, WORKDIR, TRAIN_ARGS, ...) come from the environment, the
    staged dlaunch and examples/ddp_checkpoint.py unless `settings` says otherwise. Returns the job id."""
    env = dict(ENV, DLAUNCH=f"{stage}/dlaunch", EXAMPLE=f"{stage}/examples/ddp_checkpoint.py", WORKDIR=workdir)
    env.update(settings)
    out = subprocess.run(["sbatch", "--parsable", f"--nodes={nodes}", f"--chdir={workdir}", *sbatch_args,
                          f"--output={workdir}/job.out", "--export=ALL", f"{stage}/examples/sbatch/{script}"],
                         capture_output=True, text=True, env=env, check=True)
    return int(out.stdout.strip().split(";")[0])


def wait_job(job, what, until, timeout=240):
    """Polls the job until until(fields) holds and returns its fields; after `timeout` s cancels it and
    fails naming `what`."""
    def reached():
        f = job_fields(job)
        return f if f and until(f) else None
    try:
        return wait_for(f"job {job}: {what}", reached, timeout, interval=0.5, diagnose=lambda: job_fields(job))
    except BaseException:
        subprocess.run(["scancel", str(job)], env=ENV)
        raise


def all_idle():
    return all(node_state(n) == "idle" for n in NODES)


def ended(f):
    return not f or f.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")


def output(workdir):
    """The job's output so far: empty until the batch step has created the file (after Slurm already
    shows the job RUNNING)."""
    try:
        with open(os.path.join(workdir, "job.out")) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reference_result(stage, workdir, *args):
    """The uninterrupted run's result, world size 1, started by hand."""
    # Started without a launcher, it needs what dlaunch gives a worker of a torch built without libuv (Debian
    # 13's torch 2.6; older torches ignore it): docs/env-contract.md, USE_LIBUV.
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()), USE_LIBUV="0")
    out = subprocess.run([PYTHON, f"{stage}/examples/ddp_checkpoint.py", "--checkpoint", f"{workdir}/ref.pt",
                          "--step-seconds", "0", *args], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return re.search(r"^result: .*$", out.stdout, re.M).group(0)


def starts(text):
    """(attempt, run id, rank, world) of every worker start line."""
    return [(int(a), run, int(r), int(w)) for r, w, a, run in
            re.findall(r"start: rank (\d+) of (\d+) attempt (\d+) run (\S+)", text)]


def node_state(name):
    return subprocess.run(["sinfo", "-h", "-n", name, "-o", "%T"], capture_output=True, text=True,
                          env=ENV).stdout.strip().lower()
