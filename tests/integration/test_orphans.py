"""No orphans: workers die with dlaunch even when dlaunch is SIGKILLed (PR_SET_PDEATHSIG), and so do
their own children (the guardian)."""

import signal
import time

from conftest import Background, pid_alive, read_pids, wait_for, write_script


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


def pids_written(directory):
    """[(worker, child)] of each rank."""
    return [tuple(int(p) for p in f.read_text().split()) for f in sorted(directory.glob("*.pid"))]


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
