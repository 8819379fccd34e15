"""Restarts: a failed worker group starts again while --max-restarts allows, with the restart count in
every rank's environment; once the budget is spent, dlaunch exits with the root cause's code."""

import json
import re
import signal
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import (USAGE, WAIT_FOR_FILE, Background, describe, run_dlaunch, the_run_dir, wait_for, wait_until_asleep,
                      write_script)


def test_crash_then_restart_succeeds(tmp_path):
    outdir = tmp_path / "out"
    outdir.mkdir()
    # Attempt 0: once rank 0 is up, rank 1 fails; rank 0 waits and is stopped by dlaunch. Attempt 1: all succeed.
    script = write_script(tmp_path, "flaky.py", prelude=WAIT_FOR_FILE, body="""
        import json
        attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
        rank = os.environ["RANK"]
        path = os.path.join(sys.argv[1], f"attempt{attempt}_rank{rank}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(dict(os.environ), f)
        os.replace(path + ".tmp", path)
        if attempt == "0":
            if rank == "1":
                wait_for_file(os.path.join(sys.argv[1], "attempt0_rank0.json"))
                sys.exit(1)
            time.sleep(30)
        print(f"attempt {attempt} ok")
    """)
    proc = run_dlaunch(["--nproc-per-node", 2, "--max-restarts", 2, "--grace", 5, "--log-dir", tmp_path / "logs",
                        script, outdir])
    assert proc.returncode == 0, describe(proc)
    names = sorted(p.name for p in outdir.iterdir())
    assert names == ["attempt0_rank0.json", "attempt0_rank1.json", "attempt1_rank0.json", "attempt1_rank1.json"]
    for rank in (0, 1):
        env = json.loads((outdir / f"attempt1_rank{rank}.json").read_text())
        assert env["TORCHELASTIC_RESTART_COUNT"] == "1"
        assert env["DLAUNCH_RESTART_COUNT"] == "1"
        assert env["TORCHELASTIC_MAX_RESTARTS"] == "2"
        assert env["RANK"] == str(rank)
        assert env["TORCHELASTIC_ERROR_FILE"].endswith(f"/attempt_1/{rank}/error.json")
        first = json.loads((outdir / f"attempt0_rank{rank}.json").read_text())
        # Same job: the same master port across attempts.
        assert first["MASTER_PORT"] == env["MASTER_PORT"]
    assert sorted(proc.stdout.splitlines()) == ["[0]:attempt 1 ok", "[1]:attempt 1 ok"]
    assert "restart: starting the group again (restart 1 of 2)" in proc.stderr


def test_successful_restart_is_not_reported_as_a_failed_run(tmp_path):
    # A run that ends well after a restart exits 0, so it must not print "run ... failed" with a root
    # cause, and (without --log-dir) must remove its temporary directory like any successful run.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = write_script(tmp_path, "flaky.py", """
        import os, sys, time
        if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
            if os.environ["RANK"] == "1":
                sys.exit(1)
            time.sleep(30)
        print("ok")
    """)
    proc = run_dlaunch(["--nproc-per-node", 2, "--max-restarts", 1, "--grace", 5, script], env={"TMPDIR": str(tmp)})
    assert proc.returncode == 0, describe(proc)
    assert "failed ====" not in proc.stderr, describe(proc)
    assert "root cause" not in proc.stderr, describe(proc)
    assert [p.name for p in tmp.glob("dlaunch_*")] == [], "the temporary run directory was kept"


def test_restart_budget_exhausted_exits_with_root_cause_code(tmp_path):
    outdir = tmp_path / "out"
    outdir.mkdir()
    script = write_script(tmp_path, "always_fails.py", prelude=WAIT_FOR_FILE, body="""
        attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
        rank = os.environ["RANK"]
        open(os.path.join(sys.argv[1], f"attempt{attempt}_rank{rank}"), "w").close()
        if rank == "1":
            wait_for_file(os.path.join(sys.argv[1], f"attempt{attempt}_rank0"))
            sys.exit(5)
        time.sleep(30)
    """)
    proc = run_dlaunch(["--nproc-per-node", 2, "--max-restarts", 1, "--grace", 5, "--log-dir", tmp_path / "logs",
                        script, outdir])
    assert proc.returncode == 5, describe(proc)
    names = sorted(p.name for p in outdir.iterdir())
    assert names == ["attempt0_rank0", "attempt0_rank1", "attempt1_rank0", "attempt1_rank1"], "two attempts ran"
    failure = json.loads(next((tmp_path / "logs").glob("*/failure.json")).read_text())
    assert failure["exit_code"] == 5
    assert failure["restarts"] == 1 and failure["max_restarts"] == 1
    assert failure["root_cause"]["rank"] == 1 and failure["root_cause"]["attempt"] == 1
    roots = [(f["attempt"], f["rank"]) for f in failure["failures"] if f["root_cause"]]
    assert roots == [(0, 1), (1, 1)]


def test_no_restart_by_default(tmp_path):
    outdir = tmp_path / "out"
    outdir.mkdir()
    script = write_script(tmp_path, "fails_once.py", """
        import os, sys
        open(os.path.join(sys.argv[1], "attempt" + os.environ["TORCHELASTIC_RESTART_COUNT"]), "w").close()
        sys.exit(4)
    """)
    proc = run_dlaunch(["--nproc-per-node", 1, "--log-dir", tmp_path / "logs", script, outdir])
    assert proc.returncode == 4, describe(proc)
    assert sorted(p.name for p in outdir.iterdir()) == ["attempt0"]


def test_stop_signal_while_stopping_after_a_failure_prevents_the_restart(tmp_path):
    outdir = tmp_path / "out"
    outdir.mkdir()
    # Rank 1 fails; rank 0 ignores SIGTERM so the group stays in its grace period; a SIGTERM to dlaunch
    # then means "stop": no restart although restarts remain, and exit 128+15.
    script = write_script(tmp_path, "stubborn.py", prelude=WAIT_FOR_FILE, body="""
        import signal
        attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
        rank = os.environ["RANK"]
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open(os.path.join(sys.argv[1], f"attempt{attempt}_rank{rank}"), "w").close()
        if rank == "1":
            wait_for_file(os.path.join(sys.argv[1], f"attempt{attempt}_rank0"))
            sys.exit(1)
        time.sleep(60)
    """)
    with Background(["--nproc-per-node", 2, "--max-restarts", 3, "--grace", 1.5, "--log-dir", tmp_path / "logs",
                     script, outdir], tmp_path) as bg:
        wait_for(lambda: "stopping the group" in bg.stderr(), what="dlaunch to see the failure")
        bg.send(signal.SIGTERM)
        assert bg.wait(timeout=20) == -signal.SIGTERM, bg.stderr()
    assert sorted(p.name for p in outdir.iterdir()) == ["attempt0_rank0", "attempt0_rank1"]
    assert "restart:" not in bg.stderr()


CRASH_LOOP = """
import os, sys, time
with open(os.path.join(sys.argv[1], "attempt" + os.environ["TORCHELASTIC_RESTART_COUNT"]), "w") as f:
    f.write(repr(time.time()))
sys.exit(4)
"""


def attempt_starts(outdir):
    return [float((outdir / f"attempt{n}").read_text()) for n in range(len(list(outdir.iterdir())))]


def test_a_crash_loop_backs_off_between_restarts(tmp_path):
    outdir = tmp_path / "out"
    outdir.mkdir()
    script = write_script(tmp_path, "loop.py", CRASH_LOOP)
    proc = run_dlaunch(["--nproc-per-node", 1, "--max-restarts", 3, "--restart-backoff", "0.4:0.8",
                        "--log-dir", tmp_path / "logs", script, outdir])
    assert proc.returncode == 4, describe(proc)
    for n, wait in ((1, "0.4"), (2, "0.8"), (3, "0.8")):
        assert f"restart: waiting {wait}s before restart {n} (--restart-backoff)" in proc.stderr, describe(proc)
    starts = attempt_starts(outdir)
    assert len(starts) == 4, starts
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert gaps[0] >= 0.4 and gaps[1] >= 0.8 and gaps[2] >= 0.8, gaps


def test_the_default_backoff_is_a_second_and_zero_turns_it_off(tmp_path):
    script = write_script(tmp_path, "loop.py", CRASH_LOOP)
    for args, said in (([], True), (["--restart-backoff", "0"], False)):
        outdir = tmp_path / f"out{len(args)}"
        outdir.mkdir()
        proc = run_dlaunch(["--nproc-per-node", 1, "--max-restarts", 1, *args, "--log-dir", tmp_path / "logs",
                            script, outdir])
        assert proc.returncode == 4, describe(proc)
        assert ("restart: waiting 1s before restart 1 (--restart-backoff)" in proc.stderr) == said, describe(proc)
        assert "restart: starting the group again (restart 1 of 1)" in proc.stderr, describe(proc)
        if said:
            starts = attempt_starts(outdir)
            assert starts[1] - starts[0] >= 1, starts


def test_a_stop_signal_while_waiting_to_restart_ends_the_run_at_once(tmp_path):
    outdir = tmp_path / "out"
    outdir.mkdir()
    script = write_script(tmp_path, "loop.py", CRASH_LOOP)
    with Background(["--nproc-per-node", 1, "--max-restarts", 2, "--restart-backoff", "60", "--log-dir",
                     tmp_path / "logs", script, outdir], tmp_path) as bg:
        wait_for(lambda: "waiting 60s before restart 1" in bg.stderr(), what="dlaunch to wait before restarting")
        bg.send(signal.SIGINT)
        assert bg.wait(timeout=10) == -signal.SIGINT, bg.stderr()
    assert "stop: received SIGINT; no worker runs (the run was waiting to restart): it ends now" in bg.stderr()
    assert sorted(p.name for p in outdir.iterdir()) == ["attempt0"], "no attempt after the stop"
    record = json.loads((the_run_dir(tmp_path / "logs") / "run.json").read_text())
    assert record["restarts"] == 0 and [a["attempt"] for a in record["attempts"]] == [0], \
        "the restart the stop cut short never began"


def test_a_stop_says_so_when_a_rank_in_native_code_gives_no_python_stack(tmp_path):
    # A C call made with the GIL held (ctypes.PyDLL): faulthandler's dump cannot come within the second.
    script = write_script(tmp_path, "native.py", """
        import ctypes, os, sys
        with open(os.path.join(sys.argv[1], "started"), "w") as f:
            f.write(str(os.getpid()))
        ctypes.PyDLL(None).sleep(60)
    """)
    with Background(["--nproc-per-node", 1, "--grace", 1, "--log-dir", tmp_path / "logs", script, tmp_path],
                    tmp_path) as bg:
        wait_until_asleep(tmp_path / "started")
        bg.send(signal.SIGINT)
        assert bg.wait(timeout=20) == -signal.SIGINT, bg.stderr()
    assert re.search(r"stop: rank still running: 0 \(pid \d+, host \S+, running \d+ s, no Python stack: it did "
                     r"not answer within 1 s \(in native code\?\)\)", bg.stderr()), bg.stderr()
    record = json.loads((the_run_dir(tmp_path / "logs") / "run.json").read_text())
    assert record["running_at_stop"][0]["stacks_file"] is None, record


def test_every_run_leaves_a_record_and_a_success_after_restarts_says_so(tmp_path):
    script = write_script(tmp_path, "flaky.py", """
        import os, sys, time
        if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
            if os.environ["RANK"] == "1":
                sys.exit(7)
            time.sleep(60)  # rank 0 runs until dlaunch stops it
    """)
    proc = run_dlaunch(["--nproc-per-node", 2, "--max-restarts", 1, "--restart-backoff", 0, "--log-dir",
                        tmp_path / "logs", script])
    assert proc.returncode == 0, describe(proc)
    assert "dlaunch: succeeded after 1 restart (attempt 0: rank 1, exit code 7)" in proc.stderr, describe(proc)
    record = json.loads((the_run_dir(tmp_path / "logs") / "run.json").read_text())
    assert record["outcome"] == "succeeded" and record["exit_code"] == 0 and record["restarts"] == 1, record
    attempts = record["attempts"]
    assert [a["attempt"] for a in attempts] == [0, 1], record
    assert attempts[0]["ended_by"] == "rank 1, exit code 7" and attempts[1]["ended_by"] is None, record
    assert all(a["duration_s"] > 0 and a["logs"].endswith(f"attempt_{a['attempt']}") for a in attempts), record
    assert [(f["rank"], f["root_cause"], f["stopped_by_dlaunch"]) for f in record["failures"]] == [
        (1, True, False), (0, False, True)], record

    once = run_dlaunch(["--nproc-per-node", 1, "--log-dir", tmp_path / "once", "--no-python", "true"])
    assert once.returncode == 0 and "succeeded after" not in once.stderr, describe(once)
    assert json.loads((the_run_dir(tmp_path / "once") / "run.json").read_text())["outcome"] == "succeeded"

    # dlaunch report: the same record as a timeline, in text and as a picture.
    report = run_dlaunch(["report", tmp_path / "logs"])
    assert report.returncode == 0, describe(report)
    assert re.search(r"^  attempt 0  \S+Z  \+0\.0 s  ran \d+\.\d s  ended by rank 1, exit code 7$", report.stdout,
                     re.M), report.stdout
    assert re.search(r"^  attempt 1  \S+Z  \+\d+\.\d s  ran \d+\.\d s$", report.stdout, re.M), report.stdout
    assert "  attempt 0: rank 1 (host " in report.stdout and "): exit code 7 (root cause)" in report.stdout
    assert re.search(r"^  attempt 0: rank 0 \(host \S+\): signal SIGTERM \(15\) \(while dlaunch was stopping the group\)$",
                     report.stdout, re.M), report.stdout
    picture = run_dlaunch(["report", "--format", "svg", the_run_dir(tmp_path / "logs")])
    assert picture.returncode == 0, describe(picture)
    bars = ET.fromstring(picture.stdout).findall("{http://www.w3.org/2000/svg}rect[@class='attempt']")
    assert [b.get("data-attempt") for b in bars] == ["0", "1"]


def test_report_lists_runs_by_start_and_where_they_are_now(tmp_path):
    # Run "b" starts first, "a" second: names sort the other way. Then the log directory moves.
    for name in ("b", "a"):
        proc = run_dlaunch(["--nproc-per-node", 1, "--rdzv-id", name, "--log-dir", tmp_path / "logs", "--no-python",
                            "true"])
        assert proc.returncode == 0, describe(proc)
    (tmp_path / "logs").rename(tmp_path / "moved")
    report = run_dlaunch(["report", tmp_path / "moved"])
    assert report.returncode == 0, describe(report)
    heads = [l for l in report.stdout.splitlines() if l.startswith("run ")]
    assert [h.split()[1] for h in heads] == ["b", "a"], report.stdout
    assert all(f"({tmp_path / 'moved'}/" in h for h in heads), report.stdout


def test_report_exit_code_prints_the_runs_code_and_refuses_a_directory_of_unrelated_runs(tmp_path):
    for name, command in (("ok", "true"), ("bad", "false")):
        proc = run_dlaunch(["--nproc-per-node", 1, "--rdzv-id", name, "--log-dir", tmp_path / name, "--no-python",
                            command])
        assert proc.returncode == (0 if name == "ok" else 1), describe(proc)
    bad = run_dlaunch(["report", "--exit-code", tmp_path / "bad"])
    assert (bad.returncode, bad.stdout) == (0, "1\n"), describe(bad)
    assert run_dlaunch(["report", "--exit-code", the_run_dir(tmp_path / "ok")]).stdout == "0\n"
    (the_run_dir(tmp_path / "ok")).rename(tmp_path / "bad" / "ok_run")
    both = run_dlaunch(["report", "--exit-code", tmp_path / "bad"])
    assert both.returncode == USAGE and both.stdout == "", describe(both)
    assert f"dlaunch: report: none of the 2 runs in {tmp_path / 'bad'} led its group when the group ended" \
        in both.stderr, describe(both)


def test_report_refuses_a_directory_without_a_run_record(tmp_path):
    proc = run_dlaunch(["report", tmp_path])
    assert proc.returncode == USAGE, describe(proc)
    assert f"dlaunch: report: no run record (run.json, or a requeued job's attempts.jsonl) in {tmp_path} nor in its " \
        "subdirectories" in proc.stderr
    gone = run_dlaunch(["report", tmp_path / "absent"])
    assert gone.returncode == USAGE and f"dlaunch: report: {tmp_path / 'absent'} is not a directory" in gone.stderr


def test_a_stopped_run_is_kept_with_its_record(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = write_script(tmp_path, "sleeper.py", """
        import os, sys, time
        with open(os.path.join(sys.argv[1], "started"), "w") as f:
            f.write(str(os.getpid()))
        time.sleep(60)
    """)
    with Background(["--nproc-per-node", 1, script, tmp_path], tmp_path, env={"TMPDIR": str(tmp)}) as bg:
        wait_until_asleep(tmp_path / "started")
        bg.send(signal.SIGINT)
        assert bg.wait(timeout=20) == -signal.SIGINT, bg.stderr()
    kept = list(tmp.glob("dlaunch_none_*"))
    assert len(kept) == 1, bg.stderr()
    assert f"logs: the stopped run is kept in {kept[0]}" in bg.stderr(), bg.stderr()
    record = json.loads((kept[0] / "run.json").read_text())
    assert record["outcome"] == "stopped by SIGINT" and record["exit_code"] == 128 + signal.SIGINT, record
    assert [r["rank"] for r in record["running_at_stop"]] == [0], record
    # What the rank was doing when the stop came: its Python stack, taken before it got the signal.
    where = record["running_at_stop"][0]["where"]
    assert re.fullmatch(r".*sleeper\.py:\d+ in <module>: time\.sleep\(60\)", where), record
    assert f"stop: rank still running: 0 (pid {record['running_at_stop'][0]['pid']}, host " in bg.stderr(), bg.stderr()
    assert f", at {where})" in bg.stderr(), bg.stderr()
    stacks = Path(record["running_at_stop"][0]["stacks_file"])
    assert stacks.is_relative_to(kept[0]) and "time.sleep(60)" not in stacks.read_text(), "faulthandler's own format"
    assert re.search(r'File ".*sleeper\.py", line \d+ in <module>', stacks.read_text()), stacks.read_text()
