"""torchrun's etcd backend by hand across the test cluster's hosts (docs/etcd.md): a real etcd on the host's
side of the cluster's bridge, one agent started in each node's namespaces with the same command line. The
three meet through etcd; kill -9 of the leading agent (node 0, the workers' master) and the two others meet
again under a new leader on another host and go on with a world of 4."""
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request

import pytest

from slurmtest import CLUSTER, HOSTS, PYTHON, make_outdir, wait_for

BRIDGE = "10.77.0.254"  # the host's side of the cluster's bridge (cluster.sh)

TRAIN = """import os, sys, time
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
if attempt == "0":
    open(os.path.join(sys.argv[1], "started." + os.environ["RANK"]), "w").close()
    time.sleep(60)  # training, until its leader's node is lost
print(f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} done in attempt {attempt} with master "
      f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
"""


def answers(url):
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a site's web proxy
    try:
        with direct.open(url, b'{"key":"AA=="}', timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture
def etcd_on_bridge():
    binary = shutil.which("etcd") or "/usr/bin/etcd"
    assert os.access(binary, os.X_OK), "etcd is missing: install etcd-server (packaging/debian-deps.sh does)"
    data = make_outdir("etcd-")
    client, peer = f"http://{BRIDGE}:23790", f"http://{BRIDGE}:23800"
    with open(os.path.join(data, "etcd.log"), "w") as log:
        proc = subprocess.Popen([binary, "--name", "t", "--data-dir", os.path.join(data, "data"),
                                 "--listen-client-urls", client, "--advertise-client-urls", client,
                                 "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                                 "--initial-cluster", f"t={peer}"], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for("etcd answering on the bridge", lambda: answers(f"{client}/v3/kv/range"), 30)
        yield f"{BRIDGE}:23790"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def agent(stage, node, args, logs):
    cmd = [CLUSTER, "exec", node, "env", f"PYTHON_EXEC={PYTHON}", f"{stage}/dlaunch", *[str(a) for a in args]]
    with open(f"{logs}/{node}.out", "w") as out, open(f"{logs}/{node}.err", "w") as err:
        return subprocess.Popen(cmd, stdout=out, stderr=err, text=True)


def read(path):
    with open(path) as f:
        return f.read()


def test_kill_9_of_the_leader_the_other_hosts_meet_again_and_go_on(stage, outdir, etcd_on_bridge):
    script = os.path.join(outdir, "train.py")
    with open(script, "w") as f:
        f.write(TRAIN)
    args = ["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd_on_bridge, "--rdzv-id", "hosts", "--nnodes", "2:3",
            "--max-restarts", 1, "--heartbeat-timeout", 5, "--nproc-per-node", 2, script, outdir]
    nodes = ["nsn1", "nsn2", "nsn3"]
    procs = {n: agent(stage, n, args, outdir) for n in nodes}
    try:
        wait_for("the 6 workers of attempt 0", lambda: len([p for p in os.listdir(outdir) if p.startswith("started.")])
                 == 6, 60, diagnose=lambda: {n: read(f"{outdir}/{n}.err") for n in nodes})
        leader = next(n for n in nodes if "this node leads them" in read(f"{outdir}/{n}.err"))
        killed_at = time.monotonic()
        procs[leader].kill()
        others = [n for n in nodes if n != leader]
        for n in others:
            procs[n].wait(timeout=120)
        took = time.monotonic() - killed_at
    finally:
        for p in procs.values():
            p.kill()
    errs = {n: read(f"{outdir}/{n}.err") for n in others}
    assert all(procs[n].returncode == 0 for n in others), errs
    said = "".join(errs.values())
    assert "group: lost the leader" in said and "the nodes left meet again under a new leader" in said, said
    done = sorted(line.split("]:", 1)[-1] for n in others for line in read(f"{outdir}/{n}.out").splitlines()
                  if "done in attempt" in line)
    assert [d.split(" with ")[0] for d in done] == [f"rank {r} of 4 done in attempt 1" for r in range(4)], done
    masters = {re.search(r"master (\S+):", d).group(1) for d in done}
    assert len(masters) == 1 and masters <= {HOSTS[n] for n in others}, (masters, HOSTS[leader])
    print(f"kill -9 of {leader}'s agent to both others' ends: {took:.2f} s")
