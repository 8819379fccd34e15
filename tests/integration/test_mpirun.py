"""dlaunch-mpi under a real Open MPI mpirun on one node: the env contract, the DDP example, mpi4py, bad input.

Every rank of these jobs runs on this node, so dlaunch-mpi agrees on MASTER_ADDR/PORT through its node-local
fence and leaves PMIx to the application; the PMIx path (put, fence, get) is tested on the two-node Slurm
cluster (tests/slurm/test_slurm.py, srun --mpi=pmix)."""
import json
import os
import re
import shlex
import subprocess
import time

import pytest

from conftest import USAGE

SOURCE = os.environ.get("DLAUNCH_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
PYTHON = os.environ.get("PYTHON_EXEC", "/usr/bin/python3")
WORKERS = os.path.join(SOURCE, "tests", "slurm", "workers")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


# Open MPI 5.0.7's mpirun (Debian 13's) dies of SIGSEGV before starting anything when a job has several app
# contexts (`mpirun -np 1 A : -np 1 B`, or --app FILE; open-mpi/ompi#13303). Jobs whose ranks run different
# commands are therefore one app context in which each rank execs its own.
def per_rank(commands):
    """The command line with which rank r (OMPI_COMM_WORLD_RANK) execs commands[r]."""
    cases = " ".join(f"{rank}) exec {shlex.join(command)} ;;" for rank, command in enumerate(commands))
    return ["sh", "-c", f"case $OMPI_COMM_WORLD_RANK in {cases} esac; exit 127"]


def dlaunch_mpi():
    path = os.environ.get("DLAUNCH_MPI_BIN", "")
    assert path and os.path.exists(path), "DLAUNCH_MPI_BIN must name the built dlaunch-mpi"
    return path


def run(cmd, timeout=120, env=None):
    full_env = dict(os.environ, PYTHON_EXEC=PYTHON, **(env or {}))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)


def test_env_contract_of_every_rank(tmp_path):
    result = run([*MPIRUN, "-np", "4", dlaunch_mpi(), os.path.join(WORKERS, "dump_env.py"), str(tmp_path)])
    assert result.returncode == 0, result.stderr
    dumps = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(4)]
    ports = {d["env"]["MASTER_PORT"] for d in dumps}
    addrs = {d["env"]["MASTER_ADDR"] for d in dumps}
    run_ids = {d["env"]["TORCHELASTIC_RUN_ID"] for d in dumps}
    assert len(ports) == 1 and len(addrs) == 1 and len(run_ids) == 1, (ports, addrs, run_ids)
    for rank, d in enumerate(dumps):
        env = d["env"]
        assert env["RANK"] == str(rank)
        assert env["WORLD_SIZE"] == "4"
        assert env["LOCAL_RANK"] == str(rank)  # one node: mpirun maps by slot
        assert env["LOCAL_WORLD_SIZE"] == "4"
        assert env["GROUP_RANK"] == "0" and env["GROUP_WORLD_SIZE"] == "1"
        assert env["ROLE_RANK"] == str(rank) and env["ROLE_WORLD_SIZE"] == "4"
        assert env["TORCHELASTIC_RESTART_COUNT"] == "0"
        assert env["TORCHELASTIC_USE_AGENT_STORE"] == "False"
        # dlaunch-mpi did not connect to PMIx, so it had no reason to change the application's PMIx setup.
        assert "PMIX_MCA_gds" not in env
        assert d["argv"][0].endswith("dump_env.py")


def test_ddp_example_allreduce():
    result = run([*MPIRUN, "-np", "4", dlaunch_mpi(), os.path.join(SOURCE, "examples", "ddp_allreduce.py")])
    assert result.returncode == 0, result.stderr
    assert "OK world=4 sum=10.0" in result.stdout


def usable_cores():
    """The (package, core) pairs of the CPUs this process may run on."""
    def core_of(cpu):
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
        return tuple(open(base + name).read().strip() for name in ("physical_package_id", "core_id"))
    return {core_of(cpu) for cpu in os.sched_getaffinity(0)}


def test_each_rank_is_bound_to_cores_of_its_own():
    """--bind closest: dlaunch-mpi binds each rank to cores of its own before exec."""
    usable = os.sched_getaffinity(0)
    if len(usable_cores()) < 2:
        pytest.skip("SKIP: --bind closest needs two whole cores to give each rank its own")
    report = "import os, json; print(json.dumps([int(os.environ['RANK']), sorted(os.sched_getaffinity(0))]))"
    result = run([*MPIRUN, "--bind-to", "none", "-np", "2", dlaunch_mpi(), "--bind", "closest", "--no-python",
                  PYTHON, "-c", report])
    assert result.returncode == 0, result.stderr
    cpus = dict(json.loads(line) for line in result.stdout.splitlines() if line.startswith("["))
    assert sorted(cpus) == [0, 1], result.stdout
    assert cpus[0] and cpus[1] and not set(cpus[0]) & set(cpus[1]), cpus
    assert set(cpus[0]) | set(cpus[1]) <= usable, (cpus, usable)


def test_mpi4py_program_initialises_mpi_after_exec():
    result = run([*MPIRUN, "-np", "4", dlaunch_mpi(), os.path.join(WORKERS, "mpi_allreduce.py")])
    assert result.returncode == 0, result.stderr
    assert "MPI OK size=4 sum=10" in result.stdout


def test_outside_any_launcher_is_a_clear_error(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMIX_", "PMI_", "OMPI_", "SLURM_", "PALS_", "MV2_"))}
    result = subprocess.run([dlaunch_mpi(), "--no-python", "touch", str(tmp_path / "started")],
                            capture_output=True, text=True, timeout=30, env=env)
    assert result.returncode == USAGE
    assert result.stderr.startswith("dlaunch: job: no parallel launcher started this process")
    for way in ("mpirun -np N dlaunch-mpi", "mpiexec -n N dlaunch-mpi", "srun --mpi=pmix", "srun -n N dlaunch-mpi"):
        assert way in result.stderr
    assert not (tmp_path / "started").exists()


def test_fence_that_times_out_fails_without_hanging(tmp_path):
    # Rank 1 never runs dlaunch-mpi, so it never arrives at the fence.
    start = time.monotonic()
    fencing = [dlaunch_mpi(), "--fence-timeout", "2", "--no-python", "touch", str(tmp_path / "started")]
    result = run([*MPIRUN, "-np", "2", *per_rank([fencing, ["sleep", "30"]])], timeout=60)
    elapsed = time.monotonic() - start
    assert result.returncode != 0
    assert "dlaunch: job: rank 0: fence: not every one of the 2 tasks arrived within 2 s (missing: rank 1)" \
        in result.stderr
    assert "raise --fence-timeout" in result.stderr
    assert not (tmp_path / "started").exists()
    assert elapsed < 25, f"took {elapsed:.1f} s: the timeout did not bound the wait"


def test_fence_names_a_missing_rank_0(tmp_path):
    # Rank 0 never runs dlaunch-mpi: ranks 1 and 2 agree without it, and whichever gathers names it.
    start = time.monotonic()
    fencing = [dlaunch_mpi(), "--fence-timeout", "2", "--no-python", "touch", str(tmp_path / "started")]
    result = run([*MPIRUN, "-np", "3", *per_rank([["sleep", "30"], fencing, fencing])], timeout=60)
    elapsed = time.monotonic() - start
    assert result.returncode != 0
    assert "fence: not every one of the 3 tasks arrived within 2 s (missing: rank 0)" in result.stderr
    assert not (tmp_path / "started").exists()
    assert elapsed < 25, f"took {elapsed:.1f} s: the timeout did not bound the wait"


# --hang-timeout and torchrun's watchdog (docs/hangs.md): dlaunch-mpi stays as the rank's parent and watches it.
def test_a_hang_under_mpirun_is_found_by_each_ranks_dlaunch_mpi(tmp_path):
    # Each rank's dlaunch-mpi judges its own rank, and mpirun ends the job at the first exit: rank 2 (asleep)
    # gets the shorter timeout so that its report is the one that comes first.
    hang = os.path.join(WORKERS, "ddp_hang.py")
    patient, impatient = [dlaunch_mpi(), "--hang-timeout", "60", hang], [dlaunch_mpi(), "--hang-timeout", "5", hang]
    started = time.monotonic()
    result = run([*MPIRUN, "-np", "4", *per_rank([patient, patient, impatient, patient])], timeout=180,
                 env={"TMPDIR": str(tmp_path)})
    assert result.returncode == 124, result.stderr
    assert time.monotonic() - started < 50, "found after rank 2's timeout, before the others'"
    out = result.stderr
    assert re.search(r"hang: no progress for [56] s \(no output, no CPU time in its main thread\); "
                     r"likeliest culprit: rank 2 \(", out), out
    assert "it is not in a collective: the job's other ranks may wait for it" in out, out
    assert "rank 2 is not in a collective: at " in out and "time.sleep(" in out, out
    assert "dlaunch: rank 2: stacks (" in out and "ddp_hang.py\", line 16 in <module>" in out, out
    assert "exit code: 124" in out, out
    # Rank 2's stacks were only in $TMPDIR: shown above, then removed (mpirun may SIGKILL the other ranks' watchers).
    shown = re.search(r"dlaunch: rank 2: stacks \((\S+)\):", out).group(1)
    assert shown.startswith(str(tmp_path)) and not os.path.exists(shown), shown


def test_a_rank_is_exec_d_unless_watched_and_ends_as_its_program_did():
    parent = ["--no-python", "sh", "-c", "cat /proc/$PPID/comm; exit 3"]
    plain = run([*MPIRUN, "-np", "1", dlaunch_mpi(), *parent])
    assert plain.returncode == 3, plain.stderr
    assert plain.stdout.strip() and "dlaunch" not in plain.stdout, "nothing of dlaunch remains without watching"
    watched = run([*MPIRUN, "-np", "1", dlaunch_mpi(), "--hang-timeout", "60", *parent])
    assert watched.returncode == 3, watched.stderr
    assert watched.stdout.strip() == "dlaunch-mpi", watched.stdout


def test_torchruns_watchdog_under_dlaunch_mpi(tmp_path):
    result = run([*MPIRUN, "-np", "2", "-x", "TORCHELASTIC_ENABLE_FILE_TIMER", dlaunch_mpi(),
                  os.path.join(WORKERS, "file_timer.py")],
                 env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1", "TMPDIR": str(tmp_path)})
    assert result.returncode == 128 + 9, result.stderr
    assert result.stdout.count("entering the slow step") == 2, result.stdout
    assert result.stderr.count("torchrun's watchdog: timer 'slow step' expired; sent SIGKILL to pid ") >= 1, result.stderr
