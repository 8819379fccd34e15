"""The environment every rank gets (docs/env-contract.md): names and values identical to torchrun's,
checked from inside real worker processes, for each way of naming the worker command."""

import os
import re
import uuid

import pytest

from conftest import (DUMP_ENV, Background, base_env, describe, free_port, load_rank_dumps, python_exec, run_dlaunch,
                      usable_cpus, write_script)


def launch_dump(tmp_path, *options, env=None, count, script_args=()):
    outdir = tmp_path / "out"
    outdir.mkdir()
    proc = run_dlaunch([*options, DUMP_ENV, outdir, *script_args], env=env)
    assert proc.returncode == 0, describe(proc)
    return proc, load_rank_dumps(outdir, count)


def test_single_node_contract_for_every_rank(tmp_path):
    outdir = tmp_path / "out"
    outdir.mkdir()
    # --no-python: the command is the interpreter itself, run as given (no -u added).
    proc = run_dlaunch(["--nproc-per-node", 4, "--no-python", python_exec(), DUMP_ENV, outdir])
    assert proc.returncode == 0, describe(proc)
    dumps = load_rank_dumps(outdir, 4)
    assert sorted(dumps) == [0, 1, 2, 3]

    ports = set()
    error_files = set()
    for rank, d in dumps.items():
        env = d["environ"]
        assert env["RANK"] == str(rank)
        assert env["LOCAL_RANK"] == str(rank)
        assert env["GROUP_RANK"] == "0"
        assert env["ROLE_RANK"] == str(rank)
        assert env["ROLE_NAME"] == "default"
        assert env["LOCAL_WORLD_SIZE"] == "4"
        assert env["WORLD_SIZE"] == "4"
        assert env["GROUP_WORLD_SIZE"] == "1"
        assert env["ROLE_WORLD_SIZE"] == "4"
        assert env["MASTER_ADDR"] == "127.0.0.1"
        assert re.fullmatch(r"[1-9][0-9]*", env["MASTER_PORT"]) and 0 < int(env["MASTER_PORT"]) < 65536
        ports.add(env["MASTER_PORT"])
        assert env["TORCHELASTIC_RESTART_COUNT"] == "0"
        assert env["TORCHELASTIC_MAX_RESTARTS"] == "0"
        assert env["TORCHELASTIC_RUN_ID"] == "none"
        assert env["TORCHELASTIC_USE_AGENT_STORE"] == "False"
        assert env["DLAUNCH_RESTART_COUNT"] == "0"
        assert env["NCCL_ASYNC_ERROR_HANDLING"] == "1"
        assert env["OMP_NUM_THREADS"] == str(max(1, usable_cpus() // 4))
        error_file = env["TORCHELASTIC_ERROR_FILE"]
        assert error_file.endswith(f"/attempt_0/{rank}/error.json"), error_file
        error_files.add(error_file)
        # --no-python runs the command as given.
        assert d["orig_argv"] == [python_exec(), str(DUMP_ENV), str(outdir)]
        assert d["argv"] == [str(DUMP_ENV), str(outdir)]
    assert len(ports) == 1, f"ranks disagree on MASTER_PORT: {ports}"
    assert len(error_files) == 4, "every rank needs its own TORCHELASTIC_ERROR_FILE"
    # Each rank's console lines carry its prefix.
    for rank in range(4):
        assert f"[{rank}]:dumped rank {rank}\n" in proc.stdout


def test_role_run_id_and_max_restarts(tmp_path):
    _, dumps = launch_dump(tmp_path, "--nproc-per-node", 2, "--role", "trainer", "--rdzv-id", "job-42",
                           "--max-restarts", 3, count=2)
    for rank, d in dumps.items():
        env = d["environ"]
        assert env["ROLE_NAME"] == "trainer"
        assert env["ROLE_RANK"] == str(rank)
        assert env["TORCHELASTIC_RUN_ID"] == "job-42"
        assert env["TORCHELASTIC_MAX_RESTARTS"] == "3"
        assert "job-42_" in env["TORCHELASTIC_ERROR_FILE"]


def test_standalone_run_id_is_one_uuid_for_all_ranks(tmp_path):
    _, dumps = launch_dump(tmp_path, "--standalone", "--nproc-per-node", 3, count=3)
    ids = {d["environ"]["TORCHELASTIC_RUN_ID"] for d in dumps.values()}
    assert len(ids) == 1, ids
    run_id = ids.pop()
    assert str(uuid.UUID(run_id)) == run_id and run_id != "none"
    assert {d["environ"]["MASTER_ADDR"] for d in dumps.values()} == {"127.0.0.1"}


def test_omp_num_threads_default_and_user_value(tmp_path):
    # One worker gets every usable CPU: the default is not trivially 1 on a multi-core machine.
    _, dumps = launch_dump(tmp_path, "--nproc-per-node", 1, count=1)
    assert dumps[0]["environ"]["OMP_NUM_THREADS"] == str(max(1, usable_cpus()))

    (tmp_path / "out").rename(tmp_path / "first")
    _, dumps = launch_dump(tmp_path, "--nproc-per-node", 2, env={"OMP_NUM_THREADS": "7",
                                                                "NCCL_ASYNC_ERROR_HANDLING": "0"}, count=2)
    for d in dumps.values():
        assert d["environ"]["OMP_NUM_THREADS"] == "7"
        assert d["environ"]["NCCL_ASYNC_ERROR_HANDLING"] == "0"


def test_omp_num_threads_follows_cpu_affinity(tmp_path):
    # Usable CPUs are those dlaunch may run on (its affinity), not all CPUs of the machine.
    cpu = sorted(os.sched_getaffinity(0))[0]
    outdir = tmp_path / "out"
    outdir.mkdir()
    proc = run_dlaunch(["--nproc-per-node", 1, DUMP_ENV, outdir],
                       preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    assert proc.returncode == 0, describe(proc)
    assert load_rank_dumps(outdir, 1)[0]["environ"]["OMP_NUM_THREADS"] == "1"


def test_other_variables_pass_through(tmp_path):
    _, dumps = launch_dump(tmp_path, "--nproc-per-node", 2, env={"MY_JOB_SETTING": "a=b c", "EMPTY_ONE": ""}, count=2)
    for d in dumps.values():
        assert d["environ"]["MY_JOB_SETTING"] == "a=b c"
        assert d["environ"]["EMPTY_ONE"] == ""


def test_launcher_owned_variables_override_inherited_ones(tmp_path):
    env = base_env({"RANK": "99", "WORLD_SIZE": "99", "MASTER_PORT": "1", "TORCHELASTIC_RUN_ID": "stale"})
    _, dumps = launch_dump(tmp_path, "--nproc-per-node", 2, env=env, count=2)
    for rank, d in dumps.items():
        assert d["environ"]["RANK"] == str(rank)
        assert d["environ"]["WORLD_SIZE"] == "2"
        assert d["environ"]["MASTER_PORT"] != "1"
        assert d["environ"]["TORCHELASTIC_RUN_ID"] == "none"


def test_static_multi_node_second_node(tmp_path):
    # torchrun's static form, node 0 with 1 worker and node 1 with 2: the agents meet at the master first
    # (as torchrun's do in its store), so node 1's ranks are 1 and 2 of 3, as torchrun numbers them.
    outdir = tmp_path / "out"
    outdir.mkdir()
    # Each node keeps its own --master-addr for its workers (node 1 names node 0 otherwise), as torchrun does.
    port = free_port()
    common = ["--nnodes", 2, "--master-port", port]
    node0_dir = tmp_path / "node0"
    node0_dir.mkdir()
    with Background([*common, "--master-addr", "127.0.0.1", "--node-rank", 0, "--nproc-per-node", 1, DUMP_ENV, outdir],
                    node0_dir) as node0:
        proc = run_dlaunch([*common, "--master-addr", "localhost", "--node-rank", 1, "--nproc-per-node", 2, DUMP_ENV,
                            outdir])
        assert proc.returncode == 0, describe(proc)
        assert node0.wait() == 0, node0.stderr()
    dumps = load_rank_dumps(outdir, 3)
    assert dumps[0]["environ"]["LOCAL_WORLD_SIZE"] == "1" and dumps[0]["environ"]["GROUP_RANK"] == "0"
    assert dumps[0]["environ"]["MASTER_ADDR"] == "127.0.0.1"
    for rank in (1, 2):
        env = dumps[rank]["environ"]
        local = rank - 1
        assert env["LOCAL_RANK"] == str(local)
        assert env["GROUP_RANK"] == "1"
        assert env["ROLE_RANK"] == str(rank)
        assert env["WORLD_SIZE"] == "3"
        assert env["ROLE_WORLD_SIZE"] == "3"
        assert env["LOCAL_WORLD_SIZE"] == "2"
        assert env["GROUP_WORLD_SIZE"] == "2"
        assert env["MASTER_ADDR"] == "localhost"
        assert env["MASTER_PORT"] == str(port)
        assert env["TORCHELASTIC_ERROR_FILE"].endswith(f"/attempt_0/{local}/error.json")
        assert f"[1:{rank}]:dumped rank {rank}\n" in proc.stdout
    assert not re.search(r"^\[\d+\]:", proc.stdout, re.M), "multi-node lines must carry [node:rank]:"


@pytest.mark.parametrize("options", [["--nproc-per-node", "3", "--max-restarts", "1"],
                                     ["--nproc_per_node", "3", "--max_restarts", "1"],
                                     ["--nproc-per-node=3", "--max_restarts=1"]])
def test_both_option_spellings(tmp_path, options):
    _, dumps = launch_dump(tmp_path, *options, count=3)
    assert {d["environ"]["WORLD_SIZE"] for d in dumps.values()} == {"3"}
    assert {d["environ"]["TORCHELASTIC_MAX_RESTARTS"] for d in dumps.values()} == {"1"}


def test_pet_environment_fallback(tmp_path):
    _, dumps = launch_dump(tmp_path, env={"PET_NPROC_PER_NODE": "3"}, count=3)
    assert {d["environ"]["LOCAL_WORLD_SIZE"] for d in dumps.values()} == {"3"}


def test_command_line_wins_over_pet(tmp_path):
    _, dumps = launch_dump(tmp_path, "--nproc-per-node", 2,
                           env={"PET_NPROC_PER_NODE": "3", "PET_RDZV_ID": "from-pet"}, count=2)
    assert {d["environ"]["LOCAL_WORLD_SIZE"] for d in dumps.values()} == {"2"}
    # Options not on the command line still come from PET_.
    assert {d["environ"]["TORCHELASTIC_RUN_ID"] for d in dumps.values()} == {"from-pet"}


def test_local_rank_macro_in_script_args(tmp_path):
    _, dumps = launch_dump(tmp_path, "--nproc-per-node", 3,
                           script_args=["--shard=${local_rank}", "plain", "x${local_rank}y${local_rank}"], count=3)
    for rank, d in dumps.items():
        assert d["argv"][2:] == [f"--shard={rank}", "plain", f"x{rank}y{rank}"]


def test_python_script_runs_under_python_exec_unbuffered(tmp_path):
    _, dumps = launch_dump(tmp_path, "--nproc-per-node", 2, count=2)
    for d in dumps.values():
        assert d["executable"] == python_exec()
        assert d["orig_argv"][:3] == [python_exec(), "-u", str(DUMP_ENV)]
        assert d["unbuffered"] is True
        assert d["name"] == "__main__"


def test_module_mode(tmp_path):
    pkg = tmp_path / "modsrc" / "dlaunch_probe_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "entry.py").write_text(DUMP_ENV.read_text())
    outdir = tmp_path / "out"
    outdir.mkdir()
    proc = run_dlaunch(["--nproc-per-node", 2, "-m", "dlaunch_probe_pkg.entry", outdir, "${local_rank}"],
                       env={"PYTHONPATH": str(tmp_path / "modsrc")})
    assert proc.returncode == 0, describe(proc)
    dumps = load_rank_dumps(outdir, 2)
    for rank, d in dumps.items():
        assert d["name"] == "__main__"
        assert d["orig_argv"][:4] == [python_exec(), "-u", "-m", "dlaunch_probe_pkg.entry"]
        assert d["argv"][0] == str(pkg / "entry.py")
        assert d["argv"][1:] == [str(outdir), str(rank)]


def test_run_path_mode(tmp_path):
    script = write_script(tmp_path, "via_run_path.py", DUMP_ENV.read_text())
    outdir = tmp_path / "out"
    outdir.mkdir()
    proc = run_dlaunch(["--nproc-per-node", 2, "--run-path", script, outdir])
    assert proc.returncode == 0, describe(proc)
    dumps = load_rank_dumps(outdir, 2)
    for d in dumps.values():
        assert d["name"] == "__main__"
        assert d["orig_argv"][:3] == [python_exec(), "-u", "-c"]
        assert d["argv"] == [str(script), str(outdir)]


def test_script_options_after_the_script_belong_to_the_script(tmp_path):
    _, dumps = launch_dump(tmp_path, "--nproc-per-node", 1,
                           script_args=["--nproc-per-node", "5", "-m", "--log-dir", "x", "--"], count=1)
    assert dumps[0]["argv"][2:] == ["--nproc-per-node", "5", "-m", "--log-dir", "x", "--"]
    assert dumps[0]["environ"]["WORLD_SIZE"] == "1"


def test_pet_boolean_flag(tmp_path):
    _, dumps = launch_dump(tmp_path, "--nproc-per-node", 2, env={"PET_STANDALONE": "1"}, count=2)
    run_ids = {d["environ"]["TORCHELASTIC_RUN_ID"] for d in dumps.values()}
    assert len(run_ids) == 1 and str(uuid.UUID(run_ids.pop())) != "none"


def test_rdzv_endpoint_sets_master_on_static(tmp_path):
    _, dumps = launch_dump(tmp_path, "--nproc-per-node", 2, "--rdzv-endpoint", "127.0.0.1:29533", count=2)
    for d in dumps.values():
        assert d["environ"]["MASTER_ADDR"] == "127.0.0.1"
        assert d["environ"]["MASTER_PORT"] == "29533"


@pytest.mark.parametrize("endpoint", ["localhost:29400", "localhost:0"])
def test_single_node_c10d_rendezvous_form(tmp_path, endpoint):
    # torchrun's documented single-node form: --rdzv-backend c10d --rdzv-endpoint HOST:PORT. dlaunch
    # accepts c10d on one node (--help), so the run must start with one MASTER_PORT for all ranks.
    _, dumps = launch_dump(tmp_path, "--nproc-per-node", 2, "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
                           "--rdzv-id", "c10djob", count=2)
    ports = {d["environ"]["MASTER_PORT"] for d in dumps.values()}
    assert len(ports) == 1 and 0 < int(ports.pop()) < 65536
    assert {d["environ"]["TORCHELASTIC_RUN_ID"] for d in dumps.values()} == {"c10djob"}


def test_compatibility_options_are_accepted(tmp_path):
    # torchrun options with no effect in dlaunch still run the job; --rdzv-conf says it has no effect.
    proc, dumps = launch_dump(tmp_path, "--nproc-per-node", 2, "--monitor-interval", "0.1", "--start-method", "fork",
                              "--rdzv-conf", "timeout=10", "--local-addr", "127.0.0.1", count=2)
    assert "--rdzv-conf timeout=10: has no effect" in proc.stderr
    assert {d["environ"]["MASTER_ADDR"] for d in dumps.values()} == {"127.0.0.1"}


def test_run_id_is_passed_verbatim_and_sanitized_in_paths(tmp_path):
    logs = tmp_path / "logs"
    _, dumps = launch_dump(tmp_path, "--nproc-per-node", 1, "--rdzv-id", "team/exp 1", "--log-dir", logs, count=1)
    env = dumps[0]["environ"]
    assert env["TORCHELASTIC_RUN_ID"] == "team/exp 1"
    run_dirs = [p.name for p in logs.iterdir()]
    assert len(run_dirs) == 1 and re.fullmatch(r"team_exp_1_\w{6}", run_dirs[0]), run_dirs
    assert env["TORCHELASTIC_ERROR_FILE"] == f"{logs}/{run_dirs[0]}/attempt_0/0/error.json"
