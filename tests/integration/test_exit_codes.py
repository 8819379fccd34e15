"""dlaunch's exit code (README "Exit codes"): 0 on success, the root-cause rank's code (128+N for a rank
killed by signal N), dlaunch's own outcomes in the sysexits.h range (64 usage errors, ...), and dlaunch
itself stopped by signal N dies of N."""

import os
import re
import signal
import subprocess

import pytest

from conftest import (LAUNCH_FAILED, NOT_READY, USAGE, Background, base_env, describe, read_pids, run_dlaunch, source_dir,
                      wait_for, write_script)


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


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT])
def test_dlaunch_stopped_by_signal_dies_of_it(tmp_path, signo):
    # Killed by the signal (returncode -N), not exit 128+N: what a worker killed by N gives (below), and
    # what a shell waiting for dlaunch needs to stop a script on ^C.
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
        assert bg.wait(timeout=20) == -signo, bg.stderr()
    assert f"received {signal.Signals(signo).name}" in bg.stderr()
    assert not list(tmp_path.glob("core*")), "no core file for SIGQUIT"


def test_a_worker_killed_by_sigterm_is_an_exit_code_not_a_signal(tmp_path):
    script = write_script(tmp_path, "term.py", """
        import os, signal
        os.kill(os.getpid(), signal.SIGTERM)
    """)
    proc = run_dlaunch(["--nproc-per-node", 1, "--log-dir", tmp_path / "logs", script])
    assert proc.returncode == 128 + signal.SIGTERM, describe(proc)


def test_a_workers_own_2_or_3_is_not_taken_for_dlaunchs(tmp_path):
    script = write_script(tmp_path, "two.py", "import sys\nsys.exit(2)\n")
    proc = run_dlaunch(["--nproc-per-node", 1, "--log-dir", tmp_path / "logs", script])
    assert proc.returncode == 2, describe(proc)
    assert "exit code: 2" in proc.stderr, describe(proc)


def exit_code_constants():
    header = (source_dir() / "base" / "include" / "dlaunch" / "exit_codes.hpp").read_text()
    return {name: int(value) for name, value in re.findall(r"constexpr int (k\w+) = (\d+);", header)}


def test_the_table_in_the_header_readme_and_help_agree():
    codes = exit_code_constants()
    assert codes["kUsage"] == USAGE and codes["kLaunchFailure"] == LAUNCH_FAILED, codes
    assert codes["kNotReady"] == NOT_READY, codes
    own = [codes[k] for k in ("kUsage", "kGroupFailure", "kInternal", "kLaunchFailure", "kLogFailure", "kNotReady",
                              "kHang")]
    readme = (source_dir() / "README.md").read_text()
    table = readme[readme.index("### Exit codes"):readme.index("### Logs and the failure summary")]
    assert sorted(int(c) for c in re.findall(r"^\| (\d+) \|", table, re.M)) == sorted([0, *own]), table
    help_text = " ".join(run_dlaunch(["--help"]).stdout.split())
    for code in own:
        assert f"; {code} " in help_text or f"Exit codes: 0 all workers succeeded; {code} " in help_text, code
    mpi = subprocess.run([os.environ["DLAUNCH_MPI_BIN"], "--help"], capture_output=True, text=True,
                         env=base_env(), timeout=30)
    mpi_text = " ".join(mpi.stdout.split())
    for code in (codes["kUsage"], codes["kLaunchFailure"], codes["kInternal"], codes["kHang"]):
        assert f"{code} " in mpi_text[mpi_text.index("Exit codes:"):], code


def test_help_and_version_are_zero():
    proc = run_dlaunch(["--help"])
    assert proc.returncode == 0, describe(proc)
    assert "usage: dlaunch [OPTIONS] SCRIPT [ARGS...]" in proc.stdout
    assert "--nproc-per-node" in proc.stdout
    proc = run_dlaunch(["--version"])
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.startswith("dlaunch ")


@pytest.mark.parametrize("args", [["--bogus-option", "x.py"], ["--nproc-per-node"], []])
def test_usage_errors_are_64(tmp_path, args):
    proc = run_dlaunch(args, cwd=tmp_path)
    assert proc.returncode == USAGE == 64, describe(proc)
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
