"""Hangs (docs/hangs.md): a rank with no progress for --hang-timeout is hung; every rank's stacks are taken,
the likeliest culprit is named, and the hang is a failure (restart, or exit 124). torchrun's watchdog
(TORCHELASTIC_ENABLE_FILE_TIMER=1) is served as torchrun serves it."""

import contextlib
import json
import os
import re
import signal
import stat
import subprocess

from conftest import (LAUNCH_FAILED, USAGE, Background, base_env, describe, run_dlaunch, the_run_dir, wait_for,
                      write_script)

HANG_EXIT = 124

# Rank 2 sleeps before the all_reduce in the first attempt only; the others wait for it there.
DDP_HANG = """
    import os, time
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    t = torch.ones(1)
    if rank == 2 and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
        time.sleep(3600)
    dist.all_reduce(t)
    print(f"rank {rank}: all_reduce gave {t.item()}", flush=True)
    dist.destroy_process_group()
"""


def test_a_rank_asleep_before_all_reduce_is_named_with_every_ranks_stacks(torch_python, tmp_path):
    script = write_script(tmp_path, "ddp_hang.py", DDP_HANG)
    proc = run_dlaunch(["--nproc-per-node", 4, "--hang-timeout", 5, "--log-dir", tmp_path / "logs", script])
    assert proc.returncode == HANG_EXIT, describe(proc)
    assert "likeliest culprit: rank 2 " in proc.stderr, describe(proc)
    assert "ranks 0,1,3 wait in all_reduce" in proc.stderr, describe(proc)
    assert "rank 2 is not in a collective: at " in proc.stderr and "time.sleep(3600)" in proc.stderr, describe(proc)
    run_dir = the_run_dir(tmp_path / "logs")
    for rank in range(4):
        stacks = (run_dir / "attempt_0" / str(rank) / "stacks.txt").read_text()
        assert "# dlaunch-stacks pid=" in stacks
        if rank == 2:
            assert "ddp_hang.py\", line 10 in <module>" in stacks, stacks
            assert "in all_reduce" not in stacks, stacks
        else:
            assert "distributed_c10d.py" in stacks and "in all_reduce" in stacks, stacks
        native = (run_dir / "attempt_0" / str(rank) / "native-stacks.txt").read_text()
        assert "# dlaunch: " in native and "eu-stack" in native, native
    assert "nanosleep" in (run_dir / "attempt_0" / "2" / "native-stacks.txt").read_text()
    root = json.loads((run_dir / "failure.json").read_text())["root_cause"]
    assert root["rank"] == 2 and root["status"].startswith("hung: no progress for "), root
    # Found after the timeout, not at the end of time: the silence dlaunch measured is about the timeout.
    assert 5 <= root["hung_after_seconds"] < 15, root
    assert root["stacks_files"] == str(run_dir / "attempt_0" / "*" / "stacks.txt")
    assert any("wait in all_reduce" in e for e in root["hang_evidence"]), root


def test_a_hang_is_restarted_like_a_crash(torch_python, tmp_path):
    script = write_script(tmp_path, "ddp_hang.py", DDP_HANG)
    proc = run_dlaunch(["--nproc-per-node", 4, "--hang-timeout", 5, "--max-restarts", 1, script])
    assert proc.returncode == 0, describe(proc)
    assert "likeliest culprit: rank 2 " in proc.stderr
    assert "restart: starting the group again (restart 1 of 1)" in proc.stderr
    assert sorted(proc.stdout.splitlines()) == [f"[{r}]:rank {r}: all_reduce gave 4.0" for r in range(4)]


def test_computing_silently_is_not_a_hang(tmp_path):
    script = write_script(tmp_path, "compute.py", """
        import time
        end = time.monotonic() + 30
        n = 0
        while time.monotonic() < end:
            n += 1
        print("done", flush=True)
    """)
    proc = run_dlaunch(["--nproc-per-node", 1, "--hang-timeout", 10, script])
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout == "[0]:done\n"
    assert "hang:" not in proc.stderr


def test_a_thread_spinning_while_the_main_thread_waits_is_not_progress(tmp_path):
    # As gloo's thread spins once a peer is gone, while the rank itself waits (here in sleep) forever.
    script = write_script(tmp_path, "spin_beside.py", """
        import threading, time
        def spin():
            while True:
                pass
        threading.Thread(target=spin, daemon=True).start()
        print("waiting", flush=True)
        time.sleep(600)
    """)
    proc = run_dlaunch(["--nproc-per-node", 1, "--hang-timeout", 2, script], timeout=60)
    assert proc.returncode == HANG_EXIT, describe(proc)
    assert re.search(r"hang: no progress for [23] s \(no output, no CPU time in its main thread\); "
                     r"likeliest culprit: rank 0 ", proc.stderr), describe(proc)
    assert "time.sleep(600)" in proc.stderr, describe(proc)


def test_a_silent_program_without_python_is_hung_with_no_python_stack(tmp_path):
    proc = run_dlaunch(["--nproc-per-node", 2, "--hang-timeout", 1, "--no-python", "sleep", 600])
    assert proc.returncode == HANG_EXIT, describe(proc)
    assert "ranks 0,1: no Python stack (not a Python process" in proc.stderr, describe(proc)


def test_torchruns_file_timer_kills_the_rank_whose_timer_expired(torch_python, tmp_path):
    script = write_script(tmp_path, "file_timer.py", """
        import os, time
        import torch.distributed.elastic.timer as timer

        timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
        with timer.expires(after=1, scope="quick step"):
            pass
        print("entering the slow step", flush=True)
        with timer.expires(after=2, scope="slow step"):
            time.sleep(600)
    """)
    fifo = tmp_path / "watchdog"
    proc = run_dlaunch(["--nproc-per-node", 2, "--log-dir", tmp_path / "logs", script],
                       env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1", "TORCHELASTIC_TIMER_FILE": str(fifo)})
    assert proc.returncode == 128 + 9, describe(proc)
    assert proc.stdout.count("entering the slow step") == 2
    assert "torchrun's watchdog: timer 'slow step' expired; sent SIGKILL to pid " in proc.stderr, describe(proc)
    assert "quick step" not in proc.stderr
    root = json.loads((the_run_dir(tmp_path / "logs") / "failure.json").read_text())["root_cause"]
    assert root["signal"] == 9 and "timer 'slow step' expired" in root["notes"][0], root
    assert not fifo.exists(), "the FIFO dlaunch made is removed, as torchrun removes its own"


def test_a_fifo_the_user_made_is_served_and_left_alone(torch_python, tmp_path):
    fifo = tmp_path / "watchdog"
    os.mkfifo(fifo)
    script = write_script(tmp_path, "file_timer.py", """
        import os, time
        import torch.distributed.elastic.timer as timer

        timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"], signal=15))
        with timer.expires(after=1, scope="step"):
            time.sleep(600)
    """)
    proc = run_dlaunch(["--nproc-per-node", 1, script],
                       env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1", "TORCHELASTIC_TIMER_FILE": str(fifo)})
    assert proc.returncode == 128 + 15, describe(proc)
    assert "timer 'step' expired; sent SIGTERM to pid " in proc.stderr, describe(proc)
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_the_file_timer_fifo_dlaunch_makes_is_removed(torch_python, tmp_path):
    script = write_script(tmp_path, "where.py", """
        import os, stat, sys
        path = os.environ["TORCHELASTIC_TIMER_FILE"]
        assert stat.S_ISFIFO(os.stat(path).st_mode), path
        print(path)
    """)
    proc = run_dlaunch(["--nproc-per-node", 1, script],
                       env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1", "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, describe(proc)
    path = proc.stdout.strip().removeprefix("[0]:")
    assert re.fullmatch(re.escape(str(tmp_path)) + r"/dlaunch-private-\d+-\w{6}/watchdog", path), path
    assert not os.path.exists(path) and not os.path.exists(os.path.dirname(path)), "removed with its directory"


def test_a_timer_file_that_is_not_a_fifo_is_refused(tmp_path):
    plain = tmp_path / "plain"
    plain.write_text("")
    proc = run_dlaunch(["--nproc-per-node", 1, "--no-python", "true"],
                       env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1", "TORCHELASTIC_TIMER_FILE": str(plain)})
    assert proc.returncode == LAUNCH_FAILED, describe(proc)
    assert f"TORCHELASTIC_TIMER_FILE {plain} exists and is not a FIFO" in proc.stderr


def test_the_stack_hook_keeps_the_users_pythonpath_and_sitecustomize(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "sitecustomize.py").write_text("import os\nos.environ['USER_SITECUSTOMIZE_RAN'] = '1'\n")
    script = write_script(tmp_path, "env.py", """
        import os, sys
        print(os.environ["PYTHONPATH"].split(":")[1], os.environ.get("USER_SITECUSTOMIZE_RAN"),
              os.environ["DLAUNCH_STACK_SIGNAL"], os.path.basename(os.environ["DLAUNCH_STACKS_FILE"]))
    """)
    proc = run_dlaunch(["--nproc-per-node", 1, script], env={"PYTHONPATH": str(mine)})
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.strip() == f"[0]:{mine} 1 {signal.SIGRTMIN + 6} stacks.txt", describe(proc)


def test_the_stack_thread_ends_at_exit_before_the_interpreter_finalizes(tmp_path):
    # Left alive into finalization, it made torch 2.6 gloo workers abort ("terminate called without an
    # active exception"). The exit handlers are run by hand here to see the thread after them; a forked
    # child, which has no such thread, runs them too, and they must do nothing there.
    script = write_script(tmp_path, "ends.py", """
        import atexit, os, threading
        def stack_threads():
            return [t.name for t in threading.enumerate() if t.name == "dlaunch-stacks"]
        before = stack_threads()
        child = os.fork()
        if child == 0:
            atexit._run_exitfuncs()
            os._exit(0)
        _, status = os.waitpid(child, 0)
        atexit._run_exitfuncs()
        print(before, stack_threads(), os.waitstatus_to_exitcode(status))
    """)
    proc = run_dlaunch(["--nproc-per-node", 1, script])
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.strip() == "[0]:['dlaunch-stacks'] [] 0", describe(proc)


def test_a_bad_hang_timeout_is_refused(tmp_path):
    for args, env, what in [(["--hang-timeout", 0], {}, "--hang-timeout: '0' is not a number of seconds"),
                            (["--hang-timeout", "soon"], {}, "--hang-timeout: 'soon' is not a number of seconds"),
                            ([], {"DLAUNCH_HANG_TIMEOUT": "-1"}, "DLAUNCH_HANG_TIMEOUT: '-1' is not a number of seconds"),
                            # Below ten samples a timeout could only misfire; a number too large says the limit.
                            (["--hang-timeout", "1e-9"], {}, "--hang-timeout: 1e-9 s is too short to tell a hang"),
                            (["--hang-timeout", "99999999999999"], {}, "at most 10000000 seconds")]:
        proc = run_dlaunch([*args, "--nproc-per-node", 1, "--no-python", "true"], env=env)
        assert proc.returncode == USAGE, describe(proc)
        assert what in proc.stderr, describe(proc)


def test_heartbeats_judge_a_rank_and_teach_a_timeout(tmp_path):
    # Rank 1 spins after its heartbeats: busy, so only the missing heartbeats show it is stuck. No
    # --hang-timeout: the timeout is learned (3 x the longest interval, at least 10 s).
    script = write_script(tmp_path, "spin.py", """
        import os, time
        import dlaunch_heartbeat
        for step in range(6):
            time.sleep(0.3)
            assert dlaunch_heartbeat.beat(f"step {step}")
        if os.environ["RANK"] == "1":
            while True:
                pass
    """)
    proc = run_dlaunch(["--nproc-per-node", 2, "--log-dir", tmp_path / "logs", script])
    assert proc.returncode == HANG_EXIT, describe(proc)
    # The silence is measured: on a loaded machine the monitor's tick may find it a second later.
    assert re.search(r"hang: no heartbeat for 1[01] s \(timeout 10 s, learned from the heartbeats\); its last "
                     r"heartbeat said 'step 5'; likeliest culprit: rank 1 ", proc.stderr), describe(proc)
    assert "heartbeat: longest interval between heartbeats 0.3 s; learned hang timeout 10 s (to fix it: " \
           "--hang-timeout 10)" in proc.stderr, describe(proc)
    record = json.loads((the_run_dir(tmp_path / "logs") / "heartbeats.json").read_text())
    assert 0.3 <= record["longest_interval_seconds"] < 1 and record["learned_timeout_seconds"] == 10, record


def test_heartbeats_from_a_shell_with_a_hang_timeout(tmp_path):
    beats = 'for i in 1 2 3; do echo "beat $RANK shell $i" > "$DLAUNCH_HEARTBEAT_FILE"; sleep 0.2; done; '
    proc = run_dlaunch(["--nproc-per-node", 2, "--hang-timeout", 2, "--no-python", "bash", "-c",
                        beats + '[ "$RANK" = 0 ] || while :; do :; done'])
    assert proc.returncode == HANG_EXIT, describe(proc)
    assert re.search(r"hang: no heartbeat for [23] s \(timeout 2 s, --hang-timeout\); its last heartbeat said "
                     r"'shell 3'", proc.stderr), describe(proc)
    # 0.2 s apart, or a little more on a loaded machine: what is asserted is that three are too few to learn from
    assert re.search(r"heartbeat: longest interval between heartbeats 0\.[2-9] s; too few heartbeats to learn",
                     proc.stderr), describe(proc)


def test_a_line_that_is_not_a_heartbeat_is_reported_and_ignored(tmp_path):
    proc = run_dlaunch(["--nproc-per-node", 1, "--no-python", "bash", "-c",
                        'echo "hello" > "$DLAUNCH_HEARTBEAT_FILE"; echo "beat 9" > "$DLAUNCH_HEARTBEAT_FILE"; '
                        'sleep 0.5'])
    assert proc.returncode == 0, describe(proc)
    assert "heartbeat: ignoring 'hello': not 'beat RANK [NOTE]' from a rank of this node" in proc.stderr
    assert "heartbeat: ignoring 'beat 9'" in proc.stderr


def test_stacks_on_demand_by_run_directory_and_by_agent_pid(torch_python, tmp_path):
    script = write_script(tmp_path, "ddp_hang.py", DDP_HANG)
    logs = tmp_path / "logs"
    with Background(["--nproc-per-node", 4, "--log-dir", logs, script], tmp_path) as agent:
        by_dir = wait_for(lambda: everyone_in_place(stacks_command(logs)), timeout=120,
                          what="ranks 0,1,3 in all_reduce and rank 2 at its sleep")
        assert by_dir.returncode == 0, describe(by_dir)
        by_pid = stacks_command(agent.pid, "--native")
        assert by_pid.returncode == 0, describe(by_pid)
        sections = sections_of(by_pid)
        assert sorted(sections) == [0, 1, 2, 3], by_pid.stdout
        assert "ddp_hang.py\", line 10 in <module>" in sections[2], "rank 2 not at its sleep:\n" + by_pid.stdout
        assert "all_reduce" not in sections[2], "rank 2 named in all_reduce:\n" + by_pid.stdout
        assert "eu-stack -p" in sections[2] and "nanosleep" in sections[2], sections[2]
        assert agent.proc.poll() is None, "dlaunch stacks stops nothing"


# A stand-in rank as dlaunch's sitecustomize makes one: it announces its stack signal in its stacks file and,
# on the signal, runs `dump` (statements writing to `out`), then writes the end-of-dump line.
STAND_IN_RANK = """
    import os, signal, time
    signo = signal.SIGRTMIN + 6
    signal.pthread_sigmask(signal.SIG_BLOCK, {{signo}})
    out = open(os.environ["DLAUNCH_STACKS_FILE"], "a", buffering=1)
    out.write("# dlaunch-stacks pid=%d signal=%d\\n" % (os.getpid(), signo))
    print("listening", flush=True)
    signal.sigwait({{signo}})
{dump}
    out.write("# dlaunch-stacks dumped pid=%d\\n" % os.getpid())
    time.sleep(60)
"""


@contextlib.contextmanager
def stand_in_rank(tmp_path, dump):
    """Runs a stand-in rank (STAND_IN_RANK) until the test ends; yields the run directory it is rank 0 of."""
    script = write_script(tmp_path, "stand_in.py", STAND_IN_RANK.format(dump=dump))
    run_dir = tmp_path / "run"
    (run_dir / "0").mkdir(parents=True)
    env = dict(os.environ, DLAUNCH_STACKS_FILE=str(run_dir / "0" / "stacks.txt"), RANK="0")
    rank = subprocess.Popen(["python3", "-S", script], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert rank.stdout.readline() == "listening\n"
        yield run_dir
    finally:
        rank.kill()
        rank.wait()


def test_stacks_wait_for_the_end_of_a_slow_dump(tmp_path):
    # Part of a dump, a pause, the rest: dlaunch waits for the end-of-dump line.
    slow = """
    out.write("Thread 0x1 (most recent call first):\\n  File \\"first_half.py\\", line 1 in <module>\\n")
    time.sleep(0.6)
    out.write("  File \\"second_half.py\\", line 2 in <module>\\n")"""
    with stand_in_rank(tmp_path, slow) as run_dir:
        proc = stacks_command(run_dir)
        assert proc.returncode == 0, describe(proc)
        assert "first_half.py" in proc.stdout and "second_half.py" in proc.stdout, proc.stdout
        assert "dumped pid=" not in proc.stdout, proc.stdout


def test_a_native_tool_that_does_not_finish_is_stopped_and_its_section_says_so(tmp_path):
    tools = tmp_path / "bin"
    tools.mkdir()
    # Killed mid-line, as a tool that buffers its output is: dlaunch's note still gets a line of its own.
    (tools / "eu-stack").write_text("#!/bin/sh\nprintf \"#0  0x1 frame_before_the_hang\"\nexec sleep 60\n")
    (tools / "eu-stack").chmod(0o755)
    quick = """
    out.write("Thread 0x1 (most recent call first):\\n  File \\"quick.py\\", line 1 in <module>\\n")"""
    with stand_in_rank(tmp_path, quick) as run_dir:
        proc = run_dlaunch(["stacks", "--native", run_dir], env=base_env({"PATH": f"{tools}:{os.environ['PATH']}"}))
        assert proc.returncode == 0, describe(proc)
        assert "quick.py" in proc.stdout and "frame_before_the_hang" in proc.stdout, proc.stdout
        assert "frame_before_the_hang\n# dlaunch: eu-stack did not finish within 10 s and was stopped: what it " \
            "wrote above is partial\n" in proc.stdout, proc.stdout


def stacks_command(target, *options):
    return run_dlaunch(["stacks", *options, target])


def sections_of(proc):
    """rank -> its section of `dlaunch stacks` output."""
    return {int(s.split(" ")[0]): s for s in proc.stdout.split("==> rank ")[1:]}


def everyone_in_place(proc):
    """The stacks when ranks 0, 1, 3 wait in all_reduce and rank 2 sleeps: the victims can get there while
    rank 2 is still in DDP's constructor after its broadcast (torch 2.6 imports torch._dynamo there, slowly
    on a loaded machine)."""
    sections = sections_of(proc)
    victims = all("in all_reduce" in sections.get(rank, "") for rank in (0, 1, 3))
    return proc if victims and "ddp_hang.py\", line 10 in <module>" in sections.get(2, "") else None


def test_stacks_refuses_a_target_that_names_nothing(tmp_path):
    proc = run_dlaunch(["stacks", tmp_path / "absent"])
    assert proc.returncode == USAGE, describe(proc)
    assert "is neither a pid, a directory nor slurm:JOBID" in proc.stderr
    proc = run_dlaunch(["stacks", "99999999999999999999"])
    assert proc.returncode == USAGE, describe(proc)
    assert "dlaunch: stacks: pid 99999999999999999999 is out of range; give the pid of a running dlaunch agent" \
        in proc.stderr, describe(proc)
    proc = run_dlaunch(["stacks", tmp_path])
    assert proc.returncode == LAUNCH_FAILED, describe(proc)
    assert "no rank of a dlaunch job found for" in proc.stderr
