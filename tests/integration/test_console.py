"""The console: every worker line prefixed with its rank and never torn; --redirects, --tee and
--local-ranks-filter choose what reaches the console while the log files always get everything."""

import json
import re
import subprocess

from conftest import base_env, describe, dlaunch_bin, run_dlaunch, the_run_dir, write_script

LINES = 2000
WIDTH = 500

# Each rank writes LINES lines of WIDTH copies of its own letter, in pieces (print() makes two writes
# under -u; the explicit halves make more), to stdout and stderr.
FLOOD = f"""
import os, sys
rank = int(os.environ["RANK"])
line = chr(ord("A") + rank) * {WIDTH}
half = {WIDTH} // 2
for i in range({LINES}):
    if i % 2:
        print(line)
    else:
        sys.stdout.write(line[:half]); sys.stdout.write(line[half:] + "\\n")
    if i % 10 == 0:
        sys.stderr.write(line + "\\n")
"""


def check_flood(text, nranks, per_rank):
    counts = dict.fromkeys(range(nranks), 0)
    pattern = re.compile(r"\[(\d)\]:([A-Z])\2{%d}" % (WIDTH - 1))
    for n, line in enumerate(text.split("\n")[:-1]):
        m = pattern.fullmatch(line)
        assert m, f"console line {n} is torn or mixed: {line[:80]!r}...({len(line)} chars)"
        rank = int(m.group(1))
        assert m.group(2) == chr(ord("A") + rank), f"line {n} of rank {rank} carries another rank's text"
        counts[rank] += 1
    assert text.endswith("\n")
    assert counts == dict.fromkeys(range(nranks), per_rank)


def test_concurrent_long_lines_are_never_torn(tmp_path):
    script = write_script(tmp_path, "flood.py", FLOOD)
    proc = run_dlaunch(["--nproc-per-node", 4, script], timeout=90)
    assert proc.returncode == 0, proc.stderr[-2000:]
    check_flood(proc.stdout, 4, LINES)
    check_flood(proc.stderr, 4, LINES // 10)


QUIET_CHATTY = """
import os, sys
rank = os.environ["RANK"]
print(f"out{rank}")
print(f"err{rank}", file=sys.stderr)
"""


def worker_lines(text):
    return sorted(line for line in text.splitlines() if re.match(r"\[\d+\]:", line))


def log_of(logs, rank, stream):
    return (the_run_dir(logs) / "attempt_0" / str(rank) / f"{stream}.log").read_text()


def assert_files_have_everything(logs, nranks):
    for rank in range(nranks):
        assert log_of(logs, rank, "stdout") == f"out{rank}\n"
        assert log_of(logs, rank, "stderr") == f"err{rank}\n"


def run_chatty(tmp_path, *options, nranks=2):
    script = write_script(tmp_path, "chatty.py", QUIET_CHATTY)
    logs = tmp_path / "logs"
    proc = run_dlaunch(["--nproc-per-node", nranks, "--log-dir", logs, *options, script])
    assert proc.returncode == 0, describe(proc)
    return proc, logs


def test_default_console_has_both_streams_prefixed(tmp_path):
    proc, logs = run_chatty(tmp_path)
    assert worker_lines(proc.stdout) == ["[0]:out0", "[1]:out1"]
    assert worker_lines(proc.stderr) == ["[0]:err0", "[1]:err1"]
    assert_files_have_everything(logs, 2)


def test_redirects_3_keeps_workers_off_the_console(tmp_path):
    proc, logs = run_chatty(tmp_path, "--redirects", "3")
    assert worker_lines(proc.stdout) == [] and proc.stdout == ""
    assert worker_lines(proc.stderr) == []
    assert_files_have_everything(logs, 2)


def test_redirects_1_moves_only_stdout(tmp_path):
    proc, logs = run_chatty(tmp_path, "--redirects", "1")
    assert worker_lines(proc.stdout) == []
    assert worker_lines(proc.stderr) == ["[0]:err0", "[1]:err1"]
    assert_files_have_everything(logs, 2)


def test_redirects_per_local_rank(tmp_path):
    proc, logs = run_chatty(tmp_path, "--redirects", "1:3")
    assert worker_lines(proc.stdout) == ["[0]:out0"]
    assert worker_lines(proc.stderr) == ["[0]:err0"]
    assert_files_have_everything(logs, 2)


def test_tee_brings_a_redirected_stream_back(tmp_path):
    # torchrun: --redirects 3 --tee 1 writes both streams to files and stdout to the console as well.
    proc, logs = run_chatty(tmp_path, "--redirects", "3", "--tee", "1")
    assert worker_lines(proc.stdout) == ["[0]:out0", "[1]:out1"]
    assert worker_lines(proc.stderr) == []
    assert_files_have_everything(logs, 2)


def test_tee_alone_shows_everything(tmp_path):
    proc, logs = run_chatty(tmp_path, "--tee", "3")
    assert worker_lines(proc.stdout) == ["[0]:out0", "[1]:out1"]
    assert worker_lines(proc.stderr) == ["[0]:err0", "[1]:err1"]
    assert_files_have_everything(logs, 2)


def test_local_ranks_filter(tmp_path):
    proc, logs = run_chatty(tmp_path, "--local-ranks-filter", "0", nranks=3)
    assert worker_lines(proc.stdout) == ["[0]:out0"]
    assert worker_lines(proc.stderr) == ["[0]:err0"]
    assert_files_have_everything(logs, 3)


def test_local_ranks_filter_ranges(tmp_path):
    proc, logs = run_chatty(tmp_path, "--local_ranks_filter", "0,2-3", nranks=4)
    assert worker_lines(proc.stdout) == ["[0]:out0", "[2]:out2", "[3]:out3"]
    assert_files_have_everything(logs, 4)


def run_without_log_dir(tmp_path, *options):
    """QUIET_CHATTY without --log-dir, $TMPDIR in tmp_path: the run and the one run directory kept there."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = write_script(tmp_path, "chatty.py", QUIET_CHATTY)
    proc = run_dlaunch([*options, script], env={"TMPDIR": str(tmp)})
    assert proc.returncode == 0, describe(proc)
    kept = list(tmp.glob("dlaunch_none_*"))
    assert len(kept) == 1, (kept, describe(proc))
    return proc, kept[0]


def test_redirected_output_kept_in_temporary_directory(tmp_path):
    # Without --log-dir, output that is only in files must survive a successful run, and dlaunch says where.
    proc, kept = run_without_log_dir(tmp_path, "--nproc-per-node", 2, "--redirects", "3")
    assert f"logs: worker output not shown on the console is kept in {kept}" in proc.stderr, proc.stderr
    assert (kept / "attempt_0" / "1" / "stdout.log").read_text() == "out1\n"


def test_teed_output_is_not_said_to_be_hidden(tmp_path):
    proc, kept = run_without_log_dir(tmp_path, "--nproc-per-node", 1, "-t", "3")
    assert f"logs: worker output is shown on the console and kept in {kept}" in proc.stderr, proc.stderr
    assert "not shown" not in proc.stderr


def test_closed_console_does_not_stop_the_run(tmp_path):
    # `dlaunch ... | head -1`: once the reader is gone, dlaunch keeps supervising and logging and
    # exits with the workers' code.
    script = write_script(tmp_path, "many.py", """
        import os
        for i in range(5000):
            print("line", i)
    """)
    logs = tmp_path / "logs"
    proc = subprocess.Popen([dlaunch_bin(), "--nproc-per-node", "2", "--log-dir", str(logs), str(script)],
                            env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        first = proc.stdout.readline()
        proc.stdout.close()
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert re.fullmatch(rb"\[[01]\]:line 0\n", first), first
    assert code == 0
    for rank in range(2):
        assert log_of(logs, rank, "stdout").count("\n") == 5000


def test_a_long_line_stays_one_line_and_a_line_past_the_limit_is_cut_once_and_marked(tmp_path):
    # A JSON record of 200 KB on one line is one console line, in every run; a line past the agent's limit
    # (1 MiB) is its first 1 MiB, marked, and the next line is whole. The log file keeps every byte.
    script = write_script(tmp_path, "long.py", """
        import json, sys
        sys.stdout.write(json.dumps({"x": "a" * 200000}) + "\\n" + "b" * (1024 * 1024 + 5000) + "\\nshort\\n")
    """)
    for _ in range(2):
        proc = run_dlaunch(["--nproc-per-node", 1, "--log-dir", tmp_path / "logs", script])
        assert proc.returncode == 0, describe(proc)
        lines = proc.stdout.split("\n")[:-1]
        assert len(lines) == 3, [len(line) for line in lines]
        assert json.loads(lines[0][len("[0]:"):]) == {"x": "a" * 200000}
        assert lines[1] == "[0]:" + "b" * (1024 * 1024) + " [dlaunch: line cut at 1 MiB; the rest is not shown]"
        assert lines[2] == "[0]:short"
    logged = sorted((tmp_path / "logs").glob("*/attempt_0/0/stdout.log"))
    assert logged and logged[0].read_text().count("b") == 1024 * 1024 + 5000


def test_torchruns_prefix_template_makes_the_prefix(tmp_path):
    """TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE (torchrun 2.3+): ${role_name}, ${rank}, ${local_rank} as
    Python's string.Template.safe_substitute puts them in; the rest of the template stays as written."""
    proc = run_dlaunch(["--nproc-per-node", 2, "--role", "trainer", "--no-python", "/bin/echo", "hello"],
                       env={"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "<${role_name}:$rank/${local_rank} $other> "})
    assert proc.returncode == 0, describe(proc)
    assert sorted(proc.stdout.splitlines()) == ["<trainer:0/0 $other> hello", "<trainer:1/1 $other> hello"], \
        describe(proc)
