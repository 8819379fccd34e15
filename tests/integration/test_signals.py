"""Signal forwarding: notification signals (USR1) reach every worker and stop nothing; stop signals
(TERM, INT) reach every worker's process group, then SIGKILL after --grace; a second stop signal kills at
once."""

import signal
import subprocess
import time

from conftest import Background, base_env, dlaunch_bin, pid_alive, read_pids, wait_for

# Installs its handlers, then announces itself with a pid file (so a test never signals a worker
# that would still die of the default action), then waits. Every signal it gets leaves a marker file.
HANDLER_WORKER = """
import os, signal, sys, time
outdir, on_term = sys.argv[1], sys.argv[2]
rank = os.environ["RANK"]

def mark(name):
    open(os.path.join(outdir, f"{name}.{rank}"), "w").close()

def on_usr1(signo, frame):
    mark("usr1")

def on_stop(signo, frame):
    mark(signal.Signals(signo).name)
    if on_term == "exit":
        sys.exit(0)

signal.signal(signal.SIGUSR1, on_usr1)
signal.signal(signal.SIGTERM, on_stop if on_term != "ignore" else signal.SIG_IGN)
signal.signal(signal.SIGINT, on_stop if on_term != "ignore" else signal.SIG_IGN)
with open(os.path.join(outdir, f"{rank}.pid.tmp"), "w") as f:
    f.write(str(os.getpid()))
os.replace(os.path.join(outdir, f"{rank}.pid.tmp"), os.path.join(outdir, f"{rank}.pid"))
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    time.sleep(0.05)
    mark("alive")  # heartbeat: proves the worker keeps running after a notification
"""

NPROC = 3


def start(tmp_path, on_term, *options):
    outdir = tmp_path / "out"
    outdir.mkdir()
    script = tmp_path / "worker.py"
    script.write_text(HANDLER_WORKER)
    bg = Background(["--nproc-per-node", NPROC, "--log-dir", tmp_path / "logs", *options, script, outdir, on_term],
                    tmp_path)
    return bg, outdir


def markers(outdir, name):
    return sorted(p.name for p in outdir.glob(f"{name}.*"))


def expected(name):
    return [f"{name}.{r}" for r in range(NPROC)]


def test_usr1_is_forwarded_then_term_stops(tmp_path):
    bg, outdir = start(tmp_path, "exit")
    with bg:
        wait_for(lambda: len(read_pids(outdir)) == NPROC, what="workers to install their handlers")
        bg.worker_pids = read_pids(outdir)

        bg.send(signal.SIGUSR1)
        wait_for(lambda: markers(outdir, "usr1") == expected("usr1"), what="USR1 in every worker")
        # Still running: dlaunch waits, every worker is alive and keeps beating.
        for p in outdir.glob("alive.*"):
            p.unlink()
        wait_for(lambda: markers(outdir, "alive") == expected("alive"), what="heartbeats after USR1")
        assert bg.proc.poll() is None, bg.stderr()
        assert all(pid_alive(pid) for pid in bg.worker_pids)
        assert markers(outdir, "SIGTERM") == []

        bg.send(signal.SIGTERM)
        assert bg.wait(timeout=20) == -signal.SIGTERM, bg.stderr()
        assert markers(outdir, "SIGTERM") == expected("SIGTERM")
        assert not any(pid_alive(pid) for pid in bg.worker_pids)
    assert "forwarding SIGUSR1" in bg.stderr()


def test_int_is_forwarded_as_int(tmp_path):
    bg, outdir = start(tmp_path, "exit")
    with bg:
        wait_for(lambda: len(read_pids(outdir)) == NPROC, what="workers to install their handlers")
        bg.worker_pids = read_pids(outdir)
        bg.send(signal.SIGINT)
        assert bg.wait(timeout=20) == -signal.SIGINT, bg.stderr()
        assert markers(outdir, "SIGINT") == expected("SIGINT")
        assert markers(outdir, "SIGTERM") == []


MP_WORKER = """
import multiprocessing, os, sys, time

def child():
    time.sleep(60)

if __name__ == "__main__":
    p = multiprocessing.Process(target=child)  # not a daemon: Python waits for it at exit
    p.start()
    open(os.path.join(sys.argv[1], "started"), "w").close()
    time.sleep(60)
"""


def test_a_stop_reaches_the_workers_own_children(tmp_path):
    # Ctrl-C: the worker and its multiprocessing child both get SIGINT (torchrun signals the process group),
    # so the run ends at once instead of after the 30 s grace the worker would spend joining its child.
    script = tmp_path / "mp_worker.py"
    script.write_text(MP_WORKER)
    with Background(["--nproc-per-node", 1, script, tmp_path], tmp_path) as bg:
        wait_for(lambda: (tmp_path / "started").exists(), what="the worker and its child to start")
        t0 = time.monotonic()
        bg.send(signal.SIGINT)
        assert bg.wait(timeout=20) == -signal.SIGINT, bg.stderr()
        assert time.monotonic() - t0 < 10, bg.stderr()
        assert "grace period" not in bg.stderr(), bg.stderr()


def test_grace_then_sigkill(tmp_path):
    bg, outdir = start(tmp_path, "ignore", "--grace", "0.5")
    with bg:
        wait_for(lambda: len(read_pids(outdir)) == NPROC, what="workers to install their handlers")
        bg.worker_pids = read_pids(outdir)
        t0 = time.monotonic()
        bg.send(signal.SIGTERM)
        code = bg.wait(timeout=20)
        elapsed = time.monotonic() - t0
        assert code == -signal.SIGTERM, bg.stderr()
        assert 0.4 <= elapsed < 5, f"dlaunch took {elapsed:.2f}s with --grace 0.5"
        assert not any(pid_alive(pid) for pid in bg.worker_pids), "a worker outlived dlaunch"
    assert "grace period of 0.5s is over" in bg.stderr()


def test_second_stop_signal_kills_at_once(tmp_path):
    # Workers ignore TERM and INT; the grace period (default 30 s) would keep dlaunch waiting.
    bg, outdir = start(tmp_path, "ignore")
    with bg:
        wait_for(lambda: len(read_pids(outdir)) == NPROC, what="workers to install their handlers")
        bg.worker_pids = read_pids(outdir)
        bg.send(signal.SIGINT)
        # Two signals sent back to back may merge into one pending signal: wait until dlaunch took the first.
        wait_for(lambda: "received SIGINT" in bg.stderr(), what="dlaunch to take the first SIGINT")
        time.sleep(0.2)
        assert bg.proc.poll() is None, "dlaunch exited before the grace period without a second signal"
        t0 = time.monotonic()
        bg.send(signal.SIGINT)
        code = bg.wait(timeout=10)
        assert code == -signal.SIGINT, bg.stderr()
        assert time.monotonic() - t0 < 3
        assert not any(pid_alive(pid) for pid in bg.worker_pids), "a worker outlived dlaunch"
    assert "a second stop signal kills them at once" in bg.stderr(), bg.stderr()
    assert "received SIGINT while stopping; killing the workers now (SIGKILL)" in bg.stderr(), bg.stderr()


def test_signals_option_limits_forwarding(tmp_path):
    # --signals TERM: only TERM is forwarded as itself. INT, a stop signal left out of the list, still
    # stops dlaunch (it dies of SIGINT) and reaches the workers as SIGTERM.
    bg, outdir = start(tmp_path, "exit", "--signals", "TERM")
    with bg:
        wait_for(lambda: len(read_pids(outdir)) == NPROC, what="workers to install their handlers")
        bg.worker_pids = read_pids(outdir)
        bg.send(signal.SIGINT)
        assert bg.wait(timeout=20) == -signal.SIGINT, bg.stderr()
        assert markers(outdir, "SIGTERM") == expected("SIGTERM")
        assert markers(outdir, "SIGINT") == []


def test_workers_start_with_sigint_and_sigquit_at_their_defaults(tmp_path):
    # A non-interactive shell starts `cmd &` with SIGINT and SIGQUIT ignored, and exec keeps them ignored:
    # dlaunch's workers get them back at their defaults, or a forwarded SIGINT would do nothing.
    script = tmp_path / "dispositions.py"
    script.write_text("import signal\n"
                      "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,\n"
                      "      signal.getsignal(signal.SIGQUIT) == signal.SIG_DFL, flush=True)\n")
    shell = f"{dlaunch_bin()} --nproc-per-node 1 {script} & wait $!"
    proc = subprocess.run(["sh", "-c", shell], env=base_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "[0]:True True\n", proc.stdout + proc.stderr
