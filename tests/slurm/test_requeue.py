"""dlaunch --requeue on the real two-node Slurm (tests/slurm/cluster.sh): the batch job's attempts are the
restarts. Each test submits examples/sbatch/requeue.sbatch as it is, with examples/ddp_checkpoint.py.

Slurm 22.05 holds a requeued job for ~121 s (Reason=BeginTime) before it may start again; these tests
release that hold with `scontrol update StartTime=now` once the job is pending and no node is still completing
the last attempt (earlier, slurmd refuses the start: "Job credential revoked"), so the suite does not wait it
out (the delay is Slurm's own; bench/README.md has the measurement).
"""
import json
import os
import re
import subprocess
import time

import pytest

BASE = os.environ.get("DLAUNCH_SLURM_BASE", "/var/lib/dlaunch-test-slurm")
PYTHON = os.environ.get("PYTHON_EXEC", "/usr/bin/python3")
ENV = dict(os.environ, SLURM_CONF=os.path.join(BASE, "slurm.conf"), PYTHON_EXEC=PYTHON)


@pytest.fixture(scope="module")
def stage():
    path = os.environ.get("DLAUNCH_SLURM_STAGE", "")
    assert path and os.path.isdir(path), "DLAUNCH_SLURM_STAGE must name the staged directory (tests/slurm/stage.sh)"
    return path


@pytest.fixture()
def workdir():
    path = os.path.join(BASE, "shared", "out", f"requeue-{os.getpid()}-{time.monotonic_ns()}")
    os.makedirs(path)
    os.chmod(path, 0o777)
    return path


def job_fields(job):
    out = subprocess.run(["scontrol", "-o", "show", "job", str(job)], capture_output=True, text=True, env=ENV)
    return dict(re.findall(r"(\w+)=(\S*)", out.stdout))


def submit(stage, workdir, nodes="2", env=None, train_args="", sbatch_args=(), script="requeue.sbatch"):
    extra = dict(DLAUNCH=f"{stage}/dlaunch", EXAMPLE=f"{stage}/examples/ddp_checkpoint.py", WORKDIR=workdir,
                 TRAIN_ARGS=train_args, **(env or {}))
    out = subprocess.run(["sbatch", "--parsable", f"--nodes={nodes}", f"--chdir={workdir}", *sbatch_args,
                          f"--output={workdir}/job.out", "--export=ALL", f"{stage}/examples/sbatch/{script}"],
                         capture_output=True, text=True, env=dict(ENV, **extra), check=True)
    return int(out.stdout.strip().split(";")[0])


def wait(job, until, timeout=240, release=True):
    """Polls the job; releases Slurm's BeginTime hold after a requeue; returns the fields once until() holds."""
    deadline = time.monotonic() + timeout
    held_since = None
    while time.monotonic() < deadline:
        f = job_fields(job)
        held = f.get("JobState") == "PENDING" and f.get("Reason") == "BeginTime"
        held_since = (held_since or time.monotonic()) if held else None
        # KillWait (5 s) + 2: the last attempt's tasks are gone by then even if they ignored SIGTERM.
        if release and held and time.monotonic() - held_since > 7 and not completing(job):
            subprocess.run(["scontrol", "update", f"jobid={job}", "StartTime=now"], env=ENV, capture_output=True)
        if until(f):
            return f
        time.sleep(0.5)
    subprocess.run(["scancel", str(job)], env=ENV)
    pytest.fail(f"job {job} did not get there in {timeout} s: {job_fields(job)}")


def completing(job):
    """The last attempt is still ending: a start now would be refused (credential revoked) and fail the job."""
    nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, env=ENV).stdout
    state = subprocess.run(["squeue", "-h", "-j", str(job), "-o", "%T"], capture_output=True, text=True, env=ENV).stdout
    return "completing" in nodes.lower() or "COMPLETING" in state


def ended(f):
    return f.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")


def output(workdir):
    with open(os.path.join(workdir, "job.out")) as f:
        return f.read()


def reference_result(stage, workdir, *args):
    """The uninterrupted run's result, world size 1, started by hand."""
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29581")
    out = subprocess.run([PYTHON, f"{stage}/examples/ddp_checkpoint.py", "--checkpoint", f"{workdir}/ref.pt",
                          "--step-seconds", "0", *args], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return re.search(r"^result: .*$", out.stdout, re.M).group(0)


def starts(text):
    """(attempt, run id, rank, world) of every worker start line."""
    return [(int(a), run, int(r), int(w)) for r, w, a, run in
            re.findall(r"start: rank (\d+) of (\d+) attempt (\d+) run (\S+)", text)]


def test_a_crash_is_requeued_and_the_result_equals_an_uninterrupted_run(stage, workdir):
    expected = reference_result(stage, workdir)
    job = submit(stage, workdir, train_args="--crash-at-step 15 --crash-rank 3 --crash-on-attempt 0")
    f = wait(job, ended)
    text = output(workdir)
    assert f["JobState"] == "COMPLETED", text
    assert f["Restarts"] == "1", f
    assert "crash: rank 3 at step 15 on attempt 0" in text
    assert "requeue: attempt 0 failed; 1 of 3 failed attempts allowed (--max-restarts) used" in text
    assert f"requeue: job {job} requeued (worker failure); attempt 1 comes next" in text
    assert f"dlaunch: job {job}: attempt 1 (requeued 1 time; 1 of 3 failed attempts used): 2 nodes, world size 4" in text
    assert expected in text, f"the resumed run's result differs from an uninterrupted run's ({expected})\n{text}"
    # Every rank of an attempt sees the same restart count and run id; the run id is the job's in both.
    seen = starts(text)
    assert sorted(r for a, _, r, _ in seen if a == 0) == [0, 1, 2, 3]
    assert sorted(r for a, _, r, _ in seen if a == 1) == [0, 1, 2, 3]
    assert {run for _, run, _, _ in seen} == {str(job)}
    # The ledger and the per-rank logs: each attempt under its own header, nothing overwritten.
    jobdir = os.path.join(workdir, "dlaunch-logs", str(job))
    with open(os.path.join(jobdir, "attempts.jsonl")) as fl:
        ledger = [json.loads(line) for line in fl]
    # The crashing node records attempt 0; so may the other, if its workers failed (lost their peer) first.
    assert {(r["attempt"], r["end"]) for r in ledger} == {(0, "failed")}, ledger
    crash = [f for r in ledger for f in r["failures"] if f["exit_code"] == 3]
    assert [f["rank"] for f in crash] == [3], ledger
    with open(os.path.join(jobdir, "rank_3", "stdout.log")) as fl:
        log = fl.read()
    assert f"==== dlaunch: job {job}, attempt 0: rank 3 of 4" in log
    assert f"==== dlaunch: job {job}, attempt 1: rank 3 of 4" in log
    assert log.index("attempt 0:") < log.index("start: rank 3 of 4 attempt 0") < log.index("attempt 1:")


def test_the_budget_ends_the_job_with_the_root_cause_and_every_attempt(stage, workdir):
    job = submit(stage, workdir, env={"MAX_RESTARTS": "1"},
                 train_args="--crash-at-step 2 --crash-rank 2 --crash-on-attempt -1 --crash-code 5")
    f = wait(job, ended)
    text = output(workdir)
    assert f["JobState"] == "FAILED", text
    assert f["ExitCode"] == "5:0", f
    assert f["Restarts"] == "1", f
    assert "requeue: attempt 1 failed; 2 of 1 failed attempts allowed (--max-restarts) exceeded: the job ends here" in text
    summary = text[text.index(f"dlaunch: every attempt of job {job}:"):]
    assert "root cause: rank 2 (local rank 0, node 1" in summary
    assert "attempt 0: rank 2 (local 0): exit code 5" in summary
    assert "restarts used 1 of 1" in summary
    with open(os.path.join(workdir, "dlaunch-logs", str(job), "failure.json")) as fl:
        assert json.load(fl)["exit_code"] == 5


def ledger(workdir, job):
    with open(os.path.join(workdir, "dlaunch-logs", str(job), "attempts.jsonl")) as fl:
        return [json.loads(line) for line in fl]


def all_training(workdir, attempt=0, ranks=4):
    return lambda f: f.get("JobState") == "RUNNING" and len(
        [s for s in starts(output(workdir)) if s[0] == attempt]) == ranks


def interrupted_and_resumed(stage, workdir, job, interrupt):
    """Once every rank of `job` (60 steps of 0.25 s) trains, runs `interrupt` (a command line the job id is
    appended to, or a function of the job id); checks that the job checkpointed,
    came back once, resumed from that checkpoint, got an uninterrupted run's result, and used no budget.
    Returns the job's output."""
    expected = reference_result(stage, workdir, "--steps", "60")
    wait(job, all_training(workdir), timeout=120)
    time.sleep(2)
    if callable(interrupt):
        interrupt(job)
    else:
        subprocess.run([*interrupt, str(job)], env=ENV, check=True)
    f = wait(job, ended)
    text = output(workdir)
    assert f["JobState"] == "COMPLETED", text
    assert f["Restarts"] == "1", f
    saved = re.search(r"checkpoint: saved step (\d+) \(signal\)", text)
    assert saved, text
    assert re.search(rf"start: rank 0 of 4 attempt 1 run {job} resume_step {saved.group(1)}", text), text
    assert expected in text, f"the resumed run's result differs from an uninterrupted run's ({expected})\n{text}"
    assert [r["end"] for r in ledger(workdir, job)] == ["checkpointed"], "a checkpoint does not use the budget"
    return text


RESUMABLE = "--steps 60 --step-seconds 0.25 --save-every 1000"


def test_the_warning_signal_checkpoints_requeues_and_resumes(stage, workdir):
    job = submit(stage, workdir, train_args=RESUMABLE)
    # What `#SBATCH --signal=USR1@120` sends before the time limit.
    text = interrupted_and_resumed(stage, workdir, job, ["scancel", "--signal=USR1"])
    assert "checkpoint: received SIGUSR1 (the job's warning signal)" in text
    assert f"requeue: job {job} requeued (checkpoint after the warning signal)" in text


def test_scontrol_requeue_checkpoints_and_the_job_resumes(stage, workdir):
    job = submit(stage, workdir, train_args=RESUMABLE)
    text = interrupted_and_resumed(stage, workdir, job, ["scontrol", "requeue"])
    assert "checkpoint: received SIGTERM (Slurm ends this attempt" in text
    assert "requeue: SIGTERM: Slurm requeues the job (scontrol requeue, preemption or node failure)" in text


def test_preemption_checkpoints_and_the_job_resumes_after_the_urgent_one(stage, workdir):
    urgent = []

    def preempt(job):
        # A job of the higher-tier partition that needs both nodes whole: Slurm preempts ours (REQUEUE).
        out = subprocess.run(["sbatch", "--parsable", "-p", "urgent", "-N2", "--exclusive", "-o", "/dev/null",
                              "--wrap", "sleep 5"], capture_output=True, text=True, env=ENV, check=True)
        urgent.append(out.stdout.strip())

    job = submit(stage, workdir, train_args=RESUMABLE)
    try:
        text = interrupted_and_resumed(stage, workdir, job, preempt)
    finally:
        subprocess.run(["scancel", *urgent], env=ENV)
    assert re.search(rf"\*\*\* JOB {job} ON node\d CANCELLED AT \S+ DUE TO PREEMPTION \*\*\*", text), text
    assert "checkpoint: received SIGTERM (Slurm ends this attempt" in text
    assert "requeue: SIGTERM: Slurm requeues the job (scontrol requeue, preemption or node failure)" in text


def test_scancel_checkpoints_and_the_job_is_not_requeued(stage, workdir):
    job = submit(stage, workdir, train_args="--steps 400 --step-seconds 0.25 --save-every 1000")
    wait(job, all_training(workdir), timeout=120)
    subprocess.run(["scancel", str(job)], env=ENV, check=True)
    f = wait(job, ended, release=False)
    time.sleep(3)  # the agent's last lines
    text = output(workdir)
    assert f["JobState"] == "CANCELLED", f
    assert f["Restarts"] == "0", "a cancelled job must never come back"
    assert re.search(r"checkpoint: saved step \d+ \(signal\)", text), text
    assert "requeue: SIGTERM: the job was cancelled (scancel); not requeued" in text
    assert [(r["end"], r["final"]) for r in ledger(workdir, job)] == [("stopped", False)]


def test_time_limit_with_its_warning_signal_checkpoints_and_resumes(stage, workdir):
    # --time=1 and USR1 50 s before it: Slurm checks time limits every 30 s, so the warning comes 10-40 s
    # after the start; 200 steps of 0.25 s outlast that, so the first attempt is interrupted.
    expected = reference_result(stage, workdir, "--steps", "200")
    job = submit(stage, workdir, train_args="--steps 200 --step-seconds 0.25 --save-every 1000",
                 sbatch_args=("--time=1", "--signal=USR1@50"))
    f = wait(job, ended, timeout=420)
    text = output(workdir)
    assert f["JobState"] == "COMPLETED", text
    assert int(f["Restarts"]) >= 1, f
    assert "checkpoint: received SIGUSR1 (the job's warning signal)" in text
    assert re.search(rf"start: rank 0 of 4 attempt 1 run {job} resume_step [1-9]", text), text
    assert expected in text
    assert {r["end"] for r in ledger(workdir, job)} == {"checkpointed"}


def kill_node(name):
    """A node's death: SIGKILL to its slurmd and everything it started (each slurmd of the test cluster has a
    mount namespace of its own, so that is every process in that namespace)."""
    with open(os.path.join(BASE, f"slurmd-{name}.pid")) as f:
        ns = os.readlink(f"/proc/{int(f.read())}/ns/mnt")
    assert ns != os.readlink("/proc/self/ns/mnt"), "the test node must have its own mount namespace"
    killed = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/ns/mnt") == ns:
                os.kill(int(pid), 9)
                killed += 1
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
    return killed


def node_state(name):
    return subprocess.run(["sinfo", "-h", "-n", name, "-o", "%T"], capture_output=True, text=True, env=ENV).stdout.strip()


def test_a_dead_node_is_left_out_and_the_job_goes_on_with_fewer_ranks(stage, workdir):
    expected = reference_result(stage, workdir, "--steps", "80")
    # examples/sbatch/elastic.sbatch as it is, with a range this cluster has (it asks for 2-4 nodes).
    job = submit(stage, workdir, nodes="1-2", train_args="--steps 80 --step-seconds 0.25 --save-every 5",
                 script="elastic.sbatch")
    try:
        wait(job, all_training(workdir), timeout=120)
        time.sleep(3)
        assert kill_node("node2") >= 3, "slurmd, the step's slurmstepd and the agent at least"
        # node1's workers lose their peers and fail: dlaunch requeues. The attempt can only end (and the
        # job start again) once slurmctld has marked node2 down (SlurmdTimeout), so it comes back without it.
        f = wait(job, ended, timeout=300)
        assert "down" in node_state("node2").lower() or "not_responding" in node_state("node2").lower()
    finally:
        subprocess.run([os.path.join(os.path.dirname(__file__), "cluster.sh"), "start"], check=True)
    text = output(workdir)
    assert f["JobState"] == "COMPLETED", text
    assert f["Restarts"] == "1", f
    assert f"dlaunch: job {job}: attempt 1 (requeued 1 time; 1 of 3 failed attempts used): 1 node, world size 2" in text
    seen = starts(text)
    assert sorted(r for a, _, r, w in seen if a == 0 and w == 4) == [0, 1, 2, 3]
    assert sorted(r for a, _, r, w in seen if a == 1 and w == 2) == [0, 1], "ranks recomputed for one node"
    assert re.search(rf"start: rank 0 of 2 attempt 1 run {job} resume_step [1-9]", text), text
    assert expected in text, "the weights do not depend on the world size (examples/ddp_checkpoint.py)"
    assert [(r["attempt"], r["end"], r["nnodes"]) for r in ledger(workdir, job)] == [(0, "failed", 2)]


# srun --dist-launch=requeue: no agent, the SPANK plugin sees each task's end (examples/sbatch/requeue-spank.sbatch).

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
    f = wait(job, ended)
    text = output(workdir)
    assert f["JobState"] == "COMPLETED", text
    assert f["Restarts"] == "1", f
    assert "dlaunch: rank 3 on node2: exit code 3: requeue: attempt 0 failed; 1 of 3 failed attempts allowed" in text
    assert f"dlaunch: requeue: job {job} requeued (task failure); attempt 1 comes next" in text
    assert expected in text, f"the resumed run's result differs from an uninterrupted run's ({expected})\n{text}"
    seen = starts(text)
    assert sorted(r for a, _, r, _ in seen if a == 0) == [0, 1, 2, 3]
    assert sorted(r for a, _, r, _ in seen if a == 1) == [0, 1, 2, 3]
    assert {run for _, run, _, _ in seen} == {str(job)}, "the run id is the job id in every attempt"
    for attempt in (0, 1):
        for rank in range(4):
            node = rank // 2
            assert re.search(rf"==== dlaunch: job {job}, attempt {attempt}: rank {rank} of 4 \(local rank {rank % 2}, "
                             rf"node {node} of 2, host node{node + 1}\) ====", text), (attempt, rank, text)
    recs = ledger(workdir, job)
    assert {(r["attempt"], r["end"]) for r in recs} == {(0, "failed")}, recs
    assert [f["rank"] for r in recs for f in r["failures"] if f["exit_code"] == 3] == [3]


def test_spank_the_budget_ends_the_job_with_every_attempt(stage, workdir):
    job = submit_spank(stage, workdir, env={"MAX_RESTARTS": "1"},
                       train_args="--crash-at-step 2 --crash-rank 2 --crash-on-attempt -1 --crash-code 5")
    f = wait(job, ended)
    text = output(workdir)
    assert f["JobState"] == "FAILED", text
    assert f["ExitCode"] == "5:0", "srun passes on the highest task exit code: the crash's"
    assert f["Restarts"] == "1", f
    assert "requeue: attempt 1 failed; 2 of 1 failed attempts allowed (--max-restarts) exceeded: the job ends here" in text
    assert text.count(f"dlaunch: requeue: every attempt of job {job}: 2 failed; summary in") == 1, text
    with open(os.path.join(workdir, "dlaunch-logs", str(job), "failure.json")) as fl:
        summary = json.load(fl)
    assert summary["exit_code"] == 5, summary
    crashes = [(x["attempt"], x["rank"]) for x in summary["failures"] if x["exit_code"] == 5]
    assert crashes == [(0, 2), (1, 2)], summary


def test_spank_checkpoint_exit_requeues_without_using_the_budget(stage, workdir):
    job = submit_spank(stage, workdir, train_args=RESUMABLE)
    text = interrupted_and_resumed(stage, workdir, job, ["scancel", "--signal=USR1"])
    assert f"dlaunch: requeue: job {job} requeued (checkpoint); attempt 1 comes next" in text


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
    assert out.returncode == 2
    assert "requeue: --requeue needs a Slurm batch job, and SLURM_JOB_ID is not set" in out.stderr
