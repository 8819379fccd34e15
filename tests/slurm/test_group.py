"""Restarts inside the allocation on the real three-node Slurm (tests/slurm/cluster.sh): one dlaunch agent per
node under srun, --max-restarts, no --requeue. The agents form a group (node 0's agent leads, MUNGE
authenticates the others); a failure on any node restarts every node inside the job, and a node that goes
silent is left out when --nnodes MIN:MAX allows. Slurm never requeues: the job's Restarts stays 0.
"""
import json
import re
import subprocess
from pathlib import Path

import pytest

from slurmtest import (CLUSTER, ENV, NODES, all_idle, ended, job_fields, make_outdir, node_state, output,
                       reference_result, sbatch_example, starts, wait_for, wait_job)

TRAIN = "examples/ddp_checkpoint.py"


@pytest.fixture()
def workdir(stage):
    return make_outdir("group-")


def submit(stage, workdir, agent_args, train_args, sbatch_args=(), srun_args=()):
    """An sbatch job of one srun step: a dlaunch agent on each of the three nodes."""
    wait_for("every node idle", all_idle, 120, diagnose=lambda: [node_state(n) for n in NODES])
    step = " ".join(["srun", *srun_args, "--ntasks-per-node=1", f"{stage}/dlaunch", *agent_args, "--nproc-per-node",
                     "2", f"{stage}/{TRAIN}", "--checkpoint", f"{workdir}/ckpt.pt", *train_args])
    out = subprocess.run(["sbatch", "--parsable", f"-N{len(NODES)}", *sbatch_args, f"--chdir={workdir}",
                          f"--output={workdir}/job.out", "--export=ALL", "--wrap", step],
                         capture_output=True, text=True, env=ENV, check=True)
    return int(out.stdout.strip().split(";")[0])


TRAIN_80 = ["--steps", "80", "--step-seconds", "0.25", "--save-every", "5"]


def submit_example(stage, workdir, env):
    """examples/sbatch/group.sbatch as it is, on the three nodes, its settings from the environment."""
    wait_for("every node idle", all_idle, 120, diagnose=lambda: [node_state(n) for n in NODES])
    return sbatch_example(stage, workdir, "group.sbatch", len(NODES), dict(TRAIN_ARGS=" ".join(TRAIN_80), **env))


def run_and_kill(stage, workdir, victim, agent_args=None, example_env=None):
    """Trains 80 steps with periodic checkpoints (the job of submit(), or of the example with example_env),
    kills `victim` once one was saved, and returns the job's fields at its end. --no-kill: Slurm keeps the job
    (and the step) when a node fails; the group decides. --grace 5: ranks stuck in a collective with the dead
    node do not answer SIGTERM; kill them soon."""
    if example_env is not None:
        job = submit_example(stage, workdir, dict(example_env, HEARTBEAT_TIMEOUT="5", GRACE="5"))
    else:
        job = submit(stage, workdir, [*agent_args, "--heartbeat-timeout", "5", "--grace", "5"], TRAIN_80,
                     sbatch_args=("--no-kill",), srun_args=("--no-kill",))
    try:
        wait_for(f"job {job}: a periodic checkpoint", lambda: "(periodic)" in output(workdir), 120,
                 diagnose=lambda: job_fields(job))
        subprocess.run([CLUSTER, "kill", victim], check=True)
        return wait_job(job, "the job ended", ended)
    finally:
        subprocess.run([CLUSTER, "start"], check=True)


def test_a_crash_on_one_node_restarts_every_node_inside_the_job(stage, workdir):
    expected = reference_result(stage, workdir, "--steps", "40")
    job = submit(stage, workdir, ["--max-restarts", "2", "--log-dir", f"{workdir}/logs"],
                 ["--steps", "40", "--step-seconds", "0.1", "--save-every", "5", "--crash-at-step", "15",
                  "--crash-rank", "3", "--crash-on-attempt", "0"])
    f = wait_job(job, "the job ended", ended)
    text = output(workdir)
    assert f["JobState"] == "COMPLETED", text
    assert f["Restarts"] == "0", "restarted inside the allocation, never requeued"
    assert "crash: rank 3 at step 15 on attempt 0" in text
    assert f"group: attempt 0: rank 3 on {NODES[1]}: exit code 3; stopping every node" in text, text
    assert ("group: attempt 0 failed (rank 3 on {}: exit code 3); 1 of 2 restarts (--max-restarts) used: "
            "attempt 1 on 3 node(s), world size 6; starts in 1 s (--restart-backoff)").format(NODES[1]) in text, text
    assert text.count("group: waiting 1s before attempt 1 (--restart-backoff)") == 3, \
        "every node waits the backoff node 0 decided\n" + text
    seen = starts(text)
    assert sorted(r for a, _, r, w in seen if a == 0 and w == 6) == list(range(6))
    assert sorted(r for a, _, r, w in seen if a == 1 and w == 6) == list(range(6)), \
        "every node started attempt 1, TORCHELASTIC_RESTART_COUNT 1 on every rank"
    assert re.search(r"start: rank 0 of 6 attempt 1 run \S+ resume_step [1-9]", text), text
    assert expected in text, f"the resumed run's result differs from an uninterrupted run's ({expected})\n{text}"
    records = [json.loads(p.read_text()) for p in Path(workdir, "logs").glob("*/run.json")]
    assert len(records) == 3, "one run.json per node"
    for record in records:
        assert record["outcome"] == "succeeded" and record["restarts"] == 1, record
        assert [a["attempt"] for a in record["attempts"]] == [0, 1], record
        assert record["attempts"][1]["ended_by"] is None, record
    # Node 0 records every node's failures; the others their own.
    assert sum("rank 3" in (r["attempts"][0]["ended_by"] or "") for r in records) >= 1, records


def test_a_dead_node_is_left_out_inside_the_job_within_the_heartbeat_bound(stage, workdir):
    expected = reference_result(stage, workdir, "--steps", "80")
    victim = NODES[2]
    # examples/sbatch/group.sbatch with no spare: from Slurm 23.02 on its srun --no-kill exits 1 after the
    # node failure, and the script ends with the group leader's code instead.
    f = run_and_kill(stage, workdir, victim, example_env=dict(NNODES="2:3", MAX_RESTARTS="2"))
    text = output(workdir)
    assert f["JobState"] == "COMPLETED", text
    records = [json.loads(p.read_text()) for p in Path(workdir).glob("dlaunch-logs-*/*/run.json")]
    leaders = [r for r in records if r.get("led_group")]
    assert len(leaders) == 1 and leaders[0]["exit_code"] == 0 and leaders[0]["restarts"] == 1, records
    logs = next(Path(workdir).glob("dlaunch-logs-*"))
    code = subprocess.run([f"{stage}/dlaunch", "report", "--exit-code", logs], capture_output=True, text=True)
    assert (code.returncode, code.stdout) == (0, "0\n"), code.stderr
    assert f["Restarts"] == "0", "left out inside the allocation, never requeued"
    assert f"group: attempt 0: {victim} lost: no heartbeat for 5 s; stopping every node" in text, text
    assert "attempt 1 on 2 node(s), world size 4" in text, text
    seen = starts(text)
    assert sorted(r for a, _, r, w in seen if a == 1 and w == 4) == list(range(4)), "ranks recomputed for two nodes"
    assert re.search(r"start: rank 0 of 4 attempt 1 run \S+ resume_step [1-9]", text), text
    assert expected in text, "the weights do not depend on the world size (examples/ddp_checkpoint.py)"


def test_a_hot_spare_replaces_a_dead_node_and_the_world_size_stays(stage, workdir):
    expected = reference_result(stage, workdir, "--steps", "80")
    victim, spare = NODES[1], NODES[2]
    # examples/sbatch/group.sbatch as users get it, on three nodes: two train, the third is the spare.
    f = run_and_kill(stage, workdir, victim, example_env=dict(NNODES="2:2", MAX_RESTARTS="1"))
    text = output(workdir)
    assert f["JobState"] == "COMPLETED", text
    assert f["Restarts"] == "0", "replaced inside the allocation, never requeued"
    assert f"group: attempt 0: {spare} waits as a hot spare" in text, text
    assert f"group: attempt 0: {victim} lost: no heartbeat for 5 s; stopping every node" in text, text
    assert f"attempt 1 on 2 node(s), world size 4; {spare} replaces {victim}" in text, text
    seen = starts(text)
    assert sorted(r for a, _, r, w in seen if a == 0) == list(range(4)), "the spare ran nothing in attempt 0"
    assert sorted(r for a, _, r, w in seen if a == 1) == list(range(4)), "the world size stays 4"
    assert re.search(r"start: rank 0 of 4 attempt 1 run \S+ resume_step [1-9]", text), text
    assert expected in text, text


def test_a_group_that_gives_up_sums_up_every_nodes_failures_once(stage, workdir):
    # Rank 3 on the second node crashes in every attempt: after one restart the group gives up; node 0's agent
    # (the leader) prints the job's summary with every node's failures and the earliest as the root cause.
    job = submit(stage, workdir, ["--max-restarts", "1", "--grace", "5"],
                 ["--steps", "40", "--step-seconds", "0.1", "--crash-at-step", "5", "--crash-rank", "3",
                  "--crash-on-attempt", "-1"])
    f = wait_job(job, "the job ended", ended)
    text = output(workdir)
    assert f["JobState"] == "FAILED", text
    assert f["Restarts"] == "0"
    assert ("group: attempt 1 failed (rank 3 on {}: exit code 3); no restart left (--max-restarts 1): the job "
            "ends here").format(NODES[1]) in text, text
    summary = text[text.index("root cause: rank 3 "):]
    assert f"host {NODES[1]}" in summary.splitlines()[0], summary
    assert re.search(rf"attempt 0: rank 3 \(local 1\): exit code 3 at \S+ on {NODES[1]} \[root cause of that "
                     r"attempt\]", summary), summary
    assert "exit code: 3" in summary
    assert text.count("root cause: rank 3 ") == 1, "only the leader sums up the job"
    assert "this node's failures: " in text and "(the group's leader sums up the job)" in text


def health_script(workdir, body):
    """A site check (--health-check) in the shared work directory, as a site would install one."""
    path = Path(workdir) / "health.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("nnodes", ["2:2", "2:3"])
def test_a_node_failing_the_health_check_is_left_out_of_the_first_attempt(stage, workdir, nnodes):
    """examples/sbatch/group.sbatch on three nodes with a site check that fails on the second node: before
    attempt 0 the leader leaves that node out; with --nnodes 2:2 the third node (the spare) runs in its place,
    with 2:3 the attempt runs on the two nodes left. Either way ranks and world size are those of two nodes,
    no restart is used and the job completes. The check takes longer than --heartbeat-timeout: the agents keep
    beating while it runs, so no node is taken for lost."""
    expected = reference_result(stage, workdir, "--steps", "20")
    bad, spare = NODES[1], NODES[2]
    check = health_script(workdir, f'echo "checking /scratch"; sleep 3\n'
                                   f'if [ "$(hostname)" = {bad} ]; then echo "no /scratch on $(hostname)"; exit 1; fi\n')
    wait_for("every node idle", all_idle, 120, diagnose=lambda: [node_state(n) for n in NODES])
    job = sbatch_example(stage, workdir, "group.sbatch", len(NODES),
                         dict(NNODES=nnodes, MAX_RESTARTS="1", HEALTH_CHECK=str(check), HEARTBEAT_TIMEOUT="2",
                              TRAIN_ARGS="--steps 20 --step-seconds 0.1 --save-every 5"))
    f = wait_job(job, "the job ended", ended)
    text = output(workdir)
    assert f["JobState"] == "COMPLETED", text
    assert f["Restarts"] == "0", text
    why = f"site check `{check}`: exit code 1: no /scratch on {bad}"
    assert f"health: attempt 0 runs without {bad}: {why} (--no-health-check turns the gate off)" in text, text
    assert (f"health: this node failed the health check before attempt 0 ({why}); the group runs it without this "
            "node, which waits as a spare") in text, text
    assert f"group: attempt 0: {bad} waits as a hot spare" in text, text
    assert f"group: attempt 0: {spare} waits as a hot spare" not in text, text
    assert "lost" not in text, "a check longer than the heartbeat timeout loses no node\n" + text
    seen = starts(text)
    assert sorted(r for a, _, r, w in seen if a == 0 and w == 4) == list(range(4)), seen
    assert expected in text, text

