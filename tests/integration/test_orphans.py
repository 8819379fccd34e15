"""No orphans: workers die with dlaunch even when dlaunch is SIGKILLed (PR_SET_PDEATHSIG), and so do
their own children (the guardian)."""

import signal
import time
from pathlib import Path

from c10d_agents import Agent, c10d, finish, host_then
from conftest import Background, free_port, pid_alive, read_pids, wait_for, write_script


def test_sigkill_of_dlaunch_leaves_no_worker(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    script = write_script(tmp_path, "sleeper.py", """
        import os, sys, time
        path = os.path.join(sys.argv[1], os.environ["RANK"] + ".pid")
        with open(path + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(path + ".tmp", path)
        time.sleep(60)
    """)
    with Background(["--nproc-per-node", 4, "--log-dir", tmp_path / "logs", script, pids], tmp_path) as bg:
        wait_for(lambda: len(read_pids(pids)) == 4, what="all workers to start")
        bg.worker_pids = read_pids(pids)
        assert all(pid_alive(p) for p in bg.worker_pids)
        bg.send(signal.SIGKILL)
        assert bg.wait(timeout=10) == -signal.SIGKILL
        deadline = time.monotonic() + 3
        while any(pid_alive(p) for p in bg.worker_pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = [p for p in bg.worker_pids if pid_alive(p)]
        assert alive == [], f"workers {alive} outlived a SIGKILLed dlaunch"


def parent_script(tmp_path, then):
    """A worker that starts a child (in the worker's process group), writes "WORKER_PID CHILD_PID" to
    DIR/RANK.pid, then runs `then`."""
    return write_script(tmp_path, "parent.py", f"""
        import os, subprocess, sys, time
        child = subprocess.Popen(["sleep", "60"])
        path = os.path.join(sys.argv[1], os.environ["RANK"] + ".pid")
        with open(path + ".tmp", "w") as f:
            f.write(f"{{os.getpid()}} {{child.pid}}")
        os.replace(path + ".tmp", path)
        {then}
    """)


def pids_written(directory, pattern="*.pid"):
    """[(worker, child)] of each rank, in the order of the files' names."""
    return [tuple(int(p) for p in f.read_text().split()) for f in sorted(directory.glob(pattern))]


def test_sigkill_of_dlaunch_leaves_no_child_of_a_worker(tmp_path):
    # Each worker starts a child (in the worker's process group); dlaunch is SIGKILLed. The workers die of
    # PR_SET_PDEATHSIG; their children are the guardian's to kill, and it says so.
    pids = tmp_path / "pids"
    pids.mkdir()
    script = parent_script(tmp_path, "time.sleep(60)")
    with Background(["--nproc-per-node", 2, "--log-dir", tmp_path / "logs", script, pids], tmp_path) as bg:
        wait_for(lambda: len(pids_written(pids)) == 2, what="both workers to start their child")
        bg.worker_pids = [p for pair in pids_written(pids) for p in pair]
        assert len(bg.worker_pids) == 4 and all(pid_alive(p) for p in bg.worker_pids)
        bg.send(signal.SIGKILL)
        assert bg.wait(timeout=10) == -signal.SIGKILL
        wait_for(lambda: not any(pid_alive(p) for p in bg.worker_pids), what="workers and their children to die")
        wait_for(lambda: "guardian" in bg.stderr(), what="the guardian's line")
        assert (f"dlaunch: guardian: the agent (pid {bg.pid}) ended without stopping its workers; "
                "killed what was left of 2 workers' process groups") in bg.stderr()


def test_workers_children_do_not_outlive_the_group(tmp_path):
    # A worker starts a child in its process group (holding the worker's stdout open) and exits 0.
    # When the group is over, dlaunch kills what is left in the workers' process groups.
    pids = tmp_path / "pids"
    pids.mkdir()
    script = parent_script(tmp_path, 'print("parent done")')
    with Background(["--nproc-per-node", 2, "--log-dir", tmp_path / "logs", script, pids], tmp_path) as bg:
        code = bg.wait(timeout=20)
        bg.worker_pids = [child for _, child in pids_written(pids)]
        assert code == 0, bg.stderr()
        assert len(bg.worker_pids) == 2
        wait_for(lambda: not any(pid_alive(p) for p in bg.worker_pids), timeout=3,
                 what="the workers' children to be killed with the group")
    assert sorted(bg.stdout().splitlines()) == ["[0]:parent done", "[1]:parent done"]


# Attempt 0: rank 1 fails once rank 0 runs. Attempt 1: each rank starts a child in its process group and
# writes "WORKER CHILD" to DIR/ATTEMPT-RANK.pid, then both sleep.
RESTART_THEN_CHILD = """
import os, subprocess, sys, time
rank, attempt = os.environ["RANK"], os.environ["TORCHELASTIC_RESTART_COUNT"]
def mark(text):
    path = os.path.join(sys.argv[1], f"{attempt}-{rank}.pid")
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
if attempt == "0":
    mark(str(os.getpid()))
    if rank == "1":
        while not os.path.exists(os.path.join(sys.argv[1], "0-0.pid")):
            time.sleep(0.02)
        sys.exit(3)
    time.sleep(60)
child = subprocess.Popen(["sleep", "60"])
mark(f"{os.getpid()} {child.pid}")
time.sleep(60)
"""


def guardians_of(pid):
    """The pids of the dlaunch-guard processes among `pid`'s children (a worker may end meanwhile)."""
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children += (task / "children").read_text().split()
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended meanwhile
            pass
    guards = []
    for c in children:
        try:
            if Path(f"/proc/{c}/comm").read_text().strip() == "dlaunch-guard":
                guards.append(int(c))
        except FileNotFoundError:
            pass
    return guards


def test_a_group_member_keeps_one_guardian_across_attempts_and_it_kills_what_the_restart_left(tmp_path):
    # A group's agent forks its guardian once, before its rendezvous, not at every restart; the guardian of
    # attempt 0 still knows attempt 1's workers: when the agent is SIGKILLed, it kills the child a worker of
    # attempt 1 started.
    pids = tmp_path / "pids"
    pids.mkdir()
    script = write_script(tmp_path, "restart_then_child.py", RESTART_THEN_CHILD)
    args = c10d(free_port(), 2, "--max-restarts", 1, "--restart-backoff", 0, "--heartbeat-timeout", 2,
                "--nproc-per-node", 1, "--log-dir", tmp_path / "logs", script, pids)
    first = host_then(args, tmp_path)
    # Forked as the agent starts, before its rendezvous (while it is small: guardian.hpp), and the one its
    # workers then have.
    ahead = guardians_of(first.proc.pid)
    second = Agent(args, tmp_path, "second")
    try:
        assert len(ahead) == 1, ahead
        wait_for(lambda: (pids / "0-1.pid").exists(), what="attempt 0's rank 1")
        assert guardians_of(first.proc.pid) == ahead, "the first attempt forked a guardian of its own"
        guardian = guardians_of(second.proc.pid)
        assert len(guardian) == 1, guardian
        wait_for(lambda: len(pids_written(pids, "1-*.pid")) == 2, what="attempt 1's ranks and their children")
        assert guardians_of(second.proc.pid) == guardian, "attempt 1 forked a guardian of its own"
        worker, child = pids_written(pids, "1-*.pid")[1]  # rank 1's, on the second agent
        second.proc.kill()
        wait_for(lambda: not pid_alive(worker) and not pid_alive(child), what="attempt 1's worker and its child")
        line = (f"dlaunch: guardian: the agent (pid {second.proc.pid}) ended without stopping its workers; "
                "killed what was left of 1 worker's process group\n")
        wait_for(lambda: "process group" in second.err.read_text(), what="the guardian's line")
        wait_for(lambda: line in second.err.read_text(), timeout=5, what=f"the whole line {line!r}")
    finally:
        first.proc.kill()
        finish(first, second, timeout=10)
