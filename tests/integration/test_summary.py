"""The failure summary: printed once on dlaunch's stderr and written as failure.json, naming the root
cause rank with its exit code, host, log path, last stderr lines and the Python traceback that
torch.distributed.elastic's @record wrote to TORCHELASTIC_ERROR_FILE."""

import json
import re
import socket

from conftest import describe, run_dlaunch, the_run_dir, write_script

FAILING = """
import os, sys, time
from torch.distributed.elastic.multiprocessing.errors import record

def compute(rank):
    raise ValueError(f"bad shard on rank {rank}")

@record
def main():
    rank = int(os.environ["RANK"])
    print(f"rank {rank} starting", file=sys.stderr)
    if rank == 2:
        compute(rank)
    time.sleep(60)  # the others are stopped by dlaunch

if __name__ == "__main__":
    main()
"""


def test_failure_summary_names_the_root_cause(tmp_path, torch_python):
    script = write_script(tmp_path, "failing.py", FAILING)
    logs = tmp_path / "logs"
    proc = run_dlaunch(["--nproc-per-node", 4, "--rdzv-id", "sumtest", "--log-dir", logs, script], timeout=90)
    assert proc.returncode == 1, describe(proc)
    err = proc.stderr
    run_dir = the_run_dir(logs)
    stderr_log = run_dir / "attempt_0" / "2" / "stderr.log"

    # Printed once.
    assert err.count("==================== run sumtest failed ====================") == 1, err
    assert err.count("root cause:") == 1, err
    summary = err[err.index("==================== run sumtest failed"):]
    root = re.search(r"^root cause: (.*)$", summary, re.M).group(1)
    assert root.startswith("rank 2 (local rank 2, node 0, host ")
    assert f"host {socket.gethostname()}," in root
    assert "exit code 1" in summary
    assert str(stderr_log) in summary
    # The last stderr lines of rank 2, its error message and the traceback from the error file.
    assert re.search(r"^\s+\| ValueError: bad shard on rank 2$", summary, re.M), summary
    assert "rank 2 starting" in summary
    assert "traceback (from TORCHELASTIC_ERROR_FILE)" in summary
    tb = summary[summary.index("traceback (from TORCHELASTIC_ERROR_FILE)"):]
    assert "in compute" in tb and 'raise ValueError(f"bad shard on rank {rank}")' in tb, tb
    assert "exit code: 1" in summary
    assert f"failure summary (JSON): {run_dir}/failure.json" in err

    # The rank's own log has the full traceback too.
    assert "ValueError: bad shard on rank 2" in stderr_log.read_text()

    failure = json.loads((run_dir / "failure.json").read_text())
    assert failure["run_id"] == "sumtest"
    assert failure["exit_code"] == 1
    root = failure["root_cause"]
    assert root["rank"] == 2 and root["local_rank"] == 2 and root["attempt"] == 0
    assert root["exit_code"] == 1 and root["signal"] is None
    assert root["host"] == socket.gethostname()
    assert root["stderr_log"] == str(stderr_log)
    assert any("ValueError: bad shard on rank 2" in line for line in root["stderr_tail"])
    assert "bad shard on rank 2" in (root["error_message"] or "")
    assert "in compute" in (root["traceback"] or "")
    ranks = sorted(f["rank"] for f in failure["failures"])
    assert ranks == [0, 1, 2, 3], failure["failures"]
    for f in failure["failures"]:
        assert f["root_cause"] == (f["rank"] == 2)
        assert f["stopped_by_dlaunch"] == (f["rank"] != 2)


def test_summary_for_a_signal_death_without_error_file(tmp_path):
    script = write_script(tmp_path, "abort.py", """
        import os, sys
        print("about to abort", file=sys.stderr)
        os.abort()
    """)
    logs = tmp_path / "logs"
    proc = run_dlaunch(["--nproc-per-node", 1, "--log-dir", logs, script])
    assert proc.returncode == 134, describe(proc)
    assert "signal SIGABRT (6)" in proc.stderr
    assert "about to abort" in proc.stderr[proc.stderr.index("root cause:"):]
    assert "traceback (from TORCHELASTIC_ERROR_FILE)" not in proc.stderr
    root = json.loads((the_run_dir(logs) / "failure.json").read_text())["root_cause"]
    assert root["signal"] == 6 and root["exit_code"] is None and root["traceback"] is None


def test_no_summary_on_success(tmp_path):
    script = write_script(tmp_path, "ok.py", "print('ok')\n")
    logs = tmp_path / "logs"
    proc = run_dlaunch(["--nproc-per-node", 2, "--log-dir", logs, script])
    assert proc.returncode == 0, describe(proc)
    assert "root cause" not in proc.stderr
    assert not (the_run_dir(logs) / "failure.json").exists()


def test_summary_shows_a_plain_text_error_file(tmp_path):
    # Workers without @record may still write TORCHELASTIC_ERROR_FILE themselves, in any format.
    script = write_script(tmp_path, "own_error_file.py", """
        import os, sys
        with open(os.environ["TORCHELASTIC_ERROR_FILE"], "w") as f:
            f.write("checkpoint shard 7 is corrupt\\n")
        sys.exit(42)
    """)
    logs = tmp_path / "logs"
    proc = run_dlaunch(["--nproc-per-node", 1, "--log-dir", logs, script])
    assert proc.returncode == 42, describe(proc)
    assert re.search(r"error file message:\n\s+\| checkpoint shard 7 is corrupt\n", proc.stderr), proc.stderr
    root = json.loads((the_run_dir(logs) / "failure.json").read_text())["root_cause"]
    assert "checkpoint shard 7 is corrupt" in root["error_message"]


def test_ranks_that_fail_together_are_each_reported_as_failures(tmp_path):
    # Rank 0 stops dlaunch (SIGSTOP), both ranks then fail on their own, and a helper lets dlaunch go on:
    # whichever exit it sees first is the root cause; the other had failed before the stop began and is
    # reported with its own code and stderr, not as an effect of the stop.
    script = write_script(tmp_path, "together.py", """
        import os, signal, subprocess, sys, time
        rank = os.environ["RANK"]
        go = os.path.join(sys.argv[1], "go")
        if rank == "0":
            agent = os.getppid()
            while not os.path.exists(os.path.join(sys.argv[1], "pid1")):
                time.sleep(0.01)
            pid1 = open(os.path.join(sys.argv[1], "pid1")).read()
            os.kill(agent, signal.SIGSTOP)
            # The agent goes on once both ranks have exited (zombies, not yet reaped).
            pids = f"{pid1} {os.getpid()}"
            subprocess.Popen(["sh", "-c", f"for p in {pids}; do until grep -q ') Z ' /proc/$p/stat; do sleep 0.01; "
                              f"done; done; kill -CONT {agent}"], start_new_session=True)
            open(go, "w").close()
            print("rank 0 breaks", file=sys.stderr)
            sys.exit(3)
        with open(os.path.join(sys.argv[1], "pid1.tmp"), "w") as f:
            f.write(str(os.getpid()))
        os.replace(os.path.join(sys.argv[1], "pid1.tmp"), os.path.join(sys.argv[1], "pid1"))
        while not os.path.exists(go):
            time.sleep(0.01)
        print("rank 1 breaks too", file=sys.stderr)
        sys.exit(5)
    """)
    proc = run_dlaunch(["--nproc-per-node", 2, "--log-dir", tmp_path / "logs", script, tmp_path])
    assert proc.returncode in (3, 5), describe(proc)
    failure = json.loads((the_run_dir(tmp_path / "logs") / "failure.json").read_text())
    by_rank = {f["rank"]: f for f in failure["failures"]}
    assert sorted(by_rank) == [0, 1], failure
    assert by_rank[0]["exit_code"] == 3 and by_rank[1]["exit_code"] == 5, failure
    assert not any(f["stopped_by_dlaunch"] for f in failure["failures"]), failure
    assert "while dlaunch was stopping the group" not in proc.stderr, describe(proc)
    assert "[failed on its own, after the root cause]" in proc.stderr, describe(proc)
    other = proc.stderr[proc.stderr.index("other failures:"):]
    assert re.search(r"\| rank [01] breaks", other), describe(proc)  # its own stderr, as the root cause's


def test_failure_json_names_the_workers_role(tmp_path):
    script = write_script(tmp_path, "fail.py", "import sys\nsys.exit(3)\n")
    for args, role in (([], "default"), (["--role", "trainer"], "trainer")):
        logs = tmp_path / f"logs-{role}"
        proc = run_dlaunch(["--nproc-per-node", 1, *args, "--log-dir", logs, script])
        assert proc.returncode == 3, describe(proc)
        failure = json.loads((the_run_dir(logs) / "failure.json").read_text())
        assert failure["root_cause"]["role"] == role and failure["root_cause"]["ps_role"] == "", failure
        assert "root cause: rank 0 " in proc.stderr, describe(proc)
