"""torchrun's etcd backend by hand across the test cluster's hosts (docs/etcd.md): a real etcd on the host's
side of the cluster's bridge, one agent started in each node's namespaces with the same command line. The
three meet through etcd; kill -9 of the leading agent (node 0, the workers' master) and the two others meet
again under a new leader on another host and go on with a world of 4. A third host that comes while two run
joins them at once (scale-up). The leading host lost in a gloo training: the others resume from the
checkpoint and reach an uninterrupted run's result. etcd restarted mid-run costs nothing, and a lost member leaves
the two others going on. Two runs on one etcd keep apart. Under srun the same options have no effect, and say so."""
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request

import pytest

from slurmtest import CLUSTER, HOSTS, PYTHON, make_outdir, reference_result, srun, starts, wait_for

BRIDGE = "10.77.0.254"  # the host's side of the cluster's bridge (cluster.sh)

TRAIN = """import os, sys, time
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
if attempt == "0":
    open(os.path.join(sys.argv[1], "started." + os.environ["RANK"]), "w").close()
    time.sleep(60)  # training, until its leader's node is lost
print(f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} done in attempt {attempt} with master "
      f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
"""


# Run b's workers: they train a few seconds in attempt 0 and end.
SHORT = """import os, sys, time
open(os.path.join(sys.argv[1], "started." + os.environ["RANK"]), "w").close()
time.sleep(15)  # longer than run a's kill and meeting again (its --heartbeat-timeout 5)
print(f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} done in attempt "
      f"{os.environ['TORCHELASTIC_RESTART_COUNT']} with master {os.environ['MASTER_ADDR']}:", flush=True)
"""


def answers(url):
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a site's web proxy
    try:
        with direct.open(url, b'{"key":"AA=="}', timeout=2):
            return True
    except OSError:
        return False


class BridgeEtcd:
    """A real etcd on the bridge, in a directory of its own; kill() and start() again keep its data."""

    def __init__(self):
        self.binary = shutil.which("etcd") or "/usr/bin/etcd"
        assert os.access(self.binary, os.X_OK), "etcd is missing: install etcd-server (packaging/debian-deps.sh does)"
        self.data = make_outdir("etcd-")
        self.endpoint = f"{BRIDGE}:23790"
        self.proc = None

    def start(self):
        client, peer = f"http://{self.endpoint}", f"http://{BRIDGE}:23800"
        with open(os.path.join(self.data, "etcd.log"), "a") as log:
            self.proc = subprocess.Popen([self.binary, "--name", "t", "--data-dir", os.path.join(self.data, "data"),
                                          "--listen-client-urls", client, "--advertise-client-urls", client,
                                          "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                                          "--initial-cluster", f"t={peer}"], stdout=log, stderr=subprocess.STDOUT)
        wait_for("etcd answering on the bridge", lambda: answers(f"{client}/v3/kv/range"), 30)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def keys(self, prefix):
        """The keys under `prefix`, through etcd's JSON gateway."""
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        body = json.dumps({"key": base64.b64encode(prefix.encode()).decode(),
                           "range_end": base64.b64encode(end.encode()).decode()}).encode()
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a site's web proxy
        with direct.open(f"http://{self.endpoint}/v3/kv/range", body, timeout=5) as reply:
            return sorted(base64.b64decode(kv["key"]).decode() for kv in json.load(reply).get("kvs", []))


@pytest.fixture
def bridge_etcd():
    etcd = BridgeEtcd()
    etcd.start()
    try:
        yield etcd
    finally:
        etcd.kill()


@pytest.fixture
def etcd_on_bridge(bridge_etcd):
    return bridge_etcd.endpoint


def agent(stage, node, args, logs):
    cmd = [CLUSTER, "exec", node, "env", f"PYTHON_EXEC={PYTHON}", f"{stage}/dlaunch", *[str(a) for a in args]]
    with open(f"{logs}/{node}.out", "w") as out, open(f"{logs}/{node}.err", "w") as err:
        return subprocess.Popen(cmd, stdout=out, stderr=err, text=True)


def read(path):
    with open(path) as f:
        return f.read()


def wait_started(outdir, count, nodes):
    """Until `count` workers of attempt 0 (TRAIN) said they started; the nodes' output if they do not."""
    wait_for(f"the {count} workers of attempt 0",
             lambda: len([p for p in os.listdir(outdir) if p.startswith("started.")]) == count, 60,
             diagnose=lambda: {n: read(f"{outdir}/{n}.err") for n in nodes})


def done_lines(outdir, nodes):
    """The TRAIN workers' last lines on `nodes`, without the rank prefix, sorted."""
    return sorted(line.split("]:", 1)[-1] for n in nodes for line in read(f"{outdir}/{n}.out").splitlines()
                  if "done in attempt" in line)


def succeeded(procs, nodes, outdir):
    """Each of `nodes`' stderr, once every one of them exited 0."""
    errs = {n: read(f"{outdir}/{n}.err") for n in nodes}
    assert all(procs[n].returncode == 0 for n in nodes), errs
    return errs


def test_kill_9_of_the_leader_the_other_hosts_meet_again_and_go_on(stage, outdir, etcd_on_bridge):
    script = os.path.join(outdir, "train.py")
    with open(script, "w") as f:
        f.write(TRAIN)
    args = ["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd_on_bridge, "--rdzv-id", "hosts", "--nnodes", "2:3",
            "--max-restarts", 1, "--heartbeat-timeout", 5, "--nproc-per-node", 2, script, outdir]
    nodes = ["nsn1", "nsn2", "nsn3"]
    procs = {n: agent(stage, n, args, outdir) for n in nodes}
    try:
        wait_started(outdir, 6, nodes)
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
    errs = succeeded(procs, others, outdir)
    said = "".join(errs.values())
    assert "group: lost the leader" in said and "the nodes left meet again under a new leader" in said, said
    done = done_lines(outdir, others)
    assert [d.split(" with ")[0] for d in done] == [f"rank {r} of 4 done in attempt 1" for r in range(4)], done
    masters = {re.search(r"master (\S+):", d).group(1) for d in done}
    assert len(masters) == 1 and masters <= {HOSTS[n] for n in others}, (masters, HOSTS[leader])
    print(f"kill -9 of {leader}'s agent to both others' ends: {took:.2f} s")


def test_etcd_restarted_mid_run_costs_nothing_and_a_lost_member_leaves_the_others_going_on(stage, outdir,
                                                                                          bridge_etcd):
    """Three hosts train; etcd is killed and started again (5 s away, leases of 10 s renewed every ~3.3 s):
    every agent says its lease is renewed again, and attempt 0 goes on. Then kill -9 of an agent that does not
    lead: the two others restart as a group on 2 hosts (attempt 1, world 4) with the same leader."""
    script = os.path.join(outdir, "train.py")
    with open(script, "w") as f:
        f.write(TRAIN)
    args = ["--rdzv-backend", "etcd", "--rdzv-endpoint", bridge_etcd.endpoint, "--rdzv-id", "member", "--nnodes",
            "2:3", "--max-restarts", 1, "--heartbeat-timeout", 10, "--grace", 2, "--nproc-per-node", 2, script, outdir]
    nodes = ["nsn1", "nsn2", "nsn3"]
    procs = {n: agent(stage, n, args, outdir) for n in nodes}
    try:
        wait_started(outdir, 6, nodes)
        bridge_etcd.kill()
        time.sleep(5)  # longer than a renewal's period: every agent tries once while etcd is away
        bridge_etcd.start()
        wait_for("every agent's lease renewed again",
                 lambda: all("etcd answers again" in read(f"{outdir}/{n}.err") for n in nodes), 60,
                 diagnose=lambda: {n: read(f"{outdir}/{n}.err") for n in nodes})
        assert all(procs[n].poll() is None for n in nodes), "attempt 0 goes on"
        member = next(n for n in nodes if "this node leads them" not in read(f"{outdir}/{n}.err"))
        procs[member].kill()
        others = [n for n in nodes if n != member]
        for n in others:
            procs[n].wait(timeout=120)
    finally:
        for p in procs.values():
            p.kill()
    errs = succeeded(procs, others, outdir)
    said = "".join(errs.values())
    assert "expired" not in said and "meet again" not in said, said
    done = done_lines(outdir, others)
    assert [d.split(" with ")[0] for d in done] == [f"rank {r} of 4 done in attempt 1" for r in range(4)], done
    leader = next(n for n in others if "this node leads them" in errs[n])
    assert {re.search(r"master (\S+):", d).group(1) for d in done} == {HOSTS[leader]}, done


def test_a_late_host_joins_the_running_two_at_once_and_the_world_grows(stage, outdir, etcd_on_bridge):
    """Scale-up across hosts: nsn1 and nsn2 run a world of 4 (--nnodes 2:3); nsn3 comes later, the leader
    sees it waiting in etcd, and the three meet again: attempt 1 on 3 hosts, world 6, with --max-restarts 0."""
    script = os.path.join(outdir, "train.py")
    with open(script, "w") as f:
        f.write(TRAIN)
    args = ["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd_on_bridge, "--rdzv-id", "grow", "--nnodes", "2:3",
            "--rdzv-conf", "last_call_timeout=1", "--max-restarts", 0, "--grace", 2, "--nproc-per-node", 2, script,
            outdir]
    nodes = ["nsn1", "nsn2", "nsn3"]
    procs = {n: agent(stage, n, args, outdir) for n in nodes[:2]}
    try:
        wait_started(outdir, 4, nodes[:2])
        came_at = time.monotonic()
        procs["nsn3"] = agent(stage, "nsn3", args, outdir)
        for n in nodes:
            procs[n].wait(timeout=120)
        took = time.monotonic() - came_at
    finally:
        for p in procs.values():
            p.kill()
    errs = succeeded(procs, nodes, outdir)
    assert "this node waits to join: the group restarts to take it" in errs["nsn3"], errs["nsn3"]
    assert "1 node waits to join, below --nnodes MAX 3 (a membership change" in "".join(errs.values()), errs
    done = done_lines(outdir, nodes)
    assert [d.split(" with ")[0] for d in done] == [f"rank {r} of 6 done in attempt 1" for r in range(6)], done
    assert len({re.search(r"master (\S+):", d).group(1) for d in done}) == 1, done
    print(f"nsn3's start to every worker of attempt 1 done: {took:.2f} s")


def test_two_runs_on_one_etcd_keep_apart_when_one_loses_its_leader(stage, outdir, bridge_etcd):
    """Two runs of three hosts each (--rdzv-id a and b) share one etcd at once: kill -9 of run a's leading
    agent makes a's two others meet again under a new leader (world 2), while run b goes on in its attempt 0
    untouched (world 3); no key of either run is left."""
    nodes = ["nsn1", "nsn2", "nsn3"]
    runs = {}
    for name, worker in (("a", TRAIN), ("b", SHORT)):
        d = os.path.join(outdir, name)
        os.makedirs(d)
        with open(os.path.join(d, "train.py"), "w") as f:
            f.write(worker)
        args = ["--rdzv-backend", "etcd", "--rdzv-endpoint", bridge_etcd.endpoint, "--rdzv-id", name, "--nnodes",
                "2:3", "--max-restarts", 1, "--heartbeat-timeout", 5, "--nproc-per-node", 1, f"{d}/train.py", d]
        runs[name] = (d, {n: agent(stage, n, args, d) for n in nodes})
    (a, procs_a), (b, procs_b) = runs["a"], runs["b"]
    try:
        wait_started(a, 3, nodes)
        wait_started(b, 3, nodes)
        leader = next(n for n in nodes if "this node leads them" in read(f"{a}/{n}.err"))
        procs_a[leader].kill()
        assert all(p.poll() is None for p in procs_b.values()), "run b trains while run a loses its leader"
        others = [n for n in nodes if n != leader]
        wait_for("run a meeting again", lambda: done_lines(a, others), 60,
                 diagnose=lambda: {n: read(f"{a}/{n}.err") for n in others})
        assert all(p.poll() is None for p in procs_b.values()), "run b still trains after run a met again"
        for p in [procs_a[n] for n in others] + list(procs_b.values()):
            p.wait(timeout=120)
    finally:
        for _, procs in runs.values():
            for p in procs.values():
                p.kill()
    errs_a, errs_b = succeeded(procs_a, others, a), succeeded(procs_b, nodes, b)
    assert "the nodes left meet again under a new leader" in "".join(errs_a.values()), errs_a
    done_a = done_lines(a, others)
    assert [d.split(" with ")[0] for d in done_a] == [f"rank {r} of 2 done in attempt 1" for r in range(2)], done_a
    said_b = "".join(errs_b.values())
    assert "lost the leader" not in said_b and " lost: " not in said_b and "meet again" not in said_b, said_b
    done_b = done_lines(b, nodes)
    assert [d.split(" with ")[0] for d in done_b] == [f"rank {r} of 3 done in attempt 0" for r in range(3)], done_b
    assert bridge_etcd.keys("/dlaunch/") == []


def test_the_leaders_host_lost_mid_training_the_others_reach_an_uninterrupted_runs_result(stage, outdir,
                                                                                         etcd_on_bridge):
    """The issue's test: examples/ddp_checkpoint.py (gloo) on three hosts, 2 ranks each; the leading host dies
    (cluster.sh kill: link down, every process killed) after a checkpoint. The two others meet again under a
    new leader, resume from the checkpoint as a world of 4 with a new master, and end with the result of an
    uninterrupted run."""
    expected = reference_result(stage, outdir, "--steps", "60")
    args = ["--rdzv-backend", "etcd", "--rdzv-endpoint", etcd_on_bridge, "--rdzv-id", "ckpt", "--nnodes", "2:3",
            "--max-restarts", 1, "--heartbeat-timeout", 5, "--grace", 3, "--nproc-per-node", 2,
            f"{stage}/examples/ddp_checkpoint.py", "--checkpoint", f"{outdir}/ckpt.pt", "--steps", 60,
            "--step-seconds", 0.25, "--save-every", 5]
    nodes = ["nsn1", "nsn2", "nsn3"]
    procs = {n: agent(stage, n, args, outdir) for n in nodes}
    try:
        wait_for("a periodic checkpoint", lambda: any("(periodic)" in read(f"{outdir}/{n}.out") for n in nodes), 120,
                 diagnose=lambda: {n: read(f"{outdir}/{n}.err") for n in nodes})
        leader = next(n for n in nodes if "this node leads them" in read(f"{outdir}/{n}.err"))
        subprocess.run([CLUSTER, "kill", leader], check=True)
        others = [n for n in nodes if n != leader]
        for n in others:
            procs[n].wait(timeout=180)
    finally:
        for p in procs.values():
            p.kill()
        subprocess.run([CLUSTER, "start"], check=True)
    errs = succeeded(procs, others, outdir)
    assert "the nodes left meet again under a new leader" in "".join(errs.values()), errs
    out = "".join(read(f"{outdir}/{n}.out") for n in others)
    assert sorted(r for a, _, r, w in starts(out) if a == 1 and w == 4) == [0, 1, 2, 3], starts(out)
    assert expected in out, f"the resumed run's result differs from an uninterrupted run's ({expected})\n{out}"


def test_under_srun_the_nodes_are_slurms_and_the_etcd_options_say_so(stage):
    # The same torchrun command line inside a job: srun started the nodes, and they meet through it. No etcd runs.
    result = srun(["-N2", "--ntasks-per-node=1", f"{stage}/dlaunch", "--nproc-per-node", "1", "--nnodes", "2",
                   "--rdzv-backend", "etcd", "--rdzv-endpoint", f"{BRIDGE}:23790", "--no-python", "sh", "-c",
                   "echo rank $RANK of $WORLD_SIZE"], timeout=120)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["[0:0]:rank 0 of 2", "[1:1]:rank 1 of 2"], result.stdout
    warning = (f"dlaunch: rdzv: --rdzv-backend etcd --rdzv-endpoint {BRIDGE}:23790: has no effect under srun: the "
               "job's nodes meet through srun (drop both options here")
    assert result.stderr.count(warning) == 2, result.stderr


def test_under_srun_a_static_endpoint_and_rdzv_conf_say_so_and_an_unknown_backend_is_refused(stage):
    command = ["-N2", "--ntasks-per-node=1", f"{stage}/dlaunch", "--nproc-per-node", "1", "--nnodes", "2"]
    shell = ["--no-python", "sh", "-c", "echo rank $RANK of $WORLD_SIZE at $MASTER_ADDR"]
    result = srun([*command, "--rdzv-endpoint", f"{BRIDGE}:29555", "--rdzv-conf", "timeout=90", *shell], timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"at {BRIDGE}" not in result.stdout, "the job's first node is the master, not the endpoint's host"
    assert result.stderr.count(f"dlaunch: rdzv: --rdzv-endpoint {BRIDGE}:29555: has no effect under srun: the job's "
                               "first node is the master") == 2, result.stderr
    assert result.stderr.count("dlaunch: rdzv: --rdzv-conf timeout=90: has no effect under srun") == 2, result.stderr
    refused = srun([*command, "--rdzv-backend", "zookeeper", *shell], timeout=120)
    assert refused.returncode == 64 and refused.stdout == "", refused.stderr
    said = refused.stderr
    assert said.count("dlaunch: rdzv: --rdzv-backend zookeeper: not supported by dlaunch") == 2, said
