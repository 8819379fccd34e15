"""Free master ports: dlaunch runs started at the same moment on one host never share a MASTER_PORT."""

import os
import re
import subprocess
import time

from conftest import DEFAULT_TIMEOUT, USAGE, base_env, describe, dlaunch_bin, free_port, run_dlaunch, write_script

RUNS = 6


def test_concurrent_runs_get_distinct_master_ports(tmp_path):
    # Each worker stays up a while so that all runs (and their port reservations) overlap in time.
    script = write_script(tmp_path, "port.py", """
        import os, time
        print("PORT=" + os.environ["MASTER_PORT"])
        time.sleep(1.0)
    """)
    env = base_env()
    procs = []
    try:
        for _ in range(RUNS):
            procs.append(subprocess.Popen([dlaunch_bin(), "--nproc-per-node", "1", str(script)], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        ports = []
        deadline = time.monotonic() + DEFAULT_TIMEOUT
        for p in procs:
            out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
            assert p.returncode == 0, f"exit {p.returncode}\n{out}\n{err}"
            m = re.fullmatch(r"\[0\]:PORT=(\d+)\n", out)
            assert m, out
            ports.append(int(m.group(1)))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    assert len(set(ports)) == RUNS, f"runs shared a MASTER_PORT: {sorted(ports)}"
    assert all(1024 <= p <= 65535 for p in ports), ports


def test_given_master_port_is_used_as_is(tmp_path):
    script = write_script(tmp_path, "port.py", 'import os; print("PORT=" + os.environ["MASTER_PORT"])\n')
    port = free_port()
    proc = run_dlaunch(["--nproc-per-node", 2, "--master-port", port, script])
    assert proc.returncode == 0, describe(proc)
    assert sorted(proc.stdout.splitlines()) == [f"[0]:PORT={port}", f"[1]:PORT={port}"]


def test_a_plan_or_a_late_usage_error_leaves_no_port_lock_behind(tmp_path):
    # The free master port is reserved before planning (a lock file in $TMPDIR/dlaunch-ports-<euid>):
    # whatever ends the program afterwards removes it, and the agent's private directory (its FIFOs) too.
    env = {"TMPDIR": str(tmp_path)}
    plan = run_dlaunch(["plan", "--nproc-per-node", 2, "--no-python", "true"], env=env)
    assert plan.returncode == 0, describe(plan)
    late_error = run_dlaunch(["--nproc-per-node", 1, "--devices", "7", "--no-python", "true"], env=env)
    assert late_error.returncode == USAGE, describe(late_error)
    ran = run_dlaunch(["--nproc-per-node", 1, "--no-python", "true"], env=env)
    assert ran.returncode == 0, describe(ran)
    ports = tmp_path / f"dlaunch-ports-{os.geteuid()}"
    assert ports.is_dir(), "the runs reserved their port there"
    assert list(ports.iterdir()) == []
    assert list(tmp_path.glob("dlaunch-private-*")) == []
