"""dlaunch-mpi under MPICH's Hydra on one node (Debian's mpich: mpiexec.hydra), outside Slurm: every rank's
place from Hydra's PMI server over PMI_FD, in PMI-1 (Hydra's default) and PMI-2; the DDP example; a rank that
never arrives; and Open MPI's mpirun staying the one the other tests run. Hydra inside an sbatch job and
across two nodes: tests/slurm/test_mpi_launchers.py."""
import json
import os
import shutil
import socket
import subprocess
import time

import pytest

SOURCE = os.environ.get("DLAUNCH_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
PYTHON = os.environ.get("PYTHON_EXEC", "/usr/bin/python3")
WORKERS = os.path.join(SOURCE, "tests", "slurm", "workers")
LAUNCH_FAILED = 71


@pytest.fixture(scope="module")
def hydra():
    path = shutil.which("mpiexec.hydra")
    assert path, "mpiexec.hydra is missing: install Debian's mpich (packaging/debian-deps.sh)"
    return path


def dlaunch_mpi():
    path = os.environ.get("DLAUNCH_MPI_BIN", "")
    assert path and os.path.exists(path), "DLAUNCH_MPI_BIN must name the built dlaunch-mpi"
    return path


def run(cmd, timeout=120, env=None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "PMIX_", "OMPI_", "SLURM_"))}
    full_env.update(PYTHON_EXEC=PYTHON, **(env or {}))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)


@pytest.mark.parametrize("version", ["1", "2"])
def test_every_rank_takes_its_place_from_hydras_pmi(hydra, tmp_path, version):
    result = run([hydra, "-n", "4", dlaunch_mpi(), "-v", os.path.join(WORKERS, "dump_env.py"), str(tmp_path)],
                 env={"DLAUNCH_PMI_VERSION": version})
    assert result.returncode == 0, result.stderr
    assert result.stderr.count(f"(pmi-{version}), node 0 of 1") == 4, result.stderr
    dumps = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(4)]
    assert len({(d["env"]["MASTER_ADDR"], d["env"]["MASTER_PORT"]) for d in dumps}) == 1
    assert len({d["env"]["TORCHELASTIC_RUN_ID"] for d in dumps}) == 1
    for rank, d in enumerate(dumps):
        env = d["env"]
        assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == \
            (str(rank), "4", str(rank), "4")
        assert env["GROUP_RANK"] == "0" and env["GROUP_WORLD_SIZE"] == "1"
        assert env["PMI_RANK"] == str(rank)  # Hydra's own, left as it set it
        # The connection was finalized before exec: Hydra closed it, so the script must not see it.
        assert "PMI_FD" not in env


def test_the_ddp_example_runs_under_hydra(hydra):
    result = run([hydra, "-n", "4", dlaunch_mpi(), os.path.join(SOURCE, "examples", "ddp_allreduce.py")])
    assert result.returncode == 0, result.stderr
    assert "OK world=4 sum=10.0" in result.stdout


def test_the_ranks_exit_codes_are_hydras(hydra):
    # Hydra ORs its ranks' exit codes: 3 | 4.
    result = run([hydra, "-n", "2", dlaunch_mpi(), "--no-python", "sh", "-c", 'exit $((3 + RANK))'])
    assert result.returncode == 7, result.stderr


def test_a_rank_that_never_arrives_ends_the_wait_at_the_fence_timeout(hydra, tmp_path):
    # The rank that timed out aborts the job through PMI: Hydra ends the sleeping rank too, at once.
    start = time.monotonic()
    fencing = [dlaunch_mpi(), "--fence-timeout", "2", "--no-python", "touch", str(tmp_path / "started")]
    result = run([hydra, "-n", "1", *fencing, ":", "-n", "1", "sleep", "30"], timeout=60)
    assert result.returncode != 0
    assert "dlaunch: job: pmi-1: no 'barrier_out' from the server within 2 s" in result.stderr, result.stderr
    assert not (tmp_path / "started").exists()
    assert time.monotonic() - start < 25, "the fence timeout did not bound the wait"


def test_two_of_hydras_nodes_on_one_host_do_not_both_give_out_local_rank_0(hydra):
    # localhost and this host's name are two nodes to Hydra's placement, one host in fact.
    result = run([hydra, "-hosts", f"localhost,{socket.gethostname()}", "-ppn", "2", "-n", "4", dlaunch_mpi(),
                  "--no-python", "true"], timeout=60)
    assert result.returncode == LAUNCH_FAILED, result.stderr
    assert "pmi-1: not one world: two processes on this node say they are local rank " in result.stderr, result.stderr
    assert "name each host once" in result.stderr


def test_a_pmi_fd_that_is_not_hydras_stops_the_rank():
    result = run([dlaunch_mpi(), "--no-python", "true"], env={"PMI_FD": "57", "PMI_RANK": "0", "PMI_SIZE": "2"})
    assert result.returncode == LAUNCH_FAILED, result.stderr
    assert "dlaunch: job: pmi: PMI_FD='57' is not an open socket of this process" in result.stderr


def test_mpich_beside_open_mpi_leaves_mpirun_to_open_mpi():
    # Debian's alternatives: Open MPI's mpirun has the higher priority; the other tests use `mpirun`.
    version = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, timeout=30)
    assert "Open MPI" in version.stdout + version.stderr, version.stdout + version.stderr
