"""dlaunch on a real three-node Slurm cluster (tests/slurm/cluster.sh: one network, UTS, mount and cgroup
namespace per node, task/cgroup + task/affinity): dlaunch-mpi under srun with and without PMIx, dlaunch
agents one per node, mpi4py, a worker failure on one node ending the whole step, and what only a real
multi-host cluster shows (MASTER_ADDR, the interface each node chose, the cpuset Slurm gave the step).

CTest starts the cluster first (fixture) and stages the binaries where every node sees them
(DLAUNCH_SLURM_STAGE).
"""
import json
import os
import time

import pytest

from slurmtest import LAUNCH_FAILED, NODES, check_multi_host, dumps, srun


def check_world(ranks, world, per_node):
    """Ranks in node order, per_node of them on each node; the contract agrees across ranks."""
    nnodes = world // per_node
    ports = {d["env"]["MASTER_PORT"] for d in ranks}
    addrs = {d["env"]["MASTER_ADDR"] for d in ranks}
    assert len(ports) == 1 and len(addrs) == 1, (ports, addrs)
    for rank, d in enumerate(ranks):
        env = d["env"]
        assert env["RANK"] == str(rank) and env["WORLD_SIZE"] == str(world)
        assert d["node"] == NODES[rank // per_node], (rank, d["node"])
        assert env["GROUP_RANK"] == str(rank // per_node)
        assert env["GROUP_WORLD_SIZE"] == str(nnodes)
        assert env["DLAUNCH_TEST_TASK_PROLOG"] == "ran"
    check_multi_host(ranks)


@pytest.mark.parametrize("mpi", ["--mpi=pmix", "--mpi=none"])
def test_dlaunch_mpi_env_contract_under_srun(stage, outdir, mpi):
    result = srun([mpi, "-N3", "-n6", f"{stage}/dlaunch-mpi", f"{stage}/workers/dump_env.py", outdir])
    assert result.returncode == 0, result.stderr
    ranks = dumps(outdir, 6)
    check_world(ranks, 6, 2)
    for rank, d in enumerate(ranks):
        assert d["env"]["LOCAL_RANK"] == str(rank % 2) and d["env"]["LOCAL_WORLD_SIZE"] == "2"
        job, step = d["env"]["SLURM_JOB_ID"], d["env"]["SLURM_STEP_ID"]
        assert d["env"]["TORCHELASTIC_RUN_ID"] == f"{job}.{step}"
        # task/affinity gives each of a node's two tasks one of its two cores; dlaunch-mpi keeps it.
        assert d["cpus"] == d["cpus_allowed"] == [rank % 2], (rank, d["cpus"], d["cpus_allowed"])
    if mpi == "--mpi=none":
        port = int(ranks[0]["env"]["MASTER_PORT"])
        assert 21000 <= port <= 28999, "without PMIx the port comes from the job and step ids in --port-range"


@pytest.mark.parametrize("mpi", ["--mpi=pmix", "--mpi=none"])
def test_dlaunch_mpi_ddp_example_under_srun(stage, mpi):
    result = srun([mpi, "-N3", "-n6", f"{stage}/dlaunch-mpi", f"{stage}/examples/ddp_allreduce.py"])
    assert result.returncode == 0, result.stderr
    assert "OK world=6 sum=21.0" in result.stdout, result.stdout


def test_mpi4py_under_srun_pmix(stage):
    result = srun(["--mpi=pmix", "-N3", "-n6", f"{stage}/dlaunch-mpi", f"{stage}/workers/mpi_allreduce.py"])
    assert result.returncode == 0, result.stderr
    assert "MPI OK size=6 sum=21" in result.stdout


def test_pmix_fence_that_times_out_names_the_wait(stage, outdir):
    # Across two nodes dlaunch-mpi agrees through PMIx's fence; task 1 never runs dlaunch-mpi. Slurm's PMIx
    # ignores PMIX_TIMEOUT, so only dlaunch's own deadline ends the wait. Task 1 ends by itself (8 s) rather
    # than by --kill-on-bad-exit: a step killed early may drop task 0's last stderr line.
    conf = f"{outdir}/multi.conf"
    with open(conf, "w") as f:
        f.write(f"0 {stage}/dlaunch-mpi --fence-timeout 2 --no-python touch {outdir}/started\n1 sleep 8\n")
    start = time.monotonic()
    result = srun(["--mpi=pmix", "-N2", "-n2", "--multi-prog", conf], timeout=90)
    elapsed = time.monotonic() - start
    assert result.returncode != 0
    assert "dlaunch: pmix: rank 0: fence: not every one of the 2 tasks arrived within 2 s" in result.stderr, \
        result.stderr
    assert f"task 0: Exited with exit code {LAUNCH_FAILED}" in result.stderr  # launch failure (exit_codes.hpp)
    assert not os.path.exists(f"{outdir}/started")
    assert elapsed < 40, f"took {elapsed:.1f} s: the timeout did not bound the wait"


@pytest.mark.parametrize("mpi", ["--mpi=pmix", "--mpi=none"])
def test_agents_one_per_node(stage, outdir, mpi):
    result = srun([mpi, "-N3", "--ntasks-per-node=1", f"{stage}/dlaunch", "--nproc-per-node", "2",
                   f"{stage}/workers/dump_env.py", outdir])
    assert result.returncode == 0, result.stderr
    ranks = dumps(outdir, 6)
    check_world(ranks, 6, 2)  # rank 0 on the first node
    for rank, d in enumerate(ranks):
        assert d["env"]["LOCAL_RANK"] == str(rank % 2)
        assert d["env"]["TORCHELASTIC_MAX_RESTARTS"] == "0"


@pytest.mark.parametrize("mpi", ["--mpi=pmix", "--mpi=none"])
def test_agents_whose_gpu_counts_differ_make_one_world_ranked_node_by_node(stage, outdir, mpi):
    """--nproc-per-node gpu where node i sees i + 1 GPUs (a JURECA-DC booster's topology, CUDA_VISIBLE_DEVICES
    narrowed per node, no binding): the agents tell each other their counts (MUNGE-proved) before the workers
    start, so the world is 1 + 2 + 3 and ranks go node by node, as torchrun numbers them."""
    agent = (f"CUDA_VISIBLE_DEVICES=$(seq -s, 0 $SLURM_NODEID) exec {stage}/dlaunch --topology-xml "
             f"{stage}/topologies/jwc09n003.xml --bind none --nproc-per-node gpu {stage}/workers/dump_env.py {outdir}")
    result = srun([mpi, "-N3", "--ntasks-per-node=1", "bash", "-c", agent])
    assert result.returncode == 0, result.stderr
    ranks = dumps(outdir, 6)
    first = {0: 0, 1: 1, 2: 3}  # each node's first rank
    for rank, d in enumerate(ranks):
        env = d["env"]
        node = max(n for n, r in first.items() if r <= rank)
        assert d["node"] == NODES[node], (rank, d["node"])
        assert env["WORLD_SIZE"] == "6" and env["GROUP_RANK"] == str(node), (rank, env)
        assert env["LOCAL_RANK"] == str(rank - first[node]) and env["LOCAL_WORLD_SIZE"] == str(node + 1), (rank, env)
        assert env["ROLE_RANK"] == str(rank) and env["ROLE_WORLD_SIZE"] == "6", (rank, env)
    assert "DLAUNCH_RDZV_SECRET" not in result.stderr, result.stderr  # proved with MUNGE, not a secret


def test_agents_whose_gpu_counts_differ_restart_as_a_group_with_the_same_ranks(stage, outdir):
    """As above with --max-restarts 1: the last rank (on the third node) fails in attempt 0, and every node
    starts attempt 1 with the same node-by-node ranks and the group's world size of 6."""
    worker = os.path.join(outdir, "fail_then_dump.py")
    with open(worker, "w") as f:
        f.write("import os, runpy, sys, time\n"
                "if os.environ['TORCHELASTIC_RESTART_COUNT'] == '0':\n"
                "    sys.exit(3) if os.environ['RANK'] == '5' else time.sleep(60)\n"
                f"sys.argv = ['dump_env.py', {outdir!r}]\n"
                f"runpy.run_path('{stage}/workers/dump_env.py', run_name='__main__')\n")
    agent = (f"CUDA_VISIBLE_DEVICES=$(seq -s, 0 $SLURM_NODEID) exec {stage}/dlaunch --topology-xml "
             f"{stage}/topologies/jwc09n003.xml --bind none --nproc-per-node gpu --max-restarts 1 --grace 2 {worker}")
    result = srun(["-N3", "--ntasks-per-node=1", "bash", "-c", agent])
    assert result.returncode == 0, result.stderr
    assert "attempt 1 on 3 node(s), world size 6" in result.stderr, result.stderr
    ranks = dumps(outdir, 6)
    for rank, d in enumerate(ranks):
        env = d["env"]
        assert env["TORCHELASTIC_RESTART_COUNT"] == "1" and env["WORLD_SIZE"] == "6", (rank, env)
        assert d["node"] == NODES[0 if rank < 1 else 1 if rank < 3 else 2], (rank, d["node"])


def test_agents_with_cpus_per_task_keep_their_workers_in_the_agents_cpus(stage, outdir):
    # -c2: Slurm gives each agent (one task per node) both cores of its node; its workers share them.
    result = srun(["-N3", "--ntasks-per-node=1", "-c2", f"{stage}/dlaunch", "--nproc-per-node", "2",
                   f"{stage}/workers/dump_env.py", outdir])
    assert result.returncode == 0, result.stderr
    ranks = dumps(outdir, 6)
    check_world(ranks, 6, 2)
    for d in ranks:
        assert d["step_cpus"] == [0, 1] and set(d["cpus"]) <= {0, 1}, d["cpus"]


def test_agents_run_the_ddp_example(stage):
    result = srun(["-N3", "--ntasks-per-node=1", f"{stage}/dlaunch", "--nproc-per-node", "2",
                   f"{stage}/examples/ddp_allreduce.py"])
    assert result.returncode == 0, result.stderr
    assert "[0:0]:OK world=6 sum=21.0" in result.stdout, result.stdout


def test_doctor_on_every_node_finds_each_ready_with_the_plugin_loaded(stage, outdir):
    # stdout alone in each node's file: slurmstepd's own messages (a working directory that node lacks) go to
    # stderr.
    result = srun(["-N3", "--ntasks-per-node=1", "--chdir", outdir, "-o", os.path.join(outdir, "doctor-%N.json"),
                   "-e", os.path.join(outdir, "doctor-%N.err"), f"{stage}/dlaunch", "doctor", "--format", "json",
                   "--log-dir", outdir])
    assert result.returncode == 0, result.stderr
    reports = [json.load(open(os.path.join(outdir, f"doctor-{node}.json"))) for node in NODES]
    assert [r["host"] for r in reports] == NODES and all(r["ready"] for r in reports), reports
    for r in reports:
        checks = {c["name"]: c for c in r["checks"]}
        assert "srun offers --dist-launch" in checks["spank-plugin"]["detail"], checks["spank-plugin"]
        assert checks["srun-mpi"]["verdict"] == "ok" and "pmix" in checks["srun-mpi"]["detail"], checks["srun-mpi"]
        assert checks["ports"]["detail"].startswith("Slurm job "), checks["ports"]
        assert "Slurm binding " in checks["cpuset"]["detail"], checks["cpuset"]
    # Node 0 gathered every node's report: all ready, clocks together, one log directory.
    every = reports[0]["every_node"]
    assert every["ready"], every
    checks = {c["name"]: c for c in every["checks"]}
    assert [checks[f"node {n}"]["verdict"] for n in NODES] == ["ok"] * len(NODES), every
    assert checks["clock-skew"]["verdict"] == "ok", checks["clock-skew"]
    assert checks["shared-log-dir"]["detail"] == f"{outdir} is one directory on all {len(NODES)} nodes", every
    assert all("every_node" not in r for r in reports[1:])


def test_doctor_on_every_node_fails_a_log_directory_each_node_has_its_own(stage, outdir):
    # Each node of the test cluster has its own /tmp: a job's records there would not be seen by node 0.
    result = srun(["-N3", "--ntasks-per-node=1", "--chdir", outdir, f"{stage}/dlaunch", "doctor", "--log-dir",
                   "/tmp"])
    assert result.returncode == 78, result.stdout + result.stderr
    assert f"dlaunch doctor on every node ({len(NODES)} nodes)" in result.stdout, result.stdout
    others = ", ".join(NODES[1:])
    assert f"/tmp is not the directory {NODES[0]} has on {others} (they do not see its marker file)" \
        in result.stdout, result.stdout
    assert "fix: give --log-dir a directory on a file system every node mounts" in result.stdout
    assert "not ready: 1 check failed (shared-log-dir)" in result.stdout, result.stdout


def test_agents_refuse_two_per_node(stage):
    result = srun(["-N1", "-n2", f"{stage}/dlaunch", "--nproc-per-node", "1", "--no-python", "true"])
    assert result.returncode != 0
    assert "dlaunch: rdzv: slurm: 2 dlaunch agents on this node; dlaunch runs one agent per node" in result.stderr


def test_worker_failure_on_one_node_ends_the_step_with_a_summary(stage):
    start = time.monotonic()
    result = srun(["-N3", "--ntasks-per-node=1", f"{stage}/dlaunch", "--nproc-per-node", "2", "--grace", "2",
                   f"{stage}/workers/fail_rank.py", "3", "5"])
    elapsed = time.monotonic() - start
    assert result.returncode != 0
    assert elapsed < 40, f"the other nodes kept waiting ({elapsed:.0f} s)"
    assert f"root cause: rank 3 (local rank 1, node 1, host {NODES[1]}" in result.stderr, result.stderr
    assert "exit code 5" in result.stderr
    assert "rank 3 gives up" in result.stderr
    assert "ending Slurm step" in result.stderr
