"""dlaunch --requeue on the real three-node Slurm (tests/slurm/cluster.sh): the batch job's attempts are the
restarts. Each test submits examples/sbatch/requeue.sbatch (or elastic.sbatch, requeue-spank.sbatch) as it
is, with examples/ddp_checkpoint.py.

Slurm holds a requeued job for cred_expire seconds (AuthInfo=cred_expire=N, default 120) before it may start
again; the test cluster sets 10, so a requeued job comes back by itself 10-25 s later. Nothing here edits a
job's StartTime: a start forced earlier can be refused by a node ("Job credential revoked") and fail the job.

What a test reads must be complete when it reads it. The job's output file gets the agents' lines through
srun, which Slurm kills when it ends the attempt (requeue, preemption, scancel): a line written after that
(e.g. "requeue: job J requeued ...", printed once slurmctld has accepted the requeue) may never arrive. Such
facts are read from dlaunch's own files instead: attempts.jsonl and the per-rank logs.
"""
import json
import os
import re
import subprocess

import pytest

from slurmtest import (CLUSTER, ENV, NODES, USAGE, all_idle, ended, job_fields, make_outdir, node_state, output,
                       reference_result, sbatch_example, starts, wait_for, wait_job)


@pytest.fixture()
def workdir(stage):
    return make_outdir("requeue-")


SUBMITTED = []


@pytest.fixture(autouse=True)
def cancel_leftovers():
    """A test that fails half-way leaves its job running; the next test would share the nodes with it (and
    an elastic job would get fewer). Cancel what the test submitted and wait until the nodes are idle."""
    SUBMITTED.clear()
    yield
    left = [str(job) for job in SUBMITTED if not ended(job_fields(job))]
    if left:
        subprocess.run(["scancel", *left], env=ENV)
        wait_for(f"the cancelled jobs {left} leave the nodes", lambda: all_idle(), 120,
                 diagnose=lambda: [node_state(n) for n in NODES])



def submit(stage, workdir, nodes="2", env=None, train_args="", sbatch_args=(), script="requeue.sbatch"):
    job = sbatch_example(stage, workdir, script, nodes, dict(TRAIN_ARGS=train_args, **(env or {})), sbatch_args)
    SUBMITTED.append(job)
    return job


def test_a_crash_restarts_in_the_allocation_and_the_ledger_keeps_it(stage, workdir):
    """Under --requeue a worker failure restarts the group inside the allocation (no requeue); the ledger
    keeps the attempt, so a later requeue numbers on from it."""
    expected = reference_result(stage, workdir)
    job = submit(stage, workdir, train_args="--crash-at-step 15 --crash-rank 3 --crash-on-attempt 0")
    f = wait_job(job, "the job ended", ended)
    text = output(workdir)
    assert f["JobState"] == "COMPLETED", text
    assert f["Restarts"] == "0", "restarted inside the allocation, not requeued"
    assert "crash: rank 3 at step 15 on attempt 0" in text
    assert re.search(r"group: attempt 0 failed \(rank 3 on \S+: exit code 3\); 1 of 3 restarts \(--max-restarts\) "
                     r"used: attempt 1 on 2 node\(s\), world size 4", text), text
    assert f"dlaunch: job {job}: attempt 0 (requeued 0 times; 0 of 3 failed attempts used): 2 nodes, world size 4" in text
    assert expected in text, f"the resumed run's result differs from an uninterrupted run's ({expected})\n{text}"
    # Every rank of an attempt sees the same restart count and run id; the run id is the job's in both.
    seen = starts(text)
    assert sorted(r for a, _, r, _ in seen if a == 0) == [0, 1, 2, 3]
    assert sorted(r for a, _, r, _ in seen if a == 1) == [0, 1, 2, 3]
    assert {run for _, run, _, _ in seen} == {str(job)}
    # The ledger (node 0 records the group's attempt, every node's failures) and the per-rank logs: each
    # attempt under its own header, nothing overwritten.
    jobdir = os.path.join(workdir, "dlaunch-logs", str(job))
    records = ledger(workdir, job)
    assert [(r["attempt"], r["end"], r["node_rank"], r["slurm_restart"], r["final"]) for r in records] == \
        [(0, "failed", 0, 0, False)], records
    crash = [f for r in records for f in r["failures"] if f["exit_code"] == 3]
    assert [f["rank"] for f in crash] == [3], records
    with open(os.path.join(jobdir, "rank_3", "stdout.log")) as fl:
        log = fl.read()
    assert f"==== dlaunch: job {job}, attempt 0: rank 3 of 4" in log
    assert f"==== dlaunch: job {job}, attempt 1: rank 3 of 4" in log
    assert log.index("attempt 0:") < log.index("start: rank 3 of 4 attempt 0") < log.index("attempt 1:")


def test_the_budget_ends_the_job_with_the_root_cause_and_every_attempt(stage, workdir):
    job = submit(stage, workdir, env={"MAX_RESTARTS": "1"},
                 train_args="--crash-at-step 2 --crash-rank 2 --crash-on-attempt -1 --crash-code 5")
    f = wait_job(job, "the job ended", ended)
    text = output(workdir)
    assert f["JobState"] == "FAILED", text
    assert f["ExitCode"] == "5:0", f
    assert f["Restarts"] == "0", "the budget is used inside the allocation"
    assert re.search(r"group: attempt 1 failed \(rank 2 on \S+: exit code 5\); no restart left \(--max-restarts 1\)"
                     r": the job ends here", text), text
    summary = text[text.index(f"dlaunch: every attempt of job {job}:"):]
    assert "root cause: rank 2 (local rank 0, node 1" in summary
    assert "attempt 0: rank 2 (local 0): exit code 5" in summary
    assert "restarts used 1 of 1" in summary
    with open(os.path.join(workdir, "dlaunch-logs", str(job), "failure.json")) as fl:
        assert json.load(fl)["exit_code"] == 5


def ledger_path(workdir, job):
    return os.path.join(workdir, "dlaunch-logs", str(job), "attempts.jsonl")


def ledger(workdir, job):
    with open(ledger_path(workdir, job)) as fl:
        return [json.loads(line) for line in fl]


def all_training(workdir, attempt=0, ranks=4):
    return lambda f: f.get("JobState") == "RUNNING" and len(
        [s for s in starts(output(workdir)) if s[0] == attempt]) == ranks


def rank0_output(workdir, job):
    """What rank 0 printed: its dlaunch log when an agent kept one (complete even when Slurm killed the
    step), else (srun --dist-launch) the job's output."""
    path = os.path.join(workdir, "dlaunch-logs", str(job), "rank_0", "stdout.log")
    if not os.path.exists(path):
        return output(workdir)
    with open(path) as fl:
        return fl.read()


def interrupted_and_resumed(stage, workdir, job, interrupt):
    """Once every rank of `job` (60 steps of 0.25 s) trains, runs `interrupt` (a command line the job id is
    appended to, or a function of the job id); checks that the job checkpointed,
    came back once, resumed from that checkpoint, got an uninterrupted run's result, and used no budget.
    Returns the job's output and its attempt 0 ledger record (node 0's)."""
    expected = reference_result(stage, workdir, "--steps", "60")
    wait_job(job, "every rank of attempt 0 trains", all_training(workdir), timeout=120)
    if callable(interrupt):
        interrupt(job)
    else:
        subprocess.run([*interrupt, str(job)], env=ENV, check=True)
    f = wait_job(job, "the job ended", ended)
    text = output(workdir)
    assert f["JobState"] == "COMPLETED", text
    assert f["Restarts"] == "1", f
    saved = re.search(r"checkpoint: saved step (\d+) \(signal\)", rank0_output(workdir, job))
    assert saved, rank0_output(workdir, job)
    assert re.search(rf"start: rank 0 of 4 attempt 1 run {job} resume_step {saved.group(1)}", text), text
    assert expected in text, f"the resumed run's result differs from an uninterrupted run's ({expected})\n{text}"
    records = ledger(workdir, job)
    assert [r["end"] for r in records] == ["checkpointed"], "a checkpoint does not use the budget"
    return text, records[0]


RESUMABLE = "--steps 60 --step-seconds 0.25 --save-every 1000"


def test_the_warning_signal_checkpoints_requeues_and_resumes(stage, workdir):
    job = submit(stage, workdir, train_args=RESUMABLE)
    # What `#SBATCH --signal=USR1@120` sends before the time limit.
    text, record = interrupted_and_resumed(stage, workdir, job, ["scancel", "--signal=USR1"])
    assert "checkpoint: received SIGUSR1 (the job's warning signal)" in text
    assert record["detail"] == "SIGUSR1 (the job's warning signal)", record


def test_scontrol_requeue_checkpoints_and_the_job_resumes(stage, workdir):
    job = submit(stage, workdir, train_args=RESUMABLE)
    _, record = interrupted_and_resumed(stage, workdir, job, ["scontrol", "requeue"])
    assert record["detail"] == "SIGTERM: Slurm requeues the job (scontrol requeue, preemption or node failure)", record


def test_preemption_checkpoints_and_the_job_resumes_after_the_urgent_one(stage, workdir):
    urgent = []

    def preempt(job):
        # A job of the higher-tier partition that needs every node whole: Slurm preempts ours (REQUEUE).
        out = subprocess.run(["sbatch", "--parsable", "-p", "urgent", f"-N{len(NODES)}", "--exclusive", "-o", "/dev/null",
                              "--wrap", "sleep 5"], capture_output=True, text=True, env=ENV, check=True)
        urgent.append(out.stdout.strip())

    job = submit(stage, workdir, train_args=RESUMABLE)
    try:
        text, record = interrupted_and_resumed(stage, workdir, job, preempt)
    finally:
        subprocess.run(["scancel", *urgent], env=ENV)
    assert re.search(rf"\*\*\* JOB {job} ON nsn\d CANCELLED AT \S+ DUE TO PREEMPTION \*\*\*", text), text
    assert record["detail"] == "SIGTERM: Slurm requeues the job (scontrol requeue, preemption or node failure)", record


def test_scancel_checkpoints_and_the_job_is_not_requeued(stage, workdir):
    job = submit(stage, workdir, train_args="--steps 400 --step-seconds 0.25 --save-every 1000")
    wait_job(job, "every rank of attempt 0 trains", all_training(workdir), timeout=120)
    subprocess.run(["scancel", str(job)], env=ENV, check=True)
    f = wait_job(job, "the job ended", ended)
    # Slurm shows CANCELLED at once; the agent writes the ledger while the step ends.
    wait_for(f"job {job}: the ledger's record of attempt 0", lambda: os.path.exists(ledger_path(workdir, job)), 30)
    assert f["JobState"] == "CANCELLED", f
    assert f["Restarts"] == "0", "a cancelled job must never come back"
    wait_for(f"job {job}: rank 0's checkpoint line in its log",
             lambda: re.search(r"checkpoint: saved step \d+ \(signal\)", rank0_output(workdir, job)), 30,
             diagnose=lambda: rank0_output(workdir, job))
    assert ledger(workdir, job)[0]["detail"] == "SIGTERM: the job was cancelled (scancel); not requeued"
    assert [(r["end"], r["final"]) for r in ledger(workdir, job)] == [("stopped", False)]


def run_seconds(runtime):
    """Slurm's RunTime ([D-]HH:MM:SS) in seconds."""
    days, _, hms = runtime.rpartition("-")
    h, m, sec = (int(x) for x in hms.split(":"))
    return int(days or 0) * 86400 + h * 3600 + m * 60 + sec


def test_time_limit_with_its_warning_signal_checkpoints_and_resumes(stage, workdir):
    # The warning signal 179 s before the limit. The job starts with 10 minutes; once every rank trains the
    # test sets the limit so that two to three minutes are left: slurmctld sends the warning at its next time-limit
    # check (every 30 s), long before the limit, however slowly the attempt started (a fixed short
    # --time made this test depend on the machine's speed). Once attempt 0 has checkpointed and the job is
    # requeued, the test gives it 10 minutes again, so attempt 1 (after cred_expire) is not warned.
    expected = reference_result(stage, workdir, "--steps", "400")
    job = submit(stage, workdir, train_args="--steps 400 --step-seconds 0.25 --save-every 1000",
                 sbatch_args=("--time=10", "--signal=USR1@179"))
    f = wait_job(job, "every rank of attempt 0 trains", all_training(workdir), timeout=120)
    limit = run_seconds(f["RunTime"]) // 60 + 3
    subprocess.run(["scontrol", "update", f"jobid={job}", f"TimeLimit={limit}"], env=ENV, check=True)
    wait_for(f"job {job}: attempt 0 checkpointed after the warning signal",
             lambda: os.path.exists(ledger_path(workdir, job)), 120, diagnose=lambda: job_fields(job))
    wait_job(job, "requeued", lambda f: f.get("Restarts") == "1" and f.get("JobState") in ("PENDING", "RUNNING"),
             timeout=120)
    subprocess.run(["scontrol", "update", f"jobid={job}", "TimeLimit=10"], env=ENV, check=True)
    f = wait_job(job, "the job ended", ended, timeout=300)
    text = output(workdir)
    assert f["JobState"] == "COMPLETED", text
    assert f["Restarts"] == "1", f
    assert "checkpoint: received SIGUSR1 (the job's warning signal)" in text
    assert re.search(rf"start: rank 0 of 4 attempt 1 run {job} resume_step [1-9]", text), text
    assert expected in text
    assert [(r["end"], r["detail"]) for r in ledger(workdir, job)] == \
        [("checkpointed", "SIGUSR1 (the job's warning signal)")]



def attempt_hosts(workdir, job, attempt):
    """The hosts the ranks of one attempt ran on, from the per-rank log headers."""
    hosts = set()
    jobdir = os.path.join(workdir, "dlaunch-logs", str(job))
    for rank_dir in os.listdir(jobdir):
        if rank_dir.startswith("rank_"):
            with open(os.path.join(jobdir, rank_dir, "stdout.log")) as fl:
                hosts.update(re.findall(rf"==== dlaunch: job {job}, attempt {attempt}: .*, host (\S+)\) ====",
                                        fl.read()))
    return hosts


def test_fewer_than_min_nodes_left_requeues_without_the_dead_node(stage, workdir):
    """examples/sbatch/elastic.sbatch: a crash restarts the group inside the allocation (attempt 1); then a
    node dies. Its agent's silence tells the others within the heartbeat bound; with fewer nodes than the
    job started with (no --nnodes range) the group requeues the job without that node, and the job comes
    back on the nodes left with every rank and the world size recomputed, numbering on: attempt 2."""
    expected = reference_result(stage, workdir, "--steps", "80")
    victim = NODES[1]  # not the batch host: the job's output must survive
    # examples/sbatch/elastic.sbatch as it is, with a range this cluster has (it asks for 2-4 nodes).
    # A job still leaving a node would make Slurm start this one on fewer nodes.
    wait_for("every node idle", all_idle, 120, diagnose=lambda: [node_state(n) for n in NODES])
    # The test cluster's SlurmdTimeout is 30 s: the group must decide well before slurmctld requeues.
    job = submit(stage, workdir, nodes=f"2-{len(NODES)}", script="elastic.sbatch",
                 env={"HEARTBEAT_TIMEOUT": "4", "GRACE": "3"},
                 train_args="--steps 80 --step-seconds 0.25 --save-every 5 --crash-at-step 8 --crash-rank 5")
    try:
        wait_job(job, "6 ranks of attempt 1 train", all_training(workdir, attempt=1, ranks=6), timeout=120)
        subprocess.run([CLUSTER, "kill", victim], check=True)
        f = wait_job(job, "the job ended", ended, timeout=300)
    finally:
        subprocess.run([CLUSTER, "start"], check=True)
    text = output(workdir)
    assert f["JobState"] == "COMPLETED", text
    assert f["Restarts"] == "1", f
    assert victim in f["ExcNodeList"], f"Slurm must not give the job {victim} again: {f}"
    assert re.search(rf"group: attempt 1 failed \({victim} lost: .*\); 2 of 3 restarts \(--max-restarts\) used; "
                     rf"2 node\(s\) left, fewer than --nnodes MIN 3: requeued without {victim}", text), text
    assert f"dlaunch: job {job}: attempt 2 (requeued 1 time; 2 of 3 failed attempts used): 2 nodes, world size 4" in text
    seen = starts(text)
    assert sorted(r for a, _, r, w in seen if a == 1 and w == 6) == list(range(6))
    assert sorted(r for a, _, r, w in seen if a == 2 and w == 4) == list(range(4)), "ranks recomputed for two nodes"
    assert attempt_hosts(workdir, job, 2) == set(NODES) - {victim}
    assert re.search(rf"start: rank 0 of 4 attempt 2 run {job} resume_step [1-9]", text), text
    assert expected in text, "the weights do not depend on the world size (examples/ddp_checkpoint.py)"
    assert [(r["attempt"], r["end"], r["nnodes"], r["world_size"], r["slurm_restart"]) for r in ledger(workdir, job)] \
        == [(0, "failed", 3, 6, 0), (1, "failed", 3, 6, 0)]


def test_a_lost_leader_is_requeued_by_the_next_node_without_node_0(stage, workdir):
    """examples/sbatch/elastic.sbatch: node 0 dies (the batch host and the group's leader). The next node's
    agent notices within the heartbeat bound, records the failed attempt and requeues the job without node 0
    before Slurm notices (SlurmdTimeout 30 s); the job comes back on the nodes left, numbering on: attempt 1.
    (What the agents said on node 0's srun died with it: the ledger and the requeued run tell.)"""
    expected = reference_result(stage, workdir, "--steps", "80")
    victim = NODES[0]
    wait_for("every node idle", all_idle, 120, diagnose=lambda: [node_state(n) for n in NODES])
    job = submit(stage, workdir, nodes=f"2-{len(NODES)}", script="elastic.sbatch",
                 env={"HEARTBEAT_TIMEOUT": "4", "GRACE": "3"},
                 train_args="--steps 80 --step-seconds 0.25 --save-every 5")
    try:
        wait_job(job, "6 ranks of attempt 0 train", all_training(workdir, attempt=0, ranks=6), timeout=120)
        wait_for("a periodic checkpoint", lambda: "(periodic)" in output(workdir), 60)
        subprocess.run([CLUSTER, "kill", victim], check=True)
        f = wait_job(job, "the job ended", ended, timeout=300)
    finally:
        subprocess.run([CLUSTER, "start"], check=True)
    text = output(workdir)
    assert f["JobState"] == "COMPLETED", text
    assert f["Restarts"] == "1", f
    assert victim in f["ExcNodeList"], f"Slurm must not give the job {victim} again: {f}"
    records = ledger(workdir, job)
    assert [(r["attempt"], r["end"], r["nnodes"], r["final"]) for r in records] == [(0, "failed", 3, False)], records
    assert records[0]["detail"] == f"{victim} lost: no heartbeat for 4 s", records
    assert records[0]["host"] == NODES[1], "the next node records the attempt"
    assert f"dlaunch: job {job}: attempt 1 (requeued 1 time; 1 of 3 failed attempts used): 2 nodes, world size 4" in text
    assert sorted(r for a, _, r, w in starts(text) if a == 1 and w == 4) == list(range(4))
    assert attempt_hosts(workdir, job, 1) == set(NODES) - {victim}
    assert expected in text, "the weights do not depend on the world size (examples/ddp_checkpoint.py)"


# srun --dist-launch=requeue: no agent, the SPANK plugin sees each task's end (examples/sbatch/requeue-spank.sbatch).

def test_a_node_failing_the_health_check_is_excluded_and_the_job_requeued(stage, workdir):
    """examples/sbatch/elastic.sbatch on two nodes with a site check that fails on the job's second node in its
    first run: with fewer nodes passing than the job started with (no --nnodes range), the group requeues the
    job without that node before any worker starts; the job comes back on two other nodes and completes."""
    expected = reference_result(stage, workdir, "--steps", "20")
    check = os.path.join(workdir, "health.sh")
    with open(check, "w") as fl:
        fl.write('#!/bin/sh\nif [ "${SLURM_RESTART_COUNT:-0}" = 0 ] && [ "$SLURM_NODEID" = 1 ]; then\n'
                 '  echo "GPU 1 needs a reset on $(hostname)"; exit 1\nfi\n')
    os.chmod(check, 0o755)
    wait_for("every node idle", all_idle, 120, diagnose=lambda: [node_state(n) for n in NODES])
    job = submit(stage, workdir, nodes="2", script="elastic.sbatch", env={"HEALTH_CHECK": check},
                 train_args="--steps 20 --step-seconds 0.1 --save-every 5")
    f = wait_job(job, "the job ended", ended, timeout=300)
    text = output(workdir)
    assert f["JobState"] == "COMPLETED", text
    assert f["Restarts"] == "1", f
    records = ledger(workdir, job)
    assert [(r["attempt"], r["end"], r["final"], r["failures"]) for r in records] == [(0, "failed", False, [])], records
    bad = records[0]["detail"].split(" ")[0]
    assert records[0]["detail"] == \
        f"{bad} (site check `{check}`: exit code 1: GPU 1 needs a reset on {bad}) failed the health check", records
    assert bad in f["ExcNodeList"], f"Slurm must not give the job {bad} again: {f}"
    assert (f"group: attempt 0 cannot start ({records[0]['detail']}); 1 of 3 restarts (--max-restarts) used; "
            f"1 node(s) passed, fewer than --nnodes MIN 2: requeued without {bad}") in text, text
    seen = starts(text)
    assert not [s for s in seen if s[0] == 0], "no worker starts in an attempt the gate refused"
    assert sorted(r for a, _, r, w in seen if a == 1 and w == 4) == list(range(4)), seen
    hosts = attempt_hosts(workdir, job, 1)
    assert len(hosts) == 2 and bad not in hosts, hosts
    assert expected in text, text
    # dlaunch report reads the job's ledger.
    report = subprocess.run([f"{stage}/dlaunch", "report", os.path.join(workdir, "dlaunch-logs", str(job))],
                            capture_output=True, text=True, env=ENV)
    assert report.returncode == 0, report.stderr
    assert f"(run 0 of the batch job, 2 node(s), world size 4)  failed: {records[0]['detail']}; requeued" \
        in report.stdout, report.stdout
    assert "after the last record: the job succeeded or still runs" in report.stdout, report.stdout


def submit_spank(stage, workdir, env=None, train_args=""):
    """Submitted from workdir: the plugin keeps the ledger in $SLURM_SUBMIT_DIR/dlaunch-logs."""
    extra = dict(EXAMPLE=f"{stage}/examples/ddp_checkpoint.py", WORKDIR=workdir, TRAIN_ARGS=train_args, **(env or {}))
    out = subprocess.run(["sbatch", "--parsable", f"--output={workdir}/job.out", "--export=ALL",
                          f"{stage}/examples/sbatch/requeue-spank.sbatch"],
                         capture_output=True, text=True, env=dict(ENV, **extra), check=True, cwd=workdir)
    return int(out.stdout.strip().split(";")[0])


def test_spank_a_crash_is_requeued_and_the_result_equals_an_uninterrupted_run(stage, workdir):
    expected = reference_result(stage, workdir)
    job = submit_spank(stage, workdir, train_args="--crash-at-step 15 --crash-rank 3 --crash-on-attempt 0")
    f = wait_job(job, "the job ended", ended)
    text = output(workdir)
    assert f["JobState"] == "COMPLETED", text
    assert f["Restarts"] == "1", f
    assert f"dlaunch: rank 3 on {NODES[1]}: exit code 3: requeue: attempt 0 failed; 1 of 3 failed attempts allowed" in text
    assert expected in text, f"the resumed run's result differs from an uninterrupted run's ({expected})\n{text}"
    seen = starts(text)
    assert sorted(r for a, _, r, _ in seen if a == 0) == [0, 1, 2, 3]
    assert sorted(r for a, _, r, _ in seen if a == 1) == [0, 1, 2, 3]
    assert {run for _, run, _, _ in seen} == {str(job)}, "the run id is the job id in every attempt"
    for attempt in (0, 1):
        for rank in range(4):
            node = rank // 2
            assert re.search(rf"==== dlaunch: job {job}, attempt {attempt}: rank {rank} of 4 \(local rank {rank % 2}, "
                             rf"node {node} of 2, host {NODES[node]}\) ====", text), (attempt, rank, text)
    recs = ledger(workdir, job)
    assert {(r["attempt"], r["end"]) for r in recs} == {(0, "failed")}, recs
    assert [f["rank"] for r in recs for f in r["failures"] if f["exit_code"] == 3] == [3]


def test_spank_the_budget_ends_the_job_with_every_attempt(stage, workdir):
    job = submit_spank(stage, workdir, env={"MAX_RESTARTS": "1"},
                       train_args="--crash-at-step 2 --crash-rank 2 --crash-on-attempt -1 --crash-code 5")
    f = wait_job(job, "the job ended", ended)
    text = output(workdir)
    assert f["JobState"] == "FAILED", text
    assert f["ExitCode"] == "5:0", "srun passes on the highest task exit code: the crash's"
    assert f["Restarts"] == "1", f
    assert "requeue: attempt 1 failed; 2 failed attempts, more than the 1 --max-restarts allows: the job ends here" in text
    assert text.count(f"dlaunch: requeue: every attempt of job {job}: 2 failed; summary in") == 1, text
    with open(os.path.join(workdir, "dlaunch-logs", str(job), "failure.json")) as fl:
        summary = json.load(fl)
    assert summary["exit_code"] == 5, summary
    crashes = [(x["attempt"], x["rank"]) for x in summary["failures"] if x["exit_code"] == 5]
    assert crashes == [(0, 2), (1, 2)], summary


def test_spank_checkpoint_exit_requeues_without_using_the_budget(stage, workdir):
    job = submit_spank(stage, workdir, train_args=RESUMABLE)
    _, record = interrupted_and_resumed(stage, workdir, job, ["scancel", "--signal=USR1"])
    # Every task exits 75 once the checkpoint is complete (the script's barrier) and asks for the requeue;
    # the first request to reach slurmctld wins. Rank 0 either exited 75 itself (also when another task's
    # request came first), or Slurm's requeue, asked for by another task, ended it with SIGTERM before it did.
    if record["exit_code"] == 75:
        assert record["detail"] == "rank 0 exited with checkpoint-exit 75", record
    else:
        assert (record["exit_code"], record["detail"]) == \
            (128 + 15, "SIGTERM: Slurm requeues the job (scontrol requeue, preemption or node failure)"), record


def test_spank_requeue_outside_a_batch_job_is_refused(stage):
    out = subprocess.run(["srun", "--immediate=60", "-N1", "-n1", "--dist-launch=requeue", "true"],
                         capture_output=True, text=True, env=ENV, timeout=120)
    assert out.returncode != 0
    assert "requeue needs a batch job" in out.stderr, out.stderr
    bad = subprocess.run(["srun", "--immediate=60", "-N1", "-n1", "--dist-launch=max-restarts=2", "true"],
                         capture_output=True, text=True, env=ENV, timeout=120)
    assert bad.returncode != 0
    assert "max-restarts only applies with requeue" in bad.stderr, bad.stderr


def test_requeue_outside_a_batch_job_is_refused(stage):
    out = subprocess.run([f"{stage}/dlaunch", "--requeue", "--nproc-per-node", "1", "--no-python", "true"],
                         capture_output=True, text=True, env={k: v for k, v in ENV.items() if not k.startswith("SLURM_J")})
    assert out.returncode == USAGE
    assert "requeue: --requeue needs a Slurm batch job, and SLURM_JOB_ID is not set" in out.stderr
