"""srun --dist-launch (the SPANK plugin) on the real three-node test cluster: the example without exec bit, the
env contract against agent mode, binding inside Slurm's cpusets (--cpus-per-task), PMIx, concurrent steps,
TaskProlog, bad options, batch steps."""
import json
import os
import re
import shutil
import subprocess

import pytest

from slurmtest import (BASE, CLUSTER, CONF, HOSTS, LAUNCH_FAILED, NODES, PYTHON, USAGE, check_multi_host, dumps, slurm,
                       srun)

# Variables that legitimately differ between two launches of the same layout.
PER_LAUNCH = {"MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE"}


def contract(d):
    """The launcher-set part of a task's environment."""
    names = ("RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE", "WORLD_SIZE",
             "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
             "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
             "DLAUNCH_RESTART_COUNT", "OMP_NUM_THREADS", "NCCL_ASYNC_ERROR_HANDLING", "NCCL_SOCKET_IFNAME",
             "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "UCX_NET_DEVICES", "NCCL_IB_HCA")
    return {k: d["env"].get(k) for k in names}


def test_ddp_example_without_exec_bit(stage):
    script = f"{stage}/examples/ddp_allreduce.py"
    assert not os.access(script, os.X_OK), "the staged example must not be executable"
    result = srun(["-N3", "-n6", "--dist-launch", script])
    assert result.returncode == 0, result.stderr
    assert "OK world=6 sum=21.0" in result.stdout


def test_env_equals_agent_mode_for_the_same_layout(stage, outdir):
    spank_dir, agent_dir = os.path.join(outdir, "spank"), os.path.join(outdir, "agent")
    for d in (spank_dir, agent_dir):
        os.makedirs(d)
        os.chmod(d, 0o777)
    worker = f"{stage}/workers/dump_env.py"
    r1 = srun(["-N3", "-n6", "--dist-launch", worker, spank_dir])
    assert r1.returncode == 0, r1.stderr
    r2 = srun(["-N3", "--ntasks-per-node=1", f"{stage}/dlaunch", "--nproc-per-node", "2", worker, agent_dir])
    assert r2.returncode == 0, r2.stderr
    spank, agent = dumps(spank_dir, 6), dumps(agent_dir, 6)
    check_multi_host(spank)
    check_multi_host(agent)
    for rank in range(6):
        a, b = contract(spank[rank]), contract(agent[rank])
        assert a["RANK"] == str(rank)
        assert {k: v for k, v in a.items() if k not in PER_LAUNCH} == {k: v for k, v in b.items() if k not in PER_LAUNCH}
        assert spank[rank]["node"] == agent[rank]["node"]
        job, step = spank[rank]["env"]["SLURM_JOB_ID"], spank[rank]["env"]["SLURM_STEP_ID"]
        assert a["TORCHELASTIC_RUN_ID"] == f"{job}.{step}"
    assert len({contract(d)["MASTER_PORT"] for d in spank}) == 1


def test_uneven_tasks_per_node_are_ranked_as_slurm_places_them(stage, outdir):
    """srun -N3 -n4: Slurm places 2, 1 and 1 tasks (block). Every task's RANK is its SLURM_PROCID and its
    node's local size and group rank are that node's, as torchrun ranks nodes of different sizes."""
    result = srun(["-N3", "-n4", "--dist-launch", f"{stage}/workers/dump_env.py", outdir])
    assert result.returncode == 0, result.stderr
    ranks = dumps(outdir, 4)
    check_multi_host(ranks)
    nodes, locals_ = [0, 0, 1, 2], [0, 1, 0, 0]
    for rank, d in enumerate(ranks):
        env = d["env"]
        assert d["node"] == NODES[nodes[rank]], (rank, d["node"])
        assert env["RANK"] == str(rank) and env["WORLD_SIZE"] == "4", (rank, env)
        assert env["LOCAL_RANK"] == str(locals_[rank]), (rank, env)
        assert env["LOCAL_WORLD_SIZE"] == ("2" if nodes[rank] == 0 else "1"), (rank, env)
        assert env["GROUP_RANK"] == str(nodes[rank]) and env["GROUP_WORLD_SIZE"] == "3", (rank, env)
        assert env["ROLE_RANK"] == str(rank) and env["ROLE_WORLD_SIZE"] == "4", (rank, env)


def test_env_all_adds_paddles_contract_across_nodes(stage, outdir):
    result = srun(["-N3", "-n6", "--dist-launch=env=all", f"{stage}/workers/dump_env.py", outdir])
    assert result.returncode == 0, result.stderr
    ranks = dumps(outdir, 6)
    check_multi_host(ranks)
    endpoints = ranks[0]["env"]["PADDLE_TRAINER_ENDPOINTS"].split(",")
    # Node by node, each node's address (its NodeAddr) and MASTER_PORT+1+local rank.
    port = int(ranks[0]["env"]["MASTER_PORT"])
    assert endpoints == [f"{HOSTS[NODES[r // 2]]}:{port + 1 + r % 2}" for r in range(6)], endpoints
    for rank, d in enumerate(ranks):
        env = d["env"]
        assert env["RANK"] == env["PADDLE_TRAINER_ID"] == str(rank)
        assert env["PADDLE_TRAINERS_NUM"] == "6" and env["PADDLE_NNODES"] == "3"
        assert env["PADDLE_RANK_IN_NODE"] == env["LOCAL_RANK"] and env["PADDLE_LOCAL_SIZE"] == "2"
        assert env["PADDLE_CURRENT_ENDPOINT"] == endpoints[rank]
        # MASTER_ADDR (the first node's name here) resolves to endpoint 0's address (check_multi_host).
        assert env["PADDLE_MASTER"] == env["MASTER_ADDR"] + ":" + env["MASTER_PORT"]
        assert d["master_ip"] == endpoints[0].split(":")[0]
        assert env["PADDLE_TRAINER_ENDPOINTS"] == ranks[0]["env"]["PADDLE_TRAINER_ENDPOINTS"]


def test_env_paddle_leaves_torchs_variables_out(stage, outdir):
    result = srun(["-N1", "-n2", "--dist-launch=env=paddle", f"{stage}/workers/dump_env.py", outdir])
    assert result.returncode == 0, result.stderr
    for rank, d in enumerate(dumps(outdir, 2)):
        assert d["env"]["PADDLE_TRAINER_ID"] == str(rank)
        assert "RANK" not in d["env"] and "WORLD_SIZE" not in d["env"]


def test_binding_applied_per_task_and_shown_at_verbose(stage, outdir):
    result = srun(["-N3", "-n6", "--dist-launch=bind=closest,verbose", f"{stage}/workers/dump_env.py", outdir])
    assert result.returncode == 0, result.stderr
    ranks = dumps(outdir, 6)
    check_multi_host(ranks)
    for rank, d in enumerate(ranks):
        assert d["cpus"] == [rank % 2], (rank, d["cpus"])  # 2 cores per node, one each
        assert d["env"]["OMP_NUM_THREADS"] == "1"
    assert re.search(r"RANK\s+LOCAL\s+NODE\s+GPU\s+NIC\s+CPUS\s+MEMS", result.stderr), result.stderr
    for rank in range(6):
        assert re.search(rf"dlaunch: rank {rank} \(node {rank // 2}, local {rank % 2}\): .* cpus {rank % 2},",
                         result.stderr), result.stderr


@pytest.mark.parametrize("cpus_per_task", [1, 2])
def test_binding_respects_cpus_per_task(stage, outdir, cpus_per_task):
    """Each node has two cores: -c1 gives two tasks one core each, -c2 one task both. The binding stays
    inside what Slurm gave the task (task/affinity) and the step (task/cgroup), and uses all of it."""
    per_node = 2 // cpus_per_task
    result = srun(["-N3", f"-n{3 * per_node}", f"-c{cpus_per_task}", "--dist-launch=bind=closest",
                   f"{stage}/workers/dump_env.py", outdir])
    assert result.returncode == 0, result.stderr
    ranks = dumps(outdir, 3 * per_node)
    check_multi_host(ranks)
    for rank, d in enumerate(ranks):
        local = rank % per_node
        expected = list(range(local * cpus_per_task, (local + 1) * cpus_per_task))
        assert d["cpus"] == expected, (rank, d["node"], d["cpus"], expected)
        assert d["env"]["OMP_NUM_THREADS"] == str(cpus_per_task), (rank, d["env"]["OMP_NUM_THREADS"])
    for node in NODES:
        on_node = [d["cpus"] for d in ranks if d["node"] == node]
        assert len(on_node) == per_node and len({c for cpus in on_node for c in cpus}) == 2, (node, on_node)


def test_a_node_first_planned_by_a_one_cpu_step_still_binds_wider_steps(outdir):
    # The node's topology is discovered once per boot and cached for every later step: the first step
    # here has one CPU in its cgroup, the next two; the cache must describe the node, not that cgroup.
    node = NODES[0]
    subprocess.run([CLUSTER, "exec", node, "sh", "-c", f"rm -rf /tmp/dlaunch-topology-{os.getuid()}"], check=True)
    first = srun(["-N1", "-n1", "-w", node, "--dist-launch", "true"])
    assert first.returncode == 0, first.stderr
    wide = srun(["-N1", "-n2", "-w", node, "--dist-launch=bind=closest,verbose", "true"])
    assert wide.returncode == 0, wide.stderr
    cpus = sorted(re.findall(r"rank \d \(node 0, local \d\): master \S+, gpu -, cpus (\S+),", wide.stderr))
    assert cpus == ["0", "1"], wide.stderr


def test_with_mpi_pmix(stage):
    result = srun(["--mpi=pmix", "-N3", "-n6", "--dist-launch", f"{stage}/workers/mpi_allreduce.py"])
    assert result.returncode == 0, result.stderr
    assert "MPI OK size=6 sum=21" in result.stdout


@pytest.mark.parametrize("args, via", [(["--dist-launch"], "tcp"), (["--mpi=pmix", "--dist-launch"], "tcp"),
                                       (["--mpi=pmix"], "pmix")])
def test_bootstrap_exchange_across_nodes(stage, args, via):
    """What dlaunch::nccl uses to hand out NCCL ids: through rank 0 for --dist-launch tasks (with or
    without PMIx), PMIx for a program started without dlaunch."""
    result = srun([*args, "-N2", "-n4", f"{stage}/bootstrap_check"], env={"DLAUNCH_NCCL_RANKS_PER_ROOT": "2"})
    assert result.returncode == 0, result.stderr
    lines = sorted(l for l in result.stdout.splitlines() if " round " in l)
    assert lines == sorted(f"rank {r}/4 via {via} round {n}: round{n}-from-0 round{n}-from-2"
                           for r in range(4) for n in (0, 1)), result.stdout


def test_nccl_ids_across_nodes(stage):
    if os.environ.get("DLAUNCH_HAVE_NCCL") != "ON":
        pytest.skip("built without CUDA/NCCL (DLAUNCH_NCCL); CI builds with DLAUNCH_NCCL=ON")
    # libdlaunch_nccl.so is staged next to the program (the build tree is not visible on the nodes).
    result = srun(["--mpi=pmix", "-N2", "-n4", "--dist-launch", f"{stage}/nccl_ids"],
                  env={"LD_LIBRARY_PATH": stage})
    assert result.returncode == 0, result.stderr
    ids = {l.split()[-1] for l in result.stdout.splitlines() if " ids 1 " in l}
    assert len(ids) == 1 and len(result.stdout.splitlines()) == 4, result.stdout


def test_two_concurrent_steps_get_different_ports(stage, outdir):
    a, b = os.path.join(outdir, "a"), os.path.join(outdir, "b")
    for d in (a, b):
        os.makedirs(d)
        os.chmod(d, 0o777)
    worker = f"{stage}/workers/dump_env.py"
    script = (f"srun --overlap -N1 -n1 --dist-launch {worker} {a} & "
              f"srun --overlap -N1 -n1 --dist-launch {worker} {b} & wait")
    result = slurm("salloc", ["--immediate=60", "-N1", "-n2", "bash", "-c", script])
    assert result.returncode == 0, result.stderr
    pa, pb = (json.load(open(os.path.join(d, "rank0.json")))["env"] for d in (a, b))
    assert pa["SLURM_JOB_ID"] == pb["SLURM_JOB_ID"] and pa["SLURM_STEP_ID"] != pb["SLURM_STEP_ID"]
    assert pa["MASTER_PORT"] != pb["MASTER_PORT"]


def test_task_prolog_still_runs(stage, outdir):
    result = srun(["-N3", "-n3", "--dist-launch", f"{stage}/workers/dump_env.py", outdir])
    assert result.returncode == 0, result.stderr
    for d in dumps(outdir, 3):
        assert d["env"]["DLAUNCH_TEST_TASK_PROLOG"] == "ran"


@pytest.mark.parametrize("opts,message", [
    ("bind=tight", "dlaunch: --dist-launch: bind=tight: unknown binding; give closest, numa, socket or none"),
    ("colour=blue", "dlaunch: --dist-launch: unknown setting 'colour'"),
    ("python=../python3", "dlaunch: --dist-launch: python=../python3: not an absolute path"),
])
def test_bad_opts_fail_in_srun_before_launch(outdir, opts, message):
    marker = os.path.join(outdir, "started")
    result = srun(["-n1", f"--dist-launch={opts}", "touch", marker])
    assert result.returncode == 255, result.stderr  # srun's own code for an option a plugin refused
    assert message in result.stderr
    assert not os.path.exists(marker)


def test_a_refusal_on_the_nodes_is_the_steps_exit_code(outdir):
    # Checked only where the GPUs are: refused on each node, before the program runs. srun itself would
    # exit 0 after a plugin's refusal on the nodes; the tasks carry dlaunch's usage code instead.
    marker = os.path.join(outdir, "started")
    result = srun(["-N2", "-n4", "--dist-launch=devices=7", "touch", marker])
    assert result.returncode == USAGE, result.stderr
    assert result.stderr.count("dlaunch: plan: --dist-launch=devices: device 7 does not exist") == 2, result.stderr
    assert not os.path.exists(marker)


REFUSED_ON_ONE_NODE = """
port=$(srun -N1 -n1 -w {first} --dist-launch sh -c 'echo $MASTER_PORT')  # step 0; step 2 gets port + 2
srun -N1 -n1 -w {first} --overlap {python} -c "
import socket, time
s = socket.socket(); s.bind(('0.0.0.0', $port + 2)); s.listen(); open('{outdir}/busy', 'w'); time.sleep(60)" &
while [ ! -e {outdir}/busy ]; do sleep 0.1; done
srun -N2 -n2 --overlap --dist-launch sh -c 'touch {outdir}/started.$SLURM_PROCID; sleep 60'
echo "step rc=$?"
kill %1
"""


def test_a_refusal_on_one_node_ends_the_step_on_every_node(outdir):
    # Only the first node checks the master port: the other node's task must not wait for rank 0 forever.
    first, second = NODES[:2]
    script = REFUSED_ON_ONE_NODE.format(first=first, python=PYTHON, outdir=outdir)
    result = slurm("salloc", ["--immediate=60", "-N2", "-w", f"{first},{second}", "bash", "-c", script], timeout=60)
    text = result.stdout + result.stderr
    assert "is in use on " + first in text, text
    assert "dlaunch: ending step " in text and "on every node: this node refused it" in text, text
    assert re.search(r"task 0: Exited with exit code 64", text), text
    assert "step rc=0" not in text, text
    assert not os.path.exists(os.path.join(outdir, "started.0")), text


def test_unknown_plugstack_arguments_fail_loudly(stage, outdir, tmp_path):
    plugstack = tmp_path / "plugstack.conf"
    plugstack.write_text(f"required {stage}/spank_dlaunch.so prot_range=1-2\n")
    conf = tmp_path / "slurm.conf"
    conf.write_text(re.sub(r"PlugStackConfig=.*", f"PlugStackConfig={plugstack}", open(CONF).read()))
    marker = os.path.join(outdir, "started")
    result = srun(["-n1", "--dist-launch", "touch", marker], conf=str(conf))
    assert result.returncode != 0
    assert "dlaunch: plugstack.conf: unknown argument 'prot_range'" in result.stderr
    assert not os.path.exists(marker)


def plugstack_conf(tmp_path, line):
    """A slurm.conf whose plugstack.conf is `line` alone."""
    plugstack = tmp_path / "plugstack.conf"
    plugstack.write_text(line + "\n")
    conf = tmp_path / "slurm.conf"
    conf.write_text(re.sub(r"PlugStackConfig=.*", f"PlugStackConfig={plugstack}", open(CONF).read()))
    return str(conf)


def test_a_missing_helper_fails_srun_once_naming_the_pyexec_argument(stage, outdir, tmp_path):
    conf = plugstack_conf(tmp_path, f"required {stage}/spank_dlaunch.so pyexec=/nonexistent/dlaunch-python")
    marker = os.path.join(outdir, "started")
    script = os.path.join(outdir, "touch.py")
    with open(script, "w") as f:
        f.write(f"open({marker!r}, 'w').close()\n")
    result = srun(["-N2", "-n4", "--dist-launch", script], conf=conf)
    assert result.returncode != 0, result.stderr
    said = ("dlaunch: --dist-launch: /nonexistent/dlaunch-python (the helper that starts a .py program under "
            "Python) is not an executable; point the plugin's pyexec= argument (plugstack.conf) at dlaunch-python")
    assert result.stderr.count(said) == 1, result.stderr
    assert "execve" not in result.stderr, result.stderr
    assert not os.path.exists(marker)
    # A program that is not Python needs no helper.
    plain = srun(["-n1", "--dist-launch", "true"], conf=conf)
    assert plain.returncode == 0, plain.stderr


def test_a_node_without_the_helper_refuses_the_step_once(stage, outdir, tmp_path):
    # The helper is in srun's /tmp only (each node has its own /tmp): srun's check passes, every node's
    # fails before its tasks start, and says so once. (The nodes' slurmstepd read the cluster's own
    # plugstack.conf, changed for this test.)
    helper = tmp_path / "dlaunch-python"
    shutil.copy(os.path.join(stage, "dlaunch-python"), helper)
    marker = os.path.join(outdir, "started")
    script = os.path.join(outdir, "touch.py")
    with open(script, "w") as f:
        f.write(f"open({marker!r}, 'w').close()\n")
    plugstack = os.path.join(BASE, "plugstack.conf")
    with open(plugstack) as f:
        saved = f.read()
    try:
        with open(plugstack, "w") as f:
            f.write(f"required {stage}/spank_dlaunch.so pyexec={helper}\n")
        result = srun(["-N2", "-n4", "--dist-launch", script])
    finally:
        with open(plugstack, "w") as f:
            f.write(saved)
    # Each refusing node ends the step on the others: a task may be Terminated (srun 143) before it exits 71.
    assert result.returncode in (LAUNCH_FAILED, 143), result.stderr
    assert re.search(r"tasks? [0-9-]+: Exited with exit code 71", result.stderr), result.stderr
    assert result.stderr.count(f"{helper} (the helper that starts a .py program under Python) is not an "
                               "executable") == 2, result.stderr
    assert not os.path.exists(marker)


def test_a_plugin_beside_its_helper_needs_no_pyexec_argument(stage, outdir, tmp_path):
    conf = plugstack_conf(tmp_path, f"required {stage}/spank_dlaunch.so")
    script = os.path.join(outdir, "rank.py")
    with open(script, "w") as f:
        f.write("import os; print('rank', os.environ['RANK'])\n")
    result = srun(["-N2", "-n2", "--dist-launch", script], conf=conf)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["rank 0", "rank 1"], result.stdout + result.stderr


def test_without_the_option_nothing_changes(outdir):
    result = srun(["-N2", "-n2", PYTHON, "-c", "import os; print(sorted(k for k in os.environ "
                   "if k in ('RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'LOCAL_RANK')))"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[]", "[]"]


def test_sbatch_option_applies_to_steps_not_to_the_batch_script(stage, outdir):
    script = os.path.join(outdir, "job.sh")
    with open(script, "w") as f:
        f.write(f"#!/bin/bash\n#SBATCH --dist-launch\n#SBATCH -N2 -n2\n"
                f"echo \"batch RANK=${{RANK:-unset}}\" > {outdir}/batch.txt\n"
                f"srun {stage}/workers/dump_env.py {outdir}\n")
    result = slurm("sbatch", ["--wait", "-o", os.path.join(outdir, "out.txt"), script], timeout=180)
    assert result.returncode == 0, result.stderr + open(os.path.join(outdir, "out.txt")).read()
    assert open(os.path.join(outdir, "batch.txt")).read().strip() == "batch RANK=unset"
    assert [d["env"]["RANK"] for d in dumps(outdir, 2)] == ["0", "1"]
