"""Progress bars: a worker's carriage-return updates (tqdm, Lightning, pip) reach the console as they
come, each with the rank's prefix, through a pipe and a terminal alike; another rank's line goes below
the bar, not over it."""

import os
import pty
import re
import select
import signal
import subprocess
import time

import pytest

from conftest import WAIT_TIMEOUT, base_env, dlaunch_bin, write_script

# Rank 0 draws a bar on `stream` and moves on only when the test says so (the file "goN"): a state
# read while the worker waits was streamed live. Rank 1 prints one line when told to ("hello-go").
BAR = """
import os, sys, time
def wait(name):
    while not os.path.exists(os.path.join(sys.argv[1], name)):
        time.sleep(0.01)
out = getattr(sys, sys.argv[2])
if os.environ["RANK"] == "1":
    wait("hello-go")
    print("hello", flush=True)
    sys.exit(0)
for step in (1, 2):
    out.write(f"\\rstep {step}/3"); out.flush()
    wait(f"go{step}")
out.write("\\rstep 3/3\\n"); out.flush()
"""


class Reader:
    """Reads what dlaunch writes to `fd` as it comes."""

    def __init__(self, fd, proc):
        self.fd, self.proc, self.text = fd, proc, b""

    def until(self, expected):
        deadline = time.monotonic() + WAIT_TIMEOUT
        while expected not in self.text:
            if time.monotonic() > deadline:
                pytest.fail(f"{expected!r} never came; the console so far: {self.text!r}")
            if select.select([self.fd], [], [], 0.1)[0]:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # a terminal whose other side closed
                    chunk = b""
                if not chunk and self.proc.poll() is not None:
                    pytest.fail(f"dlaunch ended before {expected!r} came: {self.text!r}")
                self.text += chunk

    def drain(self):
        while select.select([self.fd], [], [], 1)[0]:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.text += chunk


def play(reader, tmp_path, newline):
    """Steps the workers, checking each state arrives while its worker waits."""
    reader.until(b"[0]:step 1/3\r")
    (tmp_path / "hello-go").touch()
    reader.until(b"[0]:step 1/3\r" + newline + b"[1]:hello" + newline)
    (tmp_path / "go1").touch()
    reader.until(b"[1]:hello" + newline + b"[0]:step 2/3\r")
    (tmp_path / "go2").touch()
    reader.until(b"[0]:step 2/3\r[0]:step 3/3" + newline)


def test_a_progress_bar_streams_live_through_a_pipe(tmp_path):
    script = write_script(tmp_path, "bar.py", BAR)
    proc = subprocess.Popen([dlaunch_bin(), "--nproc-per-node", "2", script, str(tmp_path), "stdout"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=base_env())
    try:
        reader = Reader(proc.stdout.fileno(), proc)
        play(reader, tmp_path, b"\n")
        assert proc.wait(timeout=WAIT_TIMEOUT) == 0, proc.stderr.read()
        reader.drain()
        assert reader.text == b"[0]:step 1/3\r\n[1]:hello\n[0]:step 2/3\r[0]:step 3/3\n"
    finally:
        proc.kill()
        proc.wait()


def test_a_progress_bar_on_stderr_streams_live_to_a_terminal(tmp_path):
    # tqdm draws on stderr; rank 1 prints on stdout; both reach the same terminal, so rank 1's line
    # must end the bar's line first. The terminal turns "\n" into "\r\n".
    script = write_script(tmp_path, "bar.py", BAR)
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([dlaunch_bin(), "--quiet", "--nproc-per-node", "2", script, str(tmp_path), "stderr"],
                            stdout=terminal, stderr=terminal, stdin=subprocess.DEVNULL, env=base_env())
    os.close(terminal)
    try:
        reader = Reader(controller, proc)
        play(reader, tmp_path, b"\r\n")
        assert proc.wait(timeout=WAIT_TIMEOUT) == 0, reader.text
        reader.drain()
        assert b"[0]:step 1/3\r\r\n[1]:hello\r\n[0]:step 2/3\r[0]:step 3/3\r\n" in reader.text
    finally:
        proc.kill()
        proc.wait()
        os.close(controller)


def test_on_a_terminal_dlaunchs_own_lines_end_a_bar_first_and_the_stop_says_where_ranks_were(tmp_path):
    # A stop signal while rank 0's bar stands: dlaunch's lines start below the bar, not over it, and name
    # where the rank was when the signal came.
    script = write_script(tmp_path, "bar.py", BAR)
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([dlaunch_bin(), "--nproc-per-node", "1", script, str(tmp_path), "stderr"],
                            stdout=terminal, stderr=terminal, stdin=subprocess.DEVNULL, env=base_env())
    os.close(terminal)
    try:
        reader = Reader(controller, proc)
        reader.until(b"[0]:step 1/3\r")
        proc.send_signal(signal.SIGINT)
        reader.until(b"[0]:step 1/3\r\r\ndlaunch: stop: received SIGINT; stopping the workers")
        reader.until(b"dlaunch: stop: rank still running: 0 (pid ")
        assert proc.wait(timeout=WAIT_TIMEOUT) == -signal.SIGINT, reader.text
        reader.drain()
        # Where it was: a line of bar.py, or a frame below one (os.path.exists) "(from bar.py:N in wait: ...)".
        assert re.search(rb"rank still running: 0 \(pid \d+, host \S+, running \d+ s, at [^\r\n]*bar\.py:\d+ in \S+: ",
                         reader.text), reader.text.decode()
    finally:
        proc.kill()
        proc.wait()
        os.close(controller)
