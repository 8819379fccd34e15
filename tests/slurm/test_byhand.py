"""torchrun's c10d form by hand across the test cluster's hosts (no Slurm job: each agent is started in a
node's namespaces, with its own address): the same command line on every host, fixed and ranged --nnodes,
and a connection from another host without the run's secret that is refused, logged and changes nothing."""
import subprocess

from slurmtest import CLUSTER, HOSTS, PYTHON, dumps, make_outdir, wait_for

SECRET = "c10d-test-secret"


def agent(stage, node, args, secret=SECRET):
    """dlaunch started by hand on `node` (cluster.sh exec: its network, hostname and cgroups)."""
    cmd = [CLUSTER, "exec", node, "env", f"PYTHON_EXEC={PYTHON}", f"DLAUNCH_RDZV_SECRET={secret}",
           f"{stage}/dlaunch", *[str(a) for a in args]]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def c10d(port, nnodes, *rest):
    return ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{HOSTS['nsn1']}:{port}", "--rdzv-id", "byhand",
            "--nnodes", nnodes, *rest]


def finish(proc, timeout=120):
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
    return proc.returncode, out, err


def test_two_hosts_one_world_and_a_stranger_is_refused(stage):
    """nsn1 serves the rendezvous, nsn3 knocks with another secret (refused, logged on nsn1), nsn2 joins with
    the same command as nsn1: the DDP example runs as one world of 4 across the two hosts."""
    args = c10d(29400, 2, "--nproc-per-node", 2, f"{stage}/examples/ddp_allreduce.py")
    host = agent(stage, "nsn1", args)
    try:
        stranger = finish(agent(stage, "nsn3", args, secret="not-the-secret-of-this-run"))
        joiner = finish(agent(stage, "nsn2", args))
        rc, out, err = finish(host)
    finally:
        host.kill()
    assert stranger[0] == 3, stranger
    assert "the rendezvous host refused this node: wrong secret" in stranger[2], stranger[2]
    assert f"refused a connection from {HOSTS['nsn3']}: wrong secret" in err, err
    assert joiner[0] == 0 and rc == 0, f"{joiner}\n{err}"
    assert f"node at {HOSTS['nsn2']} joined (2 of 2)" in err, err
    assert "OK world=4 sum=10" in out, f"{out}\n{err}"


def test_ranged_nodes_start_with_those_there_after_the_last_call(stage):
    """--nnodes 2:3 on two hosts: after the last call (2 s) both start as one world of 2 nodes, each rank
    with its node's address and the host's MASTER_ADDR."""
    outdir = make_outdir("byhand")
    args = c10d(29401, "2:3", "--rdzv-conf", "last_call_timeout=2", "--nproc-per-node", 1,
                f"{stage}/workers/dump_env.py", outdir)
    host, joiner = agent(stage, "nsn1", args), agent(stage, "nsn2", args)
    try:
        (rc, _, err), (jrc, _, jerr) = finish(host), finish(joiner)
    finally:
        host.kill(), joiner.kill()
    assert rc == 0 and jrc == 0, f"{err}\n{jerr}"
    assert "2 node(s), the least asked for; waiting 2 s more for up to 3" in err, err
    ranks = wait_for("both ranks' dumps", lambda: dumps(outdir, 2), 10)
    for r, (d, node) in enumerate(zip(ranks, ["nsn1", "nsn2"])):
        env = d["env"]
        assert d["hostname"] == node, (r, d["hostname"])
        assert env["WORLD_SIZE"] == "2" and env["GROUP_RANK"] == str(r), env
        assert d["master_ip"] == HOSTS["nsn1"] and env["TORCHELASTIC_RUN_ID"] == "byhand", env
        assert env.get("NCCL_SOCKET_IFNAME") == f"={node}-eth0", (r, env.get("NCCL_SOCKET_IFNAME"))
