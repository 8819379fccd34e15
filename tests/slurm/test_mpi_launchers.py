"""dlaunch-mpi under the MPI launchers that are not Open MPI's, on the three-node cluster: srun --mpi=pmi2
(Slurm's PMI-2 server), MPICH's Hydra (Debian's mpich: mpiexec.hydra) inside an sbatch job, where it starts
its proxies with srun, and across two nodes outside Slurm, where it starts them through the cluster's exec.
Every rank must be distinct, of one world, with one master; ranks that no launcher of their own started
(a batch script's children) must stop at once."""
import os
import shutil
import subprocess

import pytest

from slurmtest import (CLUSTER, ENV, LAUNCH_FAILED, NODES, check_multi_host, dumps, ended, job_fields, output,
                       sbatch_example, srun, wait_job)

HYDRA = shutil.which("mpiexec.hydra")


@pytest.fixture(scope="module")
def hydra():
    assert HYDRA, "mpiexec.hydra is missing: install Debian's mpich (packaging/debian-deps.sh)"
    return HYDRA


def check_ranks(ranks, world, per_node, nodes):
    """Ranks in node order, per_node on each node, one master, and the local ranks in order."""
    assert len({d["env"]["MASTER_ADDR"] for d in ranks}) == 1
    assert len({d["env"]["MASTER_PORT"] for d in ranks}) == 1
    for rank, d in enumerate(ranks):
        env = d["env"]
        assert env["RANK"] == str(rank) and env["WORLD_SIZE"] == str(world), (rank, env["RANK"], env["WORLD_SIZE"])
        assert env["LOCAL_RANK"] == str(rank % per_node) and env["LOCAL_WORLD_SIZE"] == str(per_node)
        assert d["hostname"] == nodes[rank // per_node], (rank, d["hostname"])
        assert env["GROUP_RANK"] == str(rank // per_node) and env["GROUP_WORLD_SIZE"] == str(len(nodes))
        assert "PMI_FD" not in env, "a finalized PMI connection must not reach the script"


def test_srun_pmi2_reads_slurms_pmi2_server(stage, outdir):
    result = srun(["--mpi=pmi2", "-N3", "-n6", f"{stage}/dlaunch-mpi", "-v", f"{stage}/workers/dump_env.py", outdir])
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("(pmi-2), node") == 6, result.stderr
    ranks = dumps(outdir, 6)
    check_ranks(ranks, 6, 2, NODES[:3])
    check_multi_host(ranks)
    job, step = ranks[0]["env"]["SLURM_JOB_ID"], ranks[0]["env"]["SLURM_STEP_ID"]
    assert ranks[0]["env"]["TORCHELASTIC_RUN_ID"] == f"{job}.{step}"


def test_srun_pmi2_runs_the_ddp_example(stage):
    result = srun(["--mpi=pmi2", "-N3", "-n6", f"{stage}/dlaunch-mpi", f"{stage}/examples/ddp_allreduce.py"])
    assert result.returncode == 0, result.stderr
    assert "OK world=6 sum=21.0" in result.stdout, result.stdout


def test_srun_pmi2_speaking_pmi1_gives_the_same_world(stage, outdir):
    result = srun(["--mpi=pmi2", "-N2", "-n4", f"{stage}/dlaunch-mpi", "-v", f"{stage}/workers/dump_env.py", outdir],
                  env={"DLAUNCH_PMI_VERSION": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("(pmi-1), node") == 4, result.stderr
    check_ranks(dumps(outdir, 4), 4, 2, NODES[:2])


def run_batch(workdir, script, nodes, ntasks):
    path = os.path.join(workdir, "job.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + script)
    out = subprocess.run(["sbatch", "--parsable", f"-N{nodes}", f"-n{ntasks}", "--overcommit", f"--chdir={workdir}",
                          f"--output={workdir}/job.out", path], capture_output=True, text=True, env=ENV, check=True)
    job = int(out.stdout.strip().split(";")[0])
    return wait_job(job, "end", ended, timeout=240)


def test_hydra_in_sbatch_gives_four_distinct_ranks_and_the_batch_scripts_own_child_stops(stage, outdir, hydra):
    # Hydra's proxies are srun tasks: each rank inherits its proxy's SLURM_PROCID (one per node). The PMI
    # server says who each rank is. A dlaunch-mpi the batch script starts itself has only the script's
    # SLURM_PROCID=0 and must stop, naming that source.
    fields = run_batch(outdir, f"""{hydra} -n 4 {stage}/dlaunch-mpi -v {stage}/workers/dump_env.py {outdir}
echo "hydra exit $?"
{stage}/dlaunch-mpi --no-python /bin/sh -c 'echo the batch script child ran'
echo "direct exit $?"
""", 2, 4)
    text = output(outdir)
    assert fields.get("JobState") == "COMPLETED", text
    assert "hydra exit 0" in text, text
    assert text.count("(pmi-1), node") == 4, text
    check_ranks(dumps(outdir, 4), 4, 2, NODES[:2])
    assert f"direct exit {LAUNCH_FAILED}" in text, text
    assert "the batch script child ran" not in text
    assert "dlaunch: job: slurm: SLURM_PROCID=0 is inherited, not this rank's" in text, text


def test_hydra_in_sbatch_runs_the_ddp_example_as_users_submit_it(stage, outdir, hydra):
    job = sbatch_example(stage, outdir, "mpich.sbatch", 2,
                         dict(DLAUNCH_MPI=f"{stage}/dlaunch-mpi", EXAMPLE=f"{stage}/examples/ddp_allreduce.py",
                              MPIEXEC=hydra), sbatch_args=("--ntasks=4", "--overcommit"))
    fields = wait_job(job, "end", ended, timeout=240)
    text = output(outdir)
    assert fields.get("JobState") == "COMPLETED", text
    assert "OK world=4 sum=10.0" in text, text


def hydra_across(stage, hydra, tmp_path, args):
    """mpiexec.hydra on nsn1 and nsn2 without Slurm: its ssh launcher replaced by the cluster's exec, its
    proxies calling back over the cluster's bridge, its ranks run in the stage (this directory may be
    the runner's alone)."""
    launcher = tmp_path / "node-exec"
    launcher.write_text('#!/bin/sh\n# Hydra calls: LAUNCHER -x HOST "COMMAND ..."\n[ "$1" = -x ] && shift\n'
                        f'host=$1; shift\nexec {CLUSTER} exec "$host" sh -c "$*"\n')
    launcher.chmod(0o755)
    cmd = [hydra, "-iface", "nsbr0", "-launcher", "ssh", "-launcher-exec", str(launcher), "-hosts",
           f"{NODES[0]},{NODES[1]}", "-ppn", "2", "-n", "4", "-wdir", stage, f"{stage}/dlaunch-mpi", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=ENV)


def test_hydra_across_two_nodes_without_slurm(stage, outdir, hydra, tmp_path):
    result = hydra_across(stage, hydra, tmp_path, ["-v", f"{stage}/workers/dump_env.py", outdir])
    assert result.returncode == 0, result.stderr
    ranks = dumps(outdir, 4)
    check_ranks(ranks, 4, 2, NODES[:2])
    assert all("SLURM_JOB_ID" not in d["env"] for d in ranks)
    result = hydra_across(stage, hydra, tmp_path, [f"{stage}/examples/ddp_allreduce.py"])
    assert result.returncode == 0, result.stderr
    assert "OK world=4 sum=10.0" in result.stdout, result.stdout


def test_two_processes_of_one_srun_task_do_not_both_become_its_rank(stage):
    # Each srun task starts two dlaunch-mpi with its one SLURM_PROCID: one rank per node, never two.
    rank = f"{stage}/dlaunch-mpi --no-python /bin/sh -c 'echo \"$(hostname) rank=$RANK\"; sleep 2'"
    result = srun(["-N2", "--ntasks-per-node=1", "sh", "-c", f"{rank} & {rank}; wait"], timeout=120)
    lines = sorted(l for l in result.stdout.splitlines() if " rank=" in l)
    assert lines == [f"{NODES[0]} rank=0", f"{NODES[1]} rank=1"], result.stdout + result.stderr
    for r in (0, 1):
        assert (f"dlaunch: job: rank {r}: fence: slurm: not one world: two processes on this node say they are "
                f"rank {r} (SLURM_PROCID)") in result.stderr, result.stderr
