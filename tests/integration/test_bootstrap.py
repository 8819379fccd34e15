"""dlaunch's bootstrap exchange (what dlaunch::nccl uses to hand out NCCL's unique ids), without NCCL:
TCP through rank 0 for ranks of dlaunch's front-ends, PMIx for a plain mpirun, several roots, errors that
name the rank."""
import os
import re
import socket
import subprocess

from conftest import dlaunch_bin

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
LINE = re.compile(r"rank (\d+)/(\d+) via (\w+) round (\d): (.*)$")


def check_program():
    path = os.environ.get("DLAUNCH_BOOTSTRAP_CHECK", "")
    assert path and os.access(path, os.X_OK), "DLAUNCH_BOOTSTRAP_CHECK must name the built bootstrap_check"
    return path


def dlaunch_mpi():
    path = os.environ.get("DLAUNCH_MPI_BIN", "")
    assert path and os.access(path, os.X_OK), "DLAUNCH_MPI_BIN must name the built dlaunch-mpi"
    return path


def run(cmd, env=None, timeout=120):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, **(env or {})))


def received(stdout, world):
    """{(rank, round): [blobs]} from every rank's lines; asserts each rank reported both rounds."""
    got, vias = {}, set()
    for line in stdout.splitlines():
        m = LINE.search(line)
        if m:
            assert int(m.group(2)) == world, line
            vias.add(m.group(3))
            got[(int(m.group(1)), int(m.group(4)))] = m.group(5).split()
    assert set(got) == {(r, n) for r in range(world) for n in (0, 1)}, stdout
    return got, vias


def expect(got, world, roots):
    for (rank, n), blobs in got.items():
        assert blobs == [f"round{n}-from-{root}" for root in roots], (rank, n, blobs)


def test_agent_workers_exchange_through_rank_0_over_tcp():
    result = run([dlaunch_bin(), "--nproc-per-node", "4", "--no-python", check_program()])
    assert result.returncode == 0, result.stderr
    got, vias = received(result.stdout, 4)
    assert vias == {"tcp"}
    expect(got, 4, [0])


def test_several_roots_over_tcp():
    result = run([dlaunch_bin(), "--nproc-per-node", "5", "--no-python", check_program()],
                 env={"DLAUNCH_NCCL_RANKS_PER_ROOT": "2"})
    assert result.returncode == 0, result.stderr
    got, _ = received(result.stdout, 5)
    expect(got, 5, [0, 1, 3])  # ceil(5/2) = 3 roots, spread evenly


def test_dlaunch_mpi_ranks_exchange_through_rank_0():
    # Not PMIx: the application's PMIx connection after dlaunch-mpi's was not reliable (see identify()).
    result = run([*MPIRUN, "-x", "DLAUNCH_NCCL_RANKS_PER_ROOT", "-np", "4", dlaunch_mpi(), "--no-python",
                  check_program()], env={"DLAUNCH_NCCL_RANKS_PER_ROOT": "2"})
    assert result.returncode == 0, result.stderr
    got, vias = received(result.stdout, 4)
    assert vias == {"tcp"}
    expect(got, 4, [0, 2])


def test_several_roots_over_pmix():
    result = run([*MPIRUN, "-x", "DLAUNCH_NCCL_RANKS_PER_ROOT", "-np", "4", check_program()],
                 env={"DLAUNCH_NCCL_RANKS_PER_ROOT": "2"})
    assert result.returncode == 0, result.stderr
    got, vias = received(result.stdout, 4)
    assert vias == {"pmix"}
    expect(got, 4, [0, 2])


def test_plain_mpirun_takes_rank_and_size_from_pmix():
    result = run([*MPIRUN, "-np", "3", check_program()])
    assert result.returncode == 0, result.stderr
    got, vias = received(result.stdout, 3)
    assert vias == {"pmix"}
    expect(got, 3, [0])


def test_missing_ranks_fail_with_the_ranks_named():
    env = {"RANK": "0", "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "0"}
    result = run([check_program()], env=env)
    assert result.returncode == 1
    assert "MASTER_ADDR/MASTER_PORT are missing or invalid" in result.stderr

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env["MASTER_PORT"] = str(port)
    # Rank 2 alone: nobody listens; it must give up with a message naming rank 0's address.
    lonely = run([check_program()], env=dict(env, RANK="2", DLAUNCH_BOOTSTRAP_TIMEOUT="1"), timeout=120)
    assert lonely.returncode == 1
    assert f"rank 2: rank 0 did not answer at 127.0.0.1:{port}" in lonely.stderr
    # Rank 0 alone: it must give up and list the ranks that never arrived.
    alone = run([check_program()], env=dict(env, DLAUNCH_BOOTSTRAP_TIMEOUT="1"), timeout=120)
    assert alone.returncode == 1
    assert "rank 0: 2 of 3 ranks did not arrive within 1 s (missing: 1,2)" in alone.stderr
    bad = run([check_program()], env=dict(env, DLAUNCH_BOOTSTRAP_TIMEOUT="soon"))
    assert bad.returncode == 1 and "DLAUNCH_BOOTSTRAP_TIMEOUT=soon is not a positive number" in bad.stderr


def test_outside_any_launcher_is_a_clear_error():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMIX_", "OMPI_", "SLURM_")) and k not in ("RANK", "WORLD_SIZE")}
    result = subprocess.run([check_program()], capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 1
    assert "RANK and WORLD_SIZE are missing" in result.stderr
    assert "start the program with dlaunch, dlaunch-mpi or srun --dist-launch" in result.stderr
