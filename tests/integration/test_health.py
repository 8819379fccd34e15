"""The health gate (README "The health gate"): before every attempt the agent checks its node (GPUs usable,
RDMA ports up, room in the log directory) and runs the site's --health-check CMD; a node that fails starts no
worker and the run ends with exit code 78 and the reason, here on one node. (The group's gate, which leaves
a failing node out, is tested on the Slurm cluster: tests/slurm/test_group.py, test_requeue.py.)"""

import json
import os

from conftest import NOT_READY, USAGE, describe, run_dlaunch, the_run_dir, write_script


def site_check(tmp_path, body):
    path = tmp_path / "check.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_a_failing_site_check_starts_no_worker_and_exits_78_with_its_reason(tmp_path):
    marker = tmp_path / "ran"
    script = write_script(tmp_path, "train.py", f"open({str(marker)!r}, 'w').close()\n")
    check = site_check(tmp_path, 'echo "checking scratch"\necho "no /scratch on this node"\nexit 3\n')
    proc = run_dlaunch(["--nproc-per-node", 2, "--health-check", check, "--log-dir", tmp_path / "logs", script])
    assert proc.returncode == NOT_READY, describe(proc)
    assert not marker.exists(), "no worker may start on a node that failed the gate"
    why = f"site check `{check}`: exit code 3: no /scratch on this node"
    assert f"failed the health check before attempt 0: {why}; no worker started (--no-health-check turns the " \
           "gate off)" in proc.stderr, describe(proc)
    assert f"root cause: attempt 0: " in proc.stderr and f"failed the health check ({why})" in proc.stderr
    run_dir = the_run_dir(tmp_path / "logs")
    failure = json.loads((run_dir / "failure.json").read_text())
    assert failure["exit_code"] == NOT_READY and why in failure["end_cause"], failure
    record = json.loads((run_dir / "run.json").read_text())
    assert record["outcome"] == "not ready" and record["exit_code"] == NOT_READY, record
    assert why in record["end_cause"], record


def test_the_gate_runs_again_before_a_restart_with_the_attempt_and_log_dir(tmp_path):
    # Attempt 0's rank 1 fails and leaves a mark; the site check fails once it sees it: the restart does not
    # start on the node, and the run ends with the gate's reason, attempt 0's failure kept in the summary.
    mark = tmp_path / "gpu-reset-needed"
    seen = tmp_path / "seen"
    check = site_check(tmp_path, f'echo "$DLAUNCH_ATTEMPT $DLAUNCH_LOG_DIR" >> {seen}\n'
                                 f'if [ -e {mark} ]; then echo "GPU 1 needs a reset"; exit 1; fi\n')
    script = write_script(tmp_path, "train.py", f"""
        import os, sys
        if os.environ["RANK"] == "1":
            open({str(mark)!r}, "w").close()
            sys.exit(5)
    """)
    proc = run_dlaunch(["--nproc-per-node", 2, "--max-restarts", 2, "--restart-backoff", 0, "--health-check", check,
                        "--log-dir", tmp_path / "logs", script])
    assert proc.returncode == NOT_READY, describe(proc)
    run_dir = the_run_dir(tmp_path / "logs")
    lines = seen.read_text().splitlines()
    assert lines == [f"0 {run_dir}", f"1 {run_dir}"], lines
    assert "failed the health check before attempt 1: " in proc.stderr, describe(proc)
    assert "root cause: attempt 1: " in proc.stderr and "GPU 1 needs a reset" in proc.stderr
    assert "attempt 0: rank 1" in proc.stderr and "exit code 5" in proc.stderr, describe(proc)
    record = json.loads((run_dir / "run.json").read_text())
    assert [a["attempt"] for a in record["attempts"]] == [0], "attempt 1 never started"


def test_a_passing_site_check_lets_the_run_go_on_and_no_health_check_leaves_it_alone(tmp_path):
    script = write_script(tmp_path, "ok.py", "print('fine')\n")
    check = site_check(tmp_path, "exit 0\n")
    proc = run_dlaunch(["--nproc-per-node", 2, "--health-check", check, script])
    assert proc.returncode == 0, describe(proc)
    assert sorted(proc.stdout.splitlines()) == ["[0]:fine", "[1]:fine"]
    proc = run_dlaunch(["--nproc-per-node", 2, "--no-health-check", script])
    assert proc.returncode == 0, describe(proc)
    assert "health" not in proc.stderr, describe(proc)


def test_a_site_check_is_judged_by_its_exit_and_runs_with_default_signals(tmp_path):
    # A background child keeping the output open after the check exited: the check has ended (it passed).
    script = write_script(tmp_path, "ok.py", "print('fine')\n")
    check = site_check(tmp_path, "sleep 30 &\necho ok\nexit 0\n")
    proc = run_dlaunch(["--nproc-per-node", 1, "--health-check", check, script], timeout=20)
    assert proc.returncode == 0, describe(proc)
    # The agent blocks its stop signals; the check must not inherit that (its own `timeout` would not work).
    # /bin/sh -c reports its script's death by signal N as exit code 128+N.
    for body, said in [("kill -TERM $$\nexit 0\n", "exit code 143"), ("kill -9 $$\n", "exit code 137: Killed")]:
        check = site_check(tmp_path, body)
        proc = run_dlaunch(["--nproc-per-node", 1, "--health-check", check, script])
        assert proc.returncode == NOT_READY, describe(proc)
        assert f"site check `{check}`: {said}" in proc.stderr, describe(proc)


def test_an_empty_health_check_is_refused_and_help_tells_both_options(tmp_path):
    script = write_script(tmp_path, "ok.py", "print('fine')\n")
    proc = run_dlaunch(["--nproc-per-node", 1, "--health-check", " ", script])
    assert proc.returncode == USAGE, describe(proc)
    assert "--health-check: the command is empty" in proc.stderr
    assert "give a shell command" in proc.stderr
    help_text = run_dlaunch(["--help"]).stdout
    assert "--no-health-check" in help_text and "--health-check CMD" in help_text, help_text
    assert "78" in help_text
