"""dlaunch on a real two-node Slurm cluster (tests/slurm/cluster.sh): dlaunch-mpi under srun with and without
PMIx, dlaunch agents one per node, mpi4py, and a worker failure on one node ending the whole step.

CTest starts the cluster first (fixture) and stages the binaries where both nodes see them
(DLAUNCH_SLURM_STAGE). Two slurmd share this host, so Open MPI programs use TCP between "nodes"
(OMPI_MCA_btl=tcp,self): its shared-memory transport assumes different nodes are different hosts.
"""
import json
import os
import subprocess
import time

import pytest

BASE = os.environ.get("DLAUNCH_SLURM_BASE", "/var/lib/dlaunch-test-slurm")
PYTHON = os.environ.get("PYTHON_EXEC", "/usr/bin/python3")


@pytest.fixture(scope="module")
def stage():
    path = os.environ.get("DLAUNCH_SLURM_STAGE", "")
    assert path and os.path.isdir(path), "DLAUNCH_SLURM_STAGE must name the staged directory (tests/slurm/stage.sh)"
    return path


@pytest.fixture()
def outdir(stage):
    """A fresh directory both nodes can write to."""
    path = os.path.join(BASE, "shared", "out", f"{os.getpid()}-{time.monotonic_ns()}")
    os.makedirs(path)
    os.chmod(path, 0o777)
    return path


def srun(args, timeout=120, env=None):
    full_env = dict(os.environ, SLURM_CONF=os.path.join(BASE, "slurm.conf"), PYTHON_EXEC=PYTHON,
                    OMPI_MCA_btl="tcp,self", **(env or {}))
    result = subprocess.run(["srun", "--immediate=60", *args], capture_output=True, text=True, timeout=timeout,
                            env=full_env)
    return result


def dumps(outdir, n):
    return [json.load(open(os.path.join(outdir, f"rank{r}.json"))) for r in range(n)]


def check_world(ranks, world, nodes_of_rank):
    ports = {d["env"]["MASTER_PORT"] for d in ranks}
    addrs = {d["env"]["MASTER_ADDR"] for d in ranks}
    assert len(ports) == 1 and len(addrs) == 1, (ports, addrs)
    for rank, d in enumerate(ranks):
        env = d["env"]
        assert env["RANK"] == str(rank) and env["WORLD_SIZE"] == str(world)
        assert d["node"] == nodes_of_rank[rank], (rank, d["node"])
        assert env["GROUP_RANK"] == str(int(d["node"][-1]) - 1)
        assert env["GROUP_WORLD_SIZE"] == "2"
        assert env["DLAUNCH_TEST_TASK_PROLOG"] == "ran"


@pytest.mark.parametrize("mpi", ["--mpi=pmix", "--mpi=none"])
def test_dlaunch_mpi_env_contract_under_srun(stage, outdir, mpi):
    result = srun([mpi, "-N2", "-n4", f"{stage}/dlaunch-mpi", f"{stage}/workers/dump_env.py", outdir])
    assert result.returncode == 0, result.stderr
    ranks = dumps(outdir, 4)
    check_world(ranks, 4, ["node1", "node1", "node2", "node2"])
    for rank, d in enumerate(ranks):
        assert d["env"]["LOCAL_RANK"] == str(rank % 2) and d["env"]["LOCAL_WORLD_SIZE"] == "2"
        job, step = d["env"]["SLURM_JOB_ID"], d["env"]["SLURM_STEP_ID"]
        assert d["env"]["TORCHELASTIC_RUN_ID"] == f"{job}.{step}"
    if mpi == "--mpi=none":
        port = int(ranks[0]["env"]["MASTER_PORT"])
        assert 21000 <= port <= 28999, "without PMIx the port comes from the job and step ids in --port-range"


@pytest.mark.parametrize("mpi", ["--mpi=pmix", "--mpi=none"])
def test_dlaunch_mpi_ddp_example_under_srun(stage, mpi):
    result = srun([mpi, "-N2", "-n4", f"{stage}/dlaunch-mpi", f"{stage}/examples/ddp_allreduce.py"])
    assert result.returncode == 0, result.stderr
    assert "OK world=4 sum=10.0" in result.stdout


def test_mpi4py_under_srun_pmix(stage):
    result = srun(["--mpi=pmix", "-N2", "-n4", f"{stage}/dlaunch-mpi", f"{stage}/workers/mpi_allreduce.py"])
    assert result.returncode == 0, result.stderr
    assert "MPI OK size=4 sum=10" in result.stdout


def test_pmix_fence_that_times_out_names_the_wait(stage, outdir):
    # Across two nodes dlaunch-mpi agrees through PMIx's fence; task 1 never runs dlaunch-mpi. Slurm's PMIx
    # ignores PMIX_TIMEOUT, so only dlaunch's own deadline ends the wait. Task 1 ends by itself (8 s) rather
    # than by --kill-on-bad-exit: a step killed early may drop task 0's last stderr line.
    conf = os.path.join(outdir, "multi.conf")
    with open(conf, "w") as f:
        f.write(f"0 {stage}/dlaunch-mpi --fence-timeout 2 --no-python touch {outdir}/started\n1 sleep 8\n")
    start = time.monotonic()
    result = srun(["--mpi=pmix", "-N2", "-n2", "--multi-prog", conf], timeout=90)
    elapsed = time.monotonic() - start
    assert result.returncode != 0
    assert "dlaunch: pmix: rank 0: fence: not every one of the 2 tasks arrived within 2 s" in result.stderr, \
        result.stderr
    assert "task 0: Exited with exit code 3" in result.stderr  # launch failure (exit_codes.hpp)
    assert not os.path.exists(os.path.join(outdir, "started"))
    assert elapsed < 40, f"took {elapsed:.1f} s: the timeout did not bound the wait"


@pytest.mark.parametrize("mpi", ["--mpi=pmix", "--mpi=none"])
def test_agents_one_per_node(stage, outdir, mpi):
    result = srun([mpi, "-N2", "--ntasks-per-node=1", f"{stage}/dlaunch", "--nproc-per-node", "2",
                   f"{stage}/workers/dump_env.py", outdir])
    assert result.returncode == 0, result.stderr
    ranks = dumps(outdir, 4)
    check_world(ranks, 4, ["node1", "node1", "node2", "node2"])  # rank 0 on the first node
    for rank, d in enumerate(ranks):
        assert d["env"]["LOCAL_RANK"] == str(rank % 2)
        assert d["env"]["TORCHELASTIC_MAX_RESTARTS"] == "0"


def test_agents_run_the_ddp_example(stage):
    result = srun(["-N2", "--ntasks-per-node=1", f"{stage}/dlaunch", "--nproc-per-node", "2",
                   f"{stage}/examples/ddp_allreduce.py"])
    assert result.returncode == 0, result.stderr
    assert "[0:0]:OK world=4 sum=10.0" in result.stdout


def test_agents_refuse_two_per_node(stage):
    result = srun(["-N1", "-n2", f"{stage}/dlaunch", "--nproc-per-node", "1", "--no-python", "true"])
    assert result.returncode != 0
    assert "dlaunch: rdzv: slurm: 2 dlaunch agents on this node; dlaunch runs one agent per node" in result.stderr


def test_worker_failure_on_one_node_ends_the_step_with_a_summary(stage):
    start = time.monotonic()
    result = srun(["-N2", "--ntasks-per-node=1", f"{stage}/dlaunch", "--nproc-per-node", "2", "--grace", "2",
                   f"{stage}/workers/fail_rank.py", "3", "5"])
    elapsed = time.monotonic() - start
    assert result.returncode != 0
    assert elapsed < 40, f"the other node kept waiting ({elapsed:.0f} s)"
    assert "root cause: rank 3 (local rank 1, node 1, host node2" in result.stderr
    assert "exit code 5" in result.stderr
    assert "rank 3 gives up" in result.stderr
    assert "ending Slurm step" in result.stderr
