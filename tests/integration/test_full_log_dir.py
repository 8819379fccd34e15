"""A log directory that fills during a run (issue 35, finding 9): on a 1 MiB tmpfs the cut worker logs are
said (rank and file), the console keeps every line, a run whose workers succeeded ends 74 (unless
--ignore-log-errors), and run.json / failure.json are complete JSON or absent, never empty.

Needs root (CI runs as root) to mount the tmpfs; without it the tests say SKIP. The health gate would refuse
so small a log directory before the start (its room check): the runs give --no-health-check, as the disk here
fills mid-run.
"""
import json
import os
import re

import pytest

from conftest import LOG_FAILED, describe, run_dlaunch, tmpfs, write_script


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 1 MiB tmpfs, unmounted after the test."""
    with tmpfs(tmp_path / "small", "1m") as mnt:
        yield mnt


# Prints ~1.5 MiB on stdout (the console gets every line) while the log directory's file system is full;
# `free` = 1: frees the space before it exits, so that run.json fits.
FILL = """
import os, sys
logs, free, code = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
filler = os.path.join(logs, "filler")
try:
    with open(filler, "wb") as f:
        while True:
            f.write(b"x" * 4096)
            f.flush()
except OSError:
    pass
for i in range(20000):
    print(f"line {i:05d} " + "y" * 64)
sys.stdout.flush()
if free:
    os.unlink(filler)
sys.exit(code)
"""


def test_a_log_directory_that_fills_is_said_and_the_run_ends_74(tmp_path, small_tmpfs):
    """Finding 9: the cut log is said (rank and file), the console keeps every line, the run ends 74, and
    run.json is complete JSON."""
    script = write_script(tmp_path, "fill.py", FILL)
    logs = small_tmpfs / "logs"
    proc = run_dlaunch(["--nproc-per-node", 1, "--no-health-check", "--log-dir", logs, "--tee", 3, script, small_tmpfs, 1, 0], timeout=120)
    assert proc.returncode == LOG_FAILED, describe(proc)
    assert re.search(r"dlaunch: logs: rank 0: \S+/attempt_0/0/stdout\.log: No space left on device; this log is cut",
                     proc.stderr), describe(proc)
    assert sum(1 for line in proc.stdout.splitlines() if line.startswith("[0]:line ")) == 20000, "console kept all"
    run_json = next(logs.glob("*/run.json"))
    record = json.loads(run_json.read_text())
    assert record["exit_code"] == LOG_FAILED and record["log_errors"], record
    ignored = run_dlaunch(["--nproc-per-node", 1, "--no-health-check", "--log-dir", logs, "--tee", 3, "--ignore-log-errors", script,
                           small_tmpfs, 1, 0], timeout=120)
    assert ignored.returncode == 0 and "this log is cut" in ignored.stderr, describe(ignored)


def test_a_full_log_directory_leaves_no_empty_record_and_no_pointer_to_a_missing_summary(tmp_path, small_tmpfs):
    """Finding 9: the disk stays full to the end: run.json and failure.json are complete or absent, and the
    summary does not name a failure.json that is not there."""
    script = write_script(tmp_path, "fill.py", FILL)
    logs = small_tmpfs / "logs"
    proc = run_dlaunch(["--nproc-per-node", 1, "--no-health-check", "--log-dir", logs, "--tee", 3, script, small_tmpfs, 0, 3], timeout=120)
    assert proc.returncode == 3, describe(proc)
    for record in list(logs.glob("*/run.json")) + list(logs.glob("*/failure.json")):
        json.loads(record.read_text())  # complete, or it would not be there
    for named in re.findall(r"failure summary \(JSON\): (/\S+)", proc.stderr):
        assert os.path.exists(named), f"the summary names {named}, which is not there:\n{proc.stderr}"
        json.loads(open(named).read())
