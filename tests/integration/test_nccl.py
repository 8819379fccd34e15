"""dlaunch::nccl with the real NCCL (no GPU needed for the ids): every rank holds the same unique ids under
mpirun dlaunch-mpi and the dlaunch agent (TCP through rank 0), a plain mpirun (PMIx), one id per root;
the example's behaviour."""
import os
import re
import subprocess

from conftest import dlaunch_bin

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
LINE = re.compile(r"rank (\d+)/(\d+) via (\w+) ids (\d+) ([0-9a-f]+)$")
ID_BYTES = 128  # sizeof(ncclUniqueId)


def program(var, what):
    path = os.environ.get(var, "")
    assert path and os.access(path, os.X_OK), f"{var} must name the built {what} (configure with DLAUNCH_NCCL=ON)"
    return path


def run(cmd, env=None, timeout=120):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, **(env or {})))


def ids_of_every_rank(result, world, via, nids):
    assert result.returncode == 0, result.stderr
    ids = {}
    for line in result.stdout.splitlines():
        m = LINE.search(line)
        if m:
            assert (int(m.group(2)), m.group(3), int(m.group(4))) == (world, via, nids), line
            ids[int(m.group(1))] = bytes.fromhex(m.group(5))
    assert sorted(ids) == list(range(world)), result.stdout
    assert len(set(ids.values())) == 1, "ranks hold different ids"
    blob = ids[0]
    assert len(blob) == nids * ID_BYTES
    chunks = [blob[i * ID_BYTES:(i + 1) * ID_BYTES] for i in range(nids)]
    assert all(any(chunks[i]) for i in range(nids)), "an id is all zeros"
    assert len(set(chunks)) == nids, "two roots produced the same id"
    return blob


def test_four_ranks_under_mpirun_hold_the_same_id():
    cmd = [*MPIRUN, "-np", "4", program("DLAUNCH_MPI_BIN", "dlaunch-mpi"), "--no-python",
           program("DLAUNCH_NCCL_IDS", "nccl_ids")]
    first = ids_of_every_rank(run(cmd), 4, "tcp", 1)
    second = ids_of_every_rank(run(cmd), 4, "tcp", 1)
    assert first != second, "ncclGetUniqueId must give a fresh id per job"


def test_plain_mpirun_uses_pmix():
    ids_of_every_rank(run([*MPIRUN, "-np", "4", program("DLAUNCH_NCCL_IDS", "nccl_ids")]), 4, "pmix", 1)


def test_four_agent_workers_hold_the_same_id():
    ids_of_every_rank(run([dlaunch_bin(), "--nproc-per-node", "4", "--no-python",
                           program("DLAUNCH_NCCL_IDS", "nccl_ids")]), 4, "tcp", 1)


def test_several_roots_give_several_ids():
    for launcher, via in (([program("DLAUNCH_MPI_BIN", "dlaunch-mpi"), "--no-python"], "tcp"), ([], "pmix")):
        cmd = [*MPIRUN, "-x", "DLAUNCH_NCCL_RANKS_PER_ROOT", "-np", "4", *launcher, program("DLAUNCH_NCCL_IDS", "nccl_ids")]
        ids_of_every_rank(run(cmd, env={"DLAUNCH_NCCL_RANKS_PER_ROOT": "2"}), 4, via, 2)


def has_gpu():
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def test_example_allreduce():
    """With a GPU: one rank all-reduces and prints its bandwidth. Without: every rank says why, exit 1."""
    example = program("DLAUNCH_NCCL_EXAMPLE", "examples/nccl_allreduce")
    result = run([dlaunch_bin(), "--nproc-per-node", "1", "--no-python", example, str(64 << 20), "5"])
    if has_gpu():
        assert result.returncode == 0, result.stderr
        assert "OK sum=1 over 1 ranks" in result.stdout
        assert "busbw GB/s" in result.stdout
    else:
        assert result.returncode == 1
        assert "nccl: rank 0: no CUDA device" in result.stderr
        assert "run on a node with an NVIDIA GPU" in result.stderr


def test_example_rejects_bad_arguments():
    result = run([program("DLAUNCH_NCCL_EXAMPLE", "examples/nccl_allreduce"), "lots"])
    assert result.returncode == 2
    assert "usage: nccl_allreduce" in result.stderr
