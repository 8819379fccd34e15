"""Hangs on the real Slurm test cluster (tests/slurm/cluster.sh): one dlaunch agent per node under srun, a DDP
job whose rank 2 (node 1) sleeps before an all_reduce. Each agent judges its own ranks: node 1's names rank 2,
node 0's says the culprit is on another node (the first to find the hang ends the step, so each case gives its
node the shorter timeout); the stacks are in the shared log directory. And
`dlaunch stacks slurm:JOBID`, one task per node, prints every rank's stacks of a running job. Without an agent
(srun --dist-launch=hang-timeout=S, TORCHELASTIC_ENABLE_FILE_TIMER=1) each task runs under dlaunch-watch."""
import glob
import os
import re
import subprocess
import time

from slurmtest import ENV, NODES, slurm, srun, wait_for


def hang_under_agents(stage, logs, fast_node):
    """The DDP hang under one agent per node; node `fast_node` has the shorter --hang-timeout (3 s against 10 s):
    the first agent to find the hang ends the Slurm step, so only its report is certain."""
    timeout = f'if [ "$SLURM_NODEID" = {fast_node} ]; then t=3; else t=10; fi; exec "$0" --hang-timeout "$t" "$@"'
    result = srun(["-N2", "--ntasks-per-node=1", "sh", "-c", timeout, f"{stage}/dlaunch", "--nproc-per-node", "2",
                   "--log-dir", logs, f"{stage}/workers/ddp_hang.py"], timeout=120)
    text = result.stdout + result.stderr
    assert result.returncode in (124, 143), text
    assert f"task {fast_node}: Exited with exit code 124" in text, text
    return text


def test_a_hang_under_srun_is_found_and_the_culprit_named_on_its_node(stage, outdir):
    logs = os.path.join(outdir, "logs")
    text = hang_under_agents(stage, logs, fast_node=1)
    assert re.search(rf"likeliest culprit: rank 2 \(host ({'|'.join(NODES)}), pid ", text), text
    assert "rank 2 is not in a collective: at " in text and "time.sleep(" in text, text
    assert "rank 3 waits in all_reduce" in text, text
    # The finding agent took its ranks' stacks into the shared log directory: rank 2 asleep, rank 3 waiting.
    stacks = [open(p).read() for p in glob.glob(os.path.join(logs, "*", "attempt_0", "*", "stacks.txt"))]
    assert any('ddp_hang.py", line 16 in <module>' in t and "in all_reduce" not in t for t in stacks), stacks
    assert any("in all_reduce" in t for t in stacks), stacks


def test_a_node_whose_ranks_all_wait_says_the_culprit_is_on_another_node(stage, outdir):
    text = hang_under_agents(stage, os.path.join(outdir, "logs"), fast_node=0)
    assert "likeliest culprit: a rank of another node; every rank of this node waits in all_reduce" in text, text
    assert "ranks 0,1 wait in all_reduce" in text, text


def test_stacks_of_a_running_slurm_job_reach_every_node(stage, outdir):
    logs = os.path.join(outdir, "logs")
    stacks_on_demand(stage, ["-N2", "--ntasks-per-node=1", f"{stage}/dlaunch", "--nproc-per-node", "2",
                             "--log-dir", logs, f"{stage}/workers/ddp_hang.py", "600"],
                     ready=lambda: listening(logs) == 4)


def test_stacks_of_a_running_dist_launch_job_with_watched_tasks(stage):
    # Each task's stacks file is in its node's $TMPDIR (no log directory); the rank, not its watcher, answers.
    stacks_on_demand(stage, ["-N2", "-n4", "--dist-launch=hang-timeout=600", f"{stage}/workers/ddp_hang.py", "600"])


def stacks_on_demand(stage, job_args, ready=None):
    """Starts the job, runs `dlaunch stacks slurm:JOBID` on both nodes through the step until ranks 0,1,3 wait in
    all_reduce, and checks every rank answered and nothing was stopped."""
    name = f"stacks-{os.getpid()}-{time.monotonic_ns()}"
    job = subprocess.Popen(["srun", "-J", name, *job_args], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    try:
        job_id = wait_for("the job's id", lambda: job_named(name), 60)
        if ready:
            wait_for("four ranks listening for the stack signal", ready, 90)
        result = wait_for("every rank's stacks", lambda: every_rank(stage, job_id), 120,
                          diagnose=lambda: f"{LAST.get('stacks')}\njob: {job_output(job)}")
        sections = {}
        for task in ("0", "1"):  # srun -l: each node's lines carry its task number
            text = "".join(line.split(": ", 1)[1] + "\n" for line in result.stdout.splitlines()
                           if line.split(": ", 1)[0].strip() == task)
            sections.update({int(s.split(" ")[0]): s for s in text.split("==> rank ")[1:]})
        assert sorted(sections) == [0, 1, 2, 3], result.stdout
        assert "in all_reduce" not in sections[2] and "ddp_hang.py" in sections[2], sections[2]
        assert job.poll() is None, f"dlaunch stacks stops nothing: {job_output(job)}"
    finally:
        job.kill()
        slurm("scancel", ["-n", name])
        job.wait(timeout=60)


def job_output(job):
    """What the job printed, once it has ended ("still running" before)."""
    return "still running" if job.poll() is None else f"exit {job.returncode}: {job.stdout.read()}"


def job_named(name):
    out = slurm("squeue", ["-h", "-t", "R", "-n", name, "-o", "%i"]).stdout.split()
    return int(out[0]) if out else None


def listening(logs):
    return sum("dlaunch-stacks" in open(p).read()
               for p in glob.glob(os.path.join(logs, "*", "attempt_0", "*", "stacks.txt")))


LAST = {}


def every_rank(stage, job_id):
    result = srun([f"--jobid={job_id}", "--overlap", "-l", "-N2", "--ntasks-per-node=1", f"{stage}/dlaunch", "stacks",
                   f"slurm:{job_id}"], timeout=60)
    LAST["stacks"] = f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    if result.returncode != 0 or result.stdout.count("in all_reduce") < 3:
        time.sleep(1)
        return None
    return result


def test_the_same_hang_under_srun_dist_launch_is_found_by_each_tasks_watcher(stage):
    # No agent: each task's dlaunch-watch judges its own rank, and srun shows every task's report.
    result = srun(["-N2", "-n4", "--dist-launch=hang-timeout=5", f"{stage}/workers/ddp_hang.py"], timeout=120)
    text = result.stdout + result.stderr
    assert result.returncode == 124, text
    # The step's two nodes are any two of the cluster's three (another test's job may hold one).
    assert re.search(r"srun: error: \S+: tasks? [0-9,-]+: Exited with exit code 124", text), text
    # Found at the first check after 5 s of silence: the report rounds what it measured, 5 or 6 s (as
    # tests/integration/test_hangs.py allows 2 or 3 for its 2 s).
    assert re.search(r"hang: no progress for [56] s \(no output, no CPU time in its main thread\); "
                     r"likeliest culprit: rank 2 "
                     rf"\(host ({'|'.join(NODES)}), pid ", text), text
    assert "rank 2 is not in a collective: at " in text and "time.sleep(" in text, text
    # The victims' watchers fire about together: the first to stop its rank breaks the others' all_reduce
    # ("Connection closed by peer"), so some end before their own report. None is ever named the culprit.
    victims = [v for v in (0, 1, 3) if f"rank {v} waits in all_reduce: the culprit is another rank" in text]
    assert victims, text
    assert not re.search(r"likeliest culprit: rank [013] ", text), text
    assert "dlaunch: rank 2: stacks (" in text and "ddp_hang.py\", line 16 in <module>" in text, text


def test_torchruns_watchdog_under_srun_dist_launch(stage):
    # As under torchrun: the rank whose FileTimerClient timer expired is killed, after about 2 s, not 600.
    result = srun(["-N2", "-n2", "--dist-launch", f"{stage}/workers/file_timer.py"], timeout=120,
                  env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1"})
    text = result.stdout + result.stderr
    assert result.returncode == 128 + 9, text
    assert text.count("entering the slow step") == 2, text
    assert text.count("torchrun's watchdog: timer 'slow step' expired; sent SIGKILL to pid ") == 2, text
    assert "quick step" not in text, text


def test_a_watched_task_ends_as_its_program_did():
    # dlaunch-watch stands between slurmstepd and the program: srun must not see the difference.
    exit3 = srun(["-N1", "-n1", "--dist-launch=hang-timeout=60", "sh", "-c", "exit 3"], timeout=60)
    assert exit3.returncode == 3, exit3.stderr
    assert "task 0: Exited with exit code 3" in exit3.stderr and "hang" not in exit3.stderr, exit3.stderr
    cat = srun(["-N1", "-n1", "--dist-launch=hang-timeout=60", "cat"], timeout=60, input="from srun's stdin\n")
    assert cat.returncode == 0 and cat.stdout == "from srun's stdin\n", cat.stdout + cat.stderr
    segv = srun(["-N1", "-n1", "--dist-launch", "sh", "-c", "kill -SEGV $$"], timeout=60,
                env={"DLAUNCH_HANG_TIMEOUT": "60"})  # the step's environment asks for watching too
    assert segv.returncode == 128 + 11, segv.stderr
    assert "task 0: Segmentation fault" in segv.stderr, segv.stderr


def test_a_watched_task_sees_its_own_watchdog_fifo_and_none_of_the_watchers_variables():
    result = srun(["-N1", "-n2", "--dist-launch=hang-timeout=60", "sh", "-c",
                   'echo "$RANK $TORCHELASTIC_TIMER_FILE [$DLAUNCH_HANG_TIMEOUT$DLAUNCH_SCRIPT] $(cat /proc/$PPID/comm)"'],
                  timeout=60, env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1", "TORCHELASTIC_TIMER_FILE": "/tmp/watchdog"})
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["0 /tmp/watchdog.0 [] dlaunch-watch",
                                                  "1 /tmp/watchdog.1 [] dlaunch-watch"], result.stdout


def test_a_bad_hang_timeout_stops_srun_before_any_task_starts(stage):
    result = srun(["-N1", "-n1", "--dist-launch=hang-timeout=soon", "true"], timeout=60)
    assert result.returncode != 0
    assert "hang-timeout=soon: not a number of seconds; give seconds > 0, e.g. hang-timeout=300" in result.stderr, \
        result.stderr

