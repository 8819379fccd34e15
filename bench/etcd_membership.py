#!/usr/bin/env python3
"""Membership through etcd on the three hosts of the test cluster (issue "Elastic membership on etcd"): a late
node -> every rank of the grown world running, and kill -9 of the leader's agent -> every rank of the next
attempt running; dlaunch's `--rdzv-backend etcd` against torch's own torchrun (`etcd-v2`, and `c10d`).

Needs the test cluster (tests/slurm/cluster.sh start) and a staged build (tests/slurm/stage.sh ... DIR).
    bench/etcd_membership.py STAGE_DIR [--reps N] [--case late|leader]
                             [--launcher dlaunch|dlaunch-c10d|torchrun-etcd-v2|torchrun-c10d]

etcd (Debian's etcd-server, with --enable-v2 for torch's backend) listens on the host's side of the cluster's
bridge. Workers: bench/restart_worker.cpp with no failing rank (BENCH_FAIL_RANK=-1): attempt 0's ranks block,
later attempts' exit at once; each logs `start <CLOCK_MONOTONIC ns> <restart count> ...` (one clock for the
whole machine, so the nodes' namespaces share it).
dlaunch-c10d is dlaunch's own rendezvous (`--rdzv-backend c10d`, node 0's endpoint kept open for late nodes);
it needs no etcd.
- late: nsn1 and nsn2 run 2 workers each (`--nnodes 2:3`, last call 1 s); once the 4 run, nsn3's agent starts
  (t0, taken just before). Reported: the sixth rank start after t0 (every rank of the world of 6).
- leader (dlaunch only: torchrun's agents notice a lost node only through their workers' collectives, which
  these workers do not have): three nodes run; t0 just before kill -9 of the leading agent (`--heartbeat-timeout
  5`, `--max-restarts 1`). Reported: the fourth rank start after t0 (every rank of the world of 4).
"""
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "slurm"))
from slurmtest import CLUSTER, HOSTS, NODES, PYTHON, make_outdir, wait_for  # noqa: E402

BRIDGE = "10.77.0.254"  # the host's side of the cluster's bridge (cluster.sh)
here = os.path.dirname(os.path.abspath(__file__))
stage = sys.argv[1]


def option(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


reps = int(option("--reps", "3"))
launcher = option("--launcher", "dlaunch")
case = option("--case", "late")
assert launcher in ("dlaunch", "dlaunch-c10d", "torchrun-etcd-v2", "torchrun-c10d"), launcher
assert case in ("late", "leader") and (case == "late" or launcher == "dlaunch"), (launcher, case)
worker = f"{stage}/restart_worker"
subprocess.run(["g++", "-O2", "-o", worker, os.path.join(here, "restart_worker.cpp")], check=True)
shutil.copy(os.path.join(here, "torchrun_patched.py"), f"{stage}/torchrun_patched.py")


def answers(url):
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with direct.open(url, b'{"key":"AA=="}', timeout=2):
            return True
    except OSError:
        return False


def start_etcd(work):
    client, peer = f"http://{BRIDGE}:23790", f"http://{BRIDGE}:23800"
    proc = subprocess.Popen([shutil.which("etcd") or "/usr/bin/etcd", "--name", "b", "--data-dir", f"{work}/etcd",
                             "--listen-client-urls", client, "--advertise-client-urls", client, "--listen-peer-urls",
                             peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", f"b={peer}",
                             "--enable-v2"], stdout=open(f"{work}/etcd.log", "w"), stderr=subprocess.STDOUT)
    wait_for("etcd on the bridge", lambda: answers(f"{client}/v3/kv/range"), 30)
    return proc


def agent(node, rep, log, work):
    if launcher == "dlaunch":
        cmd = [f"{stage}/dlaunch", "--rdzv_backend", "etcd", "--rdzv_endpoint", f"{BRIDGE}:23790",
               "--heartbeat-timeout", "5", "--grace", "2"]
    elif launcher == "dlaunch-c10d":
        cmd = [f"{stage}/dlaunch", "--rdzv_backend", "c10d", "--rdzv_endpoint", f"{HOSTS[NODES[0]]}:{29400 + rep}",
               "--heartbeat-timeout", "5", "--grace", "2"]
    elif launcher == "torchrun-etcd-v2":
        cmd = [PYTHON, f"{stage}/torchrun_patched.py", "--rdzv_backend", "etcd-v2", "--rdzv_endpoint",
               f"{BRIDGE}:23790"]
    else:
        cmd = [PYTHON, f"{stage}/torchrun_patched.py", "--rdzv_backend", "c10d", "--rdzv_endpoint",
               f"{HOSTS[NODES[0]]}:{29400 + rep}"]
    cmd = [CLUSTER, "exec", node, "env", f"BENCH_LOG={log}", "BENCH_NPROC=4", "BENCH_FAIL_RANK=-1", *cmd,
           "--rdzv_id", f"bench{rep}", "--nnodes", "2:3", "--rdzv_conf", "last_call_timeout=1", "--max_restarts", "1",
           "--nproc_per_node", "2", "--no_python", worker]
    return subprocess.Popen(cmd, stdout=open(f"{work}/{node}.log", "w"), stderr=subprocess.STDOUT)


def starts(log, since):
    text = open(log).read() if os.path.exists(log) else ""
    return sorted(int(t) for t in re.findall(r"^start (\d+) ", text, re.M) if int(t) > since)


def one(rep):
    work = make_outdir(f"etcd-bench-{rep}-")
    log = f"{work}/bench.log"
    etcd = start_etcd(work)
    first = NODES[:2] if case == "late" else NODES[:3]
    agents = {}
    for n in first:  # node 0 first: under c10d it hosts the endpoint
        agents[n] = agent(n, rep, log, work)
        if launcher.endswith("c10d") and n == NODES[0]:
            time.sleep(0.5)
    try:
        wait_for("attempt 0 running", lambda: len(starts(log, 0)) == 2 * len(first), 60)
        time.sleep(0.5)
        t0 = time.monotonic_ns()
        if case == "late":
            agents[NODES[2]] = agent(NODES[2], rep, log, work)
            want = 6
        else:
            leader = next(n for n in first if "this node leads them" in open(f"{work}/{n}.log").read())
            agents[leader].kill()
            want = 4
        wait_for(f"{want} ranks after t0", lambda: len(starts(log, t0)) >= want, 120)
        return (starts(log, t0)[want - 1] - t0) / 1e9
    finally:
        for a in agents.values():
            a.send_signal(signal.SIGKILL)
        subprocess.run(["pkill", "-9", "-f", worker], check=False)
        subprocess.run(["pkill", "-9", "-f", f"{stage}/dlaunch "], check=False)
        subprocess.run(["pkill", "-9", "-f", "torchrun_patched"], check=False)
        etcd.kill()
        etcd.wait()


times = [one(r) for r in range(reps)]
for r, t in enumerate(times):
    print(f"{launcher} {case} rep {r}: {t:.2f} s", flush=True)
print(f"{launcher} {case}: median {statistics.median(times):.2f} s, min {min(times):.2f}, max {max(times):.2f}",
      flush=True)
