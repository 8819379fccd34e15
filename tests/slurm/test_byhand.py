"""torchrun's c10d form by hand across the test cluster's hosts (no Slurm job: each agent is started in a
node's namespaces, with its own address): the same command line on every host, fixed and ranged --nnodes,
and a connection from another host without the run's secret that is refused, logged and changes nothing.
With --max-restarts the agents that met form a group (authenticated with the run's secret): a crash on one
host restarts both, a host that goes silent is left out when --nnodes MIN:MAX allows."""
import subprocess

from slurmtest import CLUSTER, GROUP_FAILED, HOSTS, PYTHON, dumps, make_outdir, reference_result, starts, wait_for

SECRET = "c10d-test-secret"


def agent(stage, node, args, secret=SECRET, logs=None):
    """dlaunch started by hand on `node` (cluster.sh exec: its network, hostname and cgroups); its output in
    pipes, or in files logs/NODE.out and logs/NODE.err to read while it runs."""
    cmd = [CLUSTER, "exec", node, "env", f"PYTHON_EXEC={PYTHON}", f"DLAUNCH_RDZV_SECRET={secret}",
           f"{stage}/dlaunch", *[str(a) for a in args]]
    if logs:
        with open(f"{logs}/{node}.out", "w") as out, open(f"{logs}/{node}.err", "w") as err:
            return subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def read(path):
    with open(path) as f:
        return f.read()


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
    workdir = make_outdir("byhand-stranger-")
    host = agent(stage, "nsn1", args, logs=workdir)  # files: nobody reads its pipes while the others run
    try:
        stranger = finish(agent(stage, "nsn3", args, secret="not-the-secret-of-this-run"))
        joiner = finish(agent(stage, "nsn2", args))
        rc = host.wait(timeout=120)
    finally:
        host.kill()
    out, err = read(f"{workdir}/nsn1.out"), read(f"{workdir}/nsn1.err")
    assert stranger[0] == GROUP_FAILED, stranger
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


def train(stage, workdir, steps, step_seconds, *crash):
    return [f"{stage}/examples/ddp_checkpoint.py", "--checkpoint", f"{workdir}/ckpt.pt", "--steps", steps,
            "--step-seconds", step_seconds, "--save-every", 5, *crash]


def test_a_crash_on_one_host_restarts_both_as_one_group(stage):
    """--max-restarts 1 by hand: rank 3 (on nsn2) crashes in attempt 0. The host's agent hears it from the
    group, stops its own ranks, and both hosts start attempt 1 together (TORCHELASTIC_RESTART_COUNT 1 on every
    rank); the result is an uninterrupted run's."""
    workdir = make_outdir("byhand-restart-")
    expected = reference_result(stage, workdir, "--steps", "30")
    args = c10d(29402, 2, "--max-restarts", 1, "--nproc-per-node", 2,
                *train(stage, workdir, 30, 0.1, "--crash-at-step", 12, "--crash-rank", 3, "--crash-on-attempt", 0))
    host, joiner = agent(stage, "nsn1", args), agent(stage, "nsn2", args)
    try:
        (rc, out, err), (jrc, jout, jerr) = finish(host), finish(joiner)
    finally:
        host.kill(), joiner.kill()
    assert rc == 0 and jrc == 0, f"{err}\n{jerr}"
    assert "group: attempt 0: rank 3 on nsn2: exit code 3; stopping every node" in err, err
    assert "1 of 1 restarts (--max-restarts) used: attempt 1 on 2 node(s), world size 4" in err, err
    assert "rank 3 on nsn2: exit code 3" in jerr, "nsn2 names its own failure on its own console"
    seen = starts(out + jout)
    for attempt in (0, 1):
        assert sorted(r for a, _, r, w in seen if a == attempt and w == 4) == [0, 1, 2, 3], (attempt, seen)
    assert expected in out, f"the resumed run's result differs from an uninterrupted run's ({expected})\n{out}"


def test_a_silent_host_is_left_out_and_the_other_goes_on(stage):
    """--nnodes 1:2 by hand: nsn2 dies (link down, every process killed) while training. nsn1's agent notices
    within the heartbeat bound (3 s), stops its ranks and goes on alone as a world of 2 from the checkpoint."""
    workdir = make_outdir("byhand-lost-")
    expected = reference_result(stage, workdir, "--steps", "60")
    args = c10d(29403, "1:2", "--rdzv-conf", "last_call_timeout=30", "--max-restarts", 1, "--heartbeat-timeout", 3,
                "--grace", 3, "--nproc-per-node", 2, *train(stage, workdir, 60, 0.25))
    host, joiner = agent(stage, "nsn1", args, logs=workdir), agent(stage, "nsn2", args, logs=workdir)
    try:
        wait_for("a periodic checkpoint", lambda: "(periodic)" in read(f"{workdir}/nsn1.out"), 120,
                 diagnose=lambda: read(f"{workdir}/nsn1.err"))
        subprocess.run([CLUSTER, "kill", "nsn2"], check=True)
        rc = host.wait(timeout=120)
    finally:
        host.kill(), joiner.kill()
        subprocess.run([CLUSTER, "start"], check=True)
    out, err = read(f"{workdir}/nsn1.out"), read(f"{workdir}/nsn1.err")
    assert rc == 0, err
    assert f"group: attempt 0: {HOSTS['nsn2']} lost: no heartbeat for 3 s; stopping every node" in err, err
    assert "attempt 1 on 1 node(s), world size 2" in err, err
    assert sorted(r for a, _, r, w in starts(out) if a == 1 and w == 2) == [0, 1], starts(out)
    assert expected in out, f"the resumed run's result differs from an uninterrupted run's ({expected})\n{out}"
