"""dlaunch's exit code (README "Exit codes"): 0 on success, the root-cause rank's code, 128+N for a
rank killed by signal N or for dlaunch itself stopped by signal N, 2 for usage errors."""

import os
import signal

import pytest

from conftest import Background, describe, read_pids, run_dlaunch, wait_for, write_script


def test_success_is_zero(tmp_path):
    script = write_script(tmp_path, "ok.py", "print('fine')\n")
    proc = run_dlaunch(["--nproc-per-node", 3, script])
    assert proc.returncode == 0, describe(proc)
    assert sorted(proc.stdout.splitlines()) == ["[0]:fine", "[1]:fine", "[2]:fine"]


def test_rank_exit_code_is_propagated(tmp_path):
    script = write_script(tmp_path, "exit3.py", """
        import os, sys, time
        if os.environ["RANK"] == "1":
            sys.exit(3)
        time.sleep(30)
    """)
    proc = run_dlaunch(["--nproc-per-node", 3, "--log-dir", tmp_path / "logs", script])
    assert proc.returncode == 3, describe(proc)


def test_root_cause_code_wins_over_later_failures(tmp_path):
    # Rank 0 fails first with 7; the others then die of dlaunch's SIGTERM (or exit 9 in their handler):
    # those are effects, not the cause.
    script = write_script(tmp_path, "first.py", """
        import os, signal, sys, time
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(9))
        if os.environ["RANK"] == "0":
            time.sleep(0.3)
            sys.exit(7)
        time.sleep(30)
    """)
    proc = run_dlaunch(["--nproc-per-node", 3, "--log-dir", tmp_path / "logs", script])
    assert proc.returncode == 7, describe(proc)


def test_rank_killed_by_sigsegv_is_139(tmp_path):
    script = write_script(tmp_path, "segv.py", """
        import os, signal, time
        if os.environ["RANK"] == "0":
            os.kill(os.getpid(), signal.SIGSEGV)
        time.sleep(30)
    """)
    proc = run_dlaunch(["--nproc-per-node", 2, "--log-dir", tmp_path / "logs", script])
    assert proc.returncode == 128 + signal.SIGSEGV == 139, describe(proc)
    assert "SIGSEGV" in proc.stderr


def test_rank_killed_from_outside(tmp_path):
    # A worker SIGKILLed by someone else (the OOM killer, say): 128 + 9.
    ready = tmp_path / "ready"
    ready.mkdir()
    script = write_script(tmp_path, "victim.py", """
        import os, sys, time
        with open(os.path.join(sys.argv[1], os.environ["RANK"] + ".pid"), "w") as f:
            f.write(str(os.getpid()))
        time.sleep(60)
    """)
    with Background(["--nproc-per-node", 2, "--log-dir", tmp_path / "logs", script, ready], tmp_path) as bg:
        wait_for(lambda: len(read_pids(ready)) == 2, what="both workers to start")
        bg.worker_pids = read_pids(ready)
        os.kill(bg.worker_pids[1], signal.SIGKILL)
        assert bg.wait(timeout=20) == 137, bg.stderr()
    assert "signal SIGKILL (9)" in bg.stderr()


@pytest.mark.parametrize("signo, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129),
                                         (signal.SIGQUIT, 131)])
def test_dlaunch_stopped_by_signal(tmp_path, signo, code):
    ready = tmp_path / "ready"
    ready.mkdir()
    script = write_script(tmp_path, "sleeper.py", """
        import os, sys, time
        with open(os.path.join(sys.argv[1], os.environ["RANK"] + ".pid"), "w") as f:
            f.write(str(os.getpid()))
        time.sleep(60)
    """)
    with Background(["--nproc-per-node", 2, "--log-dir", tmp_path / "logs", script, ready], tmp_path) as bg:
        wait_for(lambda: len(read_pids(ready)) == 2, what="both workers to start")
        bg.worker_pids = read_pids(ready)
        bg.send(signo)
        assert bg.wait(timeout=20) == code, bg.stderr()
    assert f"received {signal.Signals(signo).name}" in bg.stderr()


def test_help_and_version_are_zero():
    proc = run_dlaunch(["--help"])
    assert proc.returncode == 0, describe(proc)
    assert "usage: dlaunch [OPTIONS] SCRIPT [ARGS...]" in proc.stdout
    assert "--nproc-per-node" in proc.stdout
    proc = run_dlaunch(["--version"])
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.startswith("dlaunch ")


@pytest.mark.parametrize("args", [["--bogus-option", "x.py"], ["--nproc-per-node"], []])
def test_usage_errors_are_two(tmp_path, args):
    proc = run_dlaunch(args, cwd=tmp_path)
    assert proc.returncode == 2, describe(proc)
    assert proc.stderr.startswith("dlaunch: "), proc.stderr
    assert proc.stdout == ""


def test_exec_failure_is_127_and_explained(tmp_path):
    # Executable, but its interpreter does not exist: exec fails in the child.
    script = tmp_path / "bad_interpreter.sh"
    script.write_text("#!/nonexistent/interpreter\necho never\n")
    script.chmod(0o755)
    proc = run_dlaunch(["--no-python", "--log-dir", tmp_path / "logs", script])
    assert proc.returncode == 127, describe(proc)
    assert f"[0]:dlaunch: exec: {script}: No such file or directory" in proc.stderr
