"""Agents in torchrun's c10d form started by hand on this machine, for the tests that need several "nodes"
(test_c10d.py, test_hostile_network.py)."""
import subprocess
import time

import pytest

from conftest import base_env, dlaunch_bin


def c10d(port, nnodes, *extra):
    return [dlaunch_bin(), "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "job7",
            "--nnodes", nnodes, *extra]


SECRET = "s3cret-of-this-test-run"

# A worker for restarts: rank 3 fails in attempt 0, the others wait to be stopped; in attempt 1 all finish.
CRASH_ONCE = """import os, sys, time
rank, attempt = os.environ["RANK"], os.environ["TORCHELASTIC_RESTART_COUNT"]
if attempt == "0" and rank == "3":
    sys.exit(3)
if attempt == "0":
    time.sleep(60)  # as in a collective with the rank that failed: the group stops it
print(f"rank {rank} of {os.environ['WORLD_SIZE']} done in attempt {attempt}", flush=True)
"""


class Agent:
    """One dlaunch, its output in files (a pipe nobody reads could block it)."""

    def __init__(self, args, directory, name, secret=SECRET, env=None):
        env = base_env({**(env or {}), **({"DLAUNCH_RDZV_SECRET": secret} if secret else {})})
        self.out, self.err = directory / f"{name}.out", directory / f"{name}.err"
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen([str(a) for a in args], env=env, stdout=out, stderr=err, text=True)

    def wait_for(self, text, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if text in self.err.read_text():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        pytest.fail(f"no '{text}' within {timeout} s:\n{self.err.read_text()}")


def finish(*agents, timeout=120):
    """(exit code, stdout, stderr) of each; every one is killed if it outlives the bound."""
    try:
        for a in agents:
            a.proc.wait(timeout=timeout)
    finally:
        for a in agents:
            a.proc.kill()
            a.proc.wait()
    return [(a.proc.returncode, a.out.read_text(), a.err.read_text()) for a in agents]


def host_then(args, tmp_path, secret=SECRET):
    """The first agent, once it serves the rendezvous (so that the next one started joins it)."""
    host = Agent(args, tmp_path, "host", secret)
    host.wait_for("hosting the node rendezvous")
    return host
