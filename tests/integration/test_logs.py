"""Per-attempt, per-rank log files: LOG_DIR/<run_id>_XXXXXX/attempt_<n>/<local_rank>/{stdout,stderr}.log
hold exactly that rank's raw output; runs and attempts never overwrite each other; temporary run
directories are removed after success."""

import fcntl
import os
import re
import subprocess

from conftest import WAIT_FOR_FILE, describe, run_dlaunch, the_run_dir, write_script

CHATTY = WAIT_FOR_FILE + """
rank = os.environ["RANK"]
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
for i in range(3):
    print(f"out rank {rank} attempt {attempt} line {i}")
    print(f"err rank {rank} attempt {attempt} line {i}", file=sys.stderr)
if len(sys.argv) > 1:  # fail-first mode: rank 1 fails in attempt 0, once rank 0 has written its lines
    done = os.path.join(sys.argv[1], f"done.{attempt}.{rank}")
    open(done, "w").close()
    if attempt == "0" and rank == "1":
        wait_for_file(os.path.join(sys.argv[1], "done.0.0"))
        sys.exit(1)
"""


def expected_log(stream, rank, attempt):
    return "".join(f"{stream} rank {rank} attempt {attempt} line {i}\n" for i in range(3))


def test_log_files_hold_each_ranks_raw_output(tmp_path):
    script = write_script(tmp_path, "chatty.py", CHATTY)
    logs = tmp_path / "logs"
    proc = run_dlaunch(["--nproc-per-node", 3, "--rdzv-id", "myjob", "--log-dir", logs, script])
    assert proc.returncode == 0, describe(proc)
    run_dir = the_run_dir(logs)
    assert re.fullmatch(r"myjob_[A-Za-z0-9]{6}", run_dir.name), run_dir.name
    assert sorted(p.name for p in run_dir.iterdir()) == ["attempt_0", "run.json"]
    for rank in range(3):
        d = run_dir / "attempt_0" / str(rank)
        assert (d / "stdout.log").read_text() == expected_log("out", rank, 0)
        assert (d / "stderr.log").read_text() == expected_log("err", rank, 0)
    # The console got the same lines, prefixed.
    for rank in range(3):
        assert f"[{rank}]:out rank {rank} attempt 0 line 2\n" in proc.stdout
        assert f"[{rank}]:err rank {rank} attempt 0 line 2\n" in proc.stderr


def test_each_attempt_has_its_own_directory(tmp_path):
    script = write_script(tmp_path, "chatty.py", CHATTY)
    logs = tmp_path / "logs"
    proc = run_dlaunch(["--nproc-per-node", 2, "--max-restarts", 1, "--log-dir", logs, script, tmp_path])
    assert proc.returncode == 0, describe(proc)
    run_dir = the_run_dir(logs)
    attempts = sorted(p.name for p in run_dir.iterdir() if p.is_dir())
    assert attempts == ["attempt_0", "attempt_1"]
    for attempt in (0, 1):
        for rank in range(2):
            d = run_dir / f"attempt_{attempt}" / str(rank)
            assert (d / "stdout.log").read_text() == expected_log("out", rank, attempt)
            assert (d / "stderr.log").read_text() == expected_log("err", rank, attempt)


def test_same_log_dir_twice_does_not_overwrite(tmp_path):
    logs = tmp_path / "logs"
    first = write_script(tmp_path, "first.py", "print('first run')\n")
    second = write_script(tmp_path, "second.py", "print('second run')\n")
    for script in (first, second):
        proc = run_dlaunch(["--nproc-per-node", 1, "--log-dir", logs, script])
        assert proc.returncode == 0, describe(proc)
    run_dirs = sorted(p for p in logs.iterdir() if p.is_dir())
    assert len(run_dirs) == 2 and all(p.name.startswith("none_") for p in run_dirs), run_dirs
    contents = sorted((d / "attempt_0" / "0" / "stdout.log").read_text() for d in run_dirs)
    assert contents == ["first run\n", "second run\n"]


def test_temporary_run_directory_removed_after_success(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = write_script(tmp_path, "where.py", 'import os; print(os.environ["TORCHELASTIC_ERROR_FILE"])\n')
    proc = run_dlaunch(["--nproc-per-node", 2, script], env={"TMPDIR": str(tmp)})
    assert proc.returncode == 0, describe(proc)
    paths = [line.split(":", 1)[1] for line in proc.stdout.splitlines()]
    assert len(paths) == 2 and all(p.startswith(str(tmp) + "/dlaunch_none_") for p in paths), paths
    assert list(tmp.glob("dlaunch_*")) == [], "the temporary run directory was not removed"


def test_temporary_run_directory_kept_after_failure(tmp_path):
    # Without --log-dir all output is on the console: no per-rank files, but the failure summary (with the
    # stderr tail) and failure.json are kept.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = write_script(tmp_path, "fail.py", 'import sys; print("to the console", file=sys.stderr); sys.exit(2)\n')
    proc = run_dlaunch(["--nproc-per-node", 1, script], env={"TMPDIR": str(tmp)})
    assert proc.returncode == 2, describe(proc)
    kept = list(tmp.glob("dlaunch_none_*"))
    assert len(kept) == 1, kept
    assert not (kept[0] / "attempt_0" / "0" / "stderr.log").exists()
    assert "[0]:to the console" in proc.stderr
    assert "    | to the console" in proc.stderr  # the summary's stderr tail
    assert "  stderr:   on the console only (no log file)\n  last stderr lines:\n    | to the console\n" in proc.stderr
    assert (kept[0] / "failure.json").is_file()
    assert str(kept[0]) in proc.stderr


def test_temporary_run_directory_keeps_redirected_output(tmp_path):
    # Output that reaches no console (--redirects) is kept in files even without --log-dir.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = write_script(tmp_path, "quiet.py", 'import sys; print("only in the file", file=sys.stderr)\n')
    proc = run_dlaunch(["--nproc-per-node", 1, "--redirects", 2, script], env={"TMPDIR": str(tmp)})
    assert proc.returncode == 0, describe(proc)
    kept = list(tmp.glob("dlaunch_none_*"))
    assert len(kept) == 1, kept
    assert (kept[0] / "attempt_0" / "0" / "stderr.log").read_text() == "only in the file\n"
    assert "only in the file" not in proc.stderr


def test_binary_and_long_output_reach_the_file_unchanged(tmp_path):
    # Raw bytes, no prefix, no line splitting: a line longer than the console line limit (64 KiB) and
    # bytes that are not UTF-8.
    script = write_script(tmp_path, "raw.py", """
        import sys
        sys.stdout.buffer.write(b"\\xff\\xfe" + b"a" * 100000 + b"\\nend")
        sys.stdout.flush()
    """)
    logs = tmp_path / "logs"
    proc = run_dlaunch(["--nproc-per-node", 1, "--log-dir", logs, script])
    assert proc.returncode == 0, describe(proc)
    data = (the_run_dir(logs) / "attempt_0" / "0" / "stdout.log").read_bytes()
    assert data == b"\xff\xfe" + b"a" * 100000 + b"\nend"


def test_relative_log_dir_gives_absolute_paths(tmp_path):
    # Workers may chdir: the paths dlaunch hands them must not depend on the working directory.
    script = write_script(tmp_path, "where.py", """
        import os
        os.chdir("/")
        path = os.environ["TORCHELASTIC_ERROR_FILE"]
        print(path)
        print(os.path.isdir(os.path.dirname(path)))
    """)
    proc = run_dlaunch(["--nproc-per-node", 1, "--log-dir", "rel_logs", script], cwd=tmp_path)
    assert proc.returncode == 0, describe(proc)
    path, exists = [line.split(":", 1)[1] for line in proc.stdout.splitlines()]
    run_dir = the_run_dir(tmp_path / "rel_logs")
    assert path == f"{run_dir}/attempt_0/0/error.json"
    assert path.startswith("/") and exists == "True"


def test_clean_removes_what_ended_or_killed_runs_left_and_keeps_running_ones(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    failing = write_script(tmp_path, "fail.py", "import sys\nsys.exit(3)\n")
    assert run_dlaunch(["--nproc-per-node", 1, failing], env={"TMPDIR": str(tmp)}).returncode == 3
    ended = list(tmp.glob("dlaunch_none_*"))
    assert len(ended) == 1 and (ended[0] / "run.json").exists() and (ended[0] / "agent.pid").exists(), ended
    dead = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True).stdout.strip()
    os.mkfifo(tmp / f"dlaunch-watchdog-{dead}")
    (tmp / f"dlaunch-stacks-{dead}.txt").write_text("")
    (tmp / f"dlaunch-private-{dead}-Ab12Cd").mkdir(mode=0o700)  # a killed agent's private directory
    os.mkfifo(tmp / f"dlaunch-private-{dead}-Ab12Cd" / "heartbeat")
    running = tmp / "dlaunch_job_XXXXXX"
    running.mkdir()
    (running / "agent.pid").write_text(f"{os.getpid()}\n")
    mine = tmp / f"dlaunch-heartbeat-{os.getpid()}"
    mine.write_text("")
    # A master-port lock a killed agent left, and one an agent holds.
    ports = tmp / f"dlaunch-ports-{os.geteuid()}"
    ports.mkdir(mode=0o700, exist_ok=True)
    (ports / "40001").write_text("")
    held = open(ports / "40002", "w")
    fcntl.flock(held, fcntl.LOCK_EX)
    dry = run_dlaunch(["clean", "--dry-run"], env={"TMPDIR": str(tmp)})
    assert dry.returncode == 0 and "would remove 5 item(s)" in dry.stdout, describe(dry)
    assert f"would remove {ports / '40001'}\n" in dry.stdout, describe(dry)
    assert ended[0].exists()
    done = run_dlaunch(["clean"], env={"TMPDIR": str(tmp)})
    assert done.returncode == 0 and f"removed {ended[0]}" in done.stdout, describe(done)
    left = sorted(p.name for p in tmp.iterdir() if p.name not in (ports.name, f"dlaunch-topology-{os.getuid()}"))
    assert left == sorted([running.name, mine.name]), left
    assert sorted(p.name for p in ports.iterdir()) == ["40002"]
    held.close()
