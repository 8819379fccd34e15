"""Shared helpers for dlaunch's integration tests: real processes, real Python, real PyTorch.

Environment (set by tests/CMakeLists.txt for every CTest entry):
  DLAUNCH_BIN         the dlaunch binary under test (required: a missing one fails every test)
  DLAUNCH_SOURCE_DIR  the repository root (for examples/)
  PYTHON_EXEC         the interpreter workers run under (Debian's /usr/bin/python3, with torch)

To run one file by hand, from the repository root:
  DLAUNCH_BIN=$PWD/build/launcher/dlaunch DLAUNCH_SOURCE_DIR=$PWD PYTHON_EXEC=/usr/bin/python3 \
    /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/integration/test_signals.py

Nothing here skips: a missing binary, interpreter or torch is a test failure, never a silent pass.
Every process a test starts is bounded by a timeout and killed in a `finally`.
"""

import contextlib
import json
import os
import signal
import socket
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
WORKERS = HERE / "workers"

# Bounds for anything a test waits on. Generous against a loaded 2-core CI machine running ctest -j2,
# small enough that a hang fails in seconds rather than at CTest's 600 s timeout.
DEFAULT_TIMEOUT = 60
WAIT_TIMEOUT = 20

# dlaunch's own exit codes (base/include/dlaunch/exit_codes.hpp; test_exit_codes.py checks they match).
USAGE = 64
GROUP_FAILED = 69
LAUNCH_FAILED = 71
LOG_FAILED = 74  # a worker's log could not be written in full (--ignore-log-errors keeps 0)
NOT_READY = 78  # dlaunch doctor: a check failed; the health gate refused an attempt


def _required_env(name):
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run the integration tests through ctest, or export {name}",
                    pytrace=False)
    return value


def dlaunch_bin():
    """Path of the dlaunch binary under test; fails the test when it is not there."""
    path = _required_env("DLAUNCH_BIN")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"DLAUNCH_BIN={path}: not an executable file (build dlaunch first)", pytrace=False)
    return path


def python_exec():
    """The workers' interpreter ($PYTHON_EXEC); fails the test when it is not there."""
    path = _required_env("PYTHON_EXEC")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        pytest.fail(f"PYTHON_EXEC={path}: not an executable file", pytrace=False)
    return path


def source_dir():
    path = Path(_required_env("DLAUNCH_SOURCE_DIR"))
    if not (path / "CMakeLists.txt").is_file():
        pytest.fail(f"DLAUNCH_SOURCE_DIR={path}: not the dlaunch repository", pytrace=False)
    return path


@pytest.fixture(autouse=True)
def _require_binaries():
    """Every test needs dlaunch and the workers' interpreter: fail (not skip) at once without them."""
    dlaunch_bin()
    python_exec()


@pytest.fixture(scope="session")
def torch_python():
    """PYTHON_EXEC, checked to import torch with torch.distributed (fails, never skips, without it)."""
    py = python_exec()
    probe = subprocess.run([py, "-c", "import torch, torch.distributed as d; assert d.is_available(); "
                                      "print(torch.__version__)"],
                           capture_output=True, text=True, timeout=DEFAULT_TIMEOUT)
    if probe.returncode != 0:
        pytest.fail(f"{py} cannot import torch with torch.distributed:\n{probe.stderr}", pytrace=False)
    return py


def base_env(extra=None, drop=()):
    """The environment dlaunch runs in: ours, without variables that would change its behaviour
    (PET_* option fallbacks, DLAUNCH_LOG, the contract variables a parent launcher may have set),
    plus PYTHON_EXEC and `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PET_", "PADDLE_", "FLAGS_selected")) and k not in {
               "DLAUNCH_LOG", "OMP_NUM_THREADS", "NCCL_ASYNC_ERROR_HANDLING", "RANK", "LOCAL_RANK",
               "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_ERROR_FILE",
               "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "CUDA_VISIBLE_DEVICES", "DLAUNCH_RDZV_SECRET"}}
    env["PYTHON_EXEC"] = python_exec()
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for k in drop:
        env.pop(k, None)
    env.update(extra or {})
    return env


def run_dlaunch(args, env=None, timeout=DEFAULT_TIMEOUT, cwd=None, preexec_fn=None):
    """Runs dlaunch to completion: CompletedProcess with text stdout/stderr. `env`: extra variables on
    top of base_env(), or a full mapping when it has PATH. A run past `timeout` fails the test (the
    timeout kills dlaunch with SIGKILL, and its workers die with it through PR_SET_PDEATHSIG)."""
    full_env = env if env is not None and "PATH" in env else base_env(env)
    cmd = [dlaunch_bin(), *map(str, args)]
    try:
        return subprocess.run(cmd, env=full_env, cwd=cwd, capture_output=True, text=True,
                              errors="replace", timeout=timeout, preexec_fn=preexec_fn)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"dlaunch did not finish within {timeout}s: {cmd}\nstdout:\n{e.stdout}\nstderr:\n{e.stderr}")


def describe(proc):
    """Text for assertion messages."""
    return f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"


class Background:
    """dlaunch started in the background (for signals), output going to files under `tmp_path`.
    Use as a context manager: on exit dlaunch and every pid in `self.worker_pids` are SIGKILLed if
    still alive, so nothing outlives the test."""

    def __init__(self, args, tmp_path, env=None):
        self.out_path = tmp_path / "dlaunch.stdout"
        self.err_path = tmp_path / "dlaunch.stderr"
        full_env = env if env is not None and "PATH" in env else base_env(env)
        self._out = open(self.out_path, "wb")
        self._err = open(self.err_path, "wb")
        self.proc = subprocess.Popen([dlaunch_bin(), *map(str, args)], env=full_env,
                                     stdout=self._out, stderr=self._err, stdin=subprocess.DEVNULL)
        self.worker_pids = []

    @property
    def pid(self):
        return self.proc.pid

    def send(self, signo):
        self.proc.send_signal(signo)

    def wait(self, timeout=DEFAULT_TIMEOUT):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"dlaunch did not exit within {timeout}s\n{self.stderr()}")

    def stdout(self):
        return self.out_path.read_text(errors="replace")

    def stderr(self):
        return self.err_path.read_text(errors="replace")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for pid in self.worker_pids:
            kill_if_alive(pid)
        self._out.close()
        self._err.close()
        return False


# Prepended to worker scripts that must order themselves against another rank (e.g. "fail only once
# rank 0 is up"): without it a loaded machine may stop rank 0 before it even started.
WAIT_FOR_FILE = """
import os, sys, time

def wait_for_file(path, timeout=30):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {path}")
        time.sleep(0.01)
"""


def write_script(directory, name, body, prelude=""):
    """Writes a worker script (`prelude` then `body` dedented) and returns its path. Scripts need no
    exec bit: dlaunch runs them under $PYTHON_EXEC."""
    path = Path(directory) / name
    path.write_text(prelude + textwrap.dedent(body).lstrip())
    return path


def wait_for(predicate, timeout=WAIT_TIMEOUT, interval=0.02, what="condition"):
    """Polls `predicate` until it is true; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def pid_alive(pid):
    """True when `pid` exists and is not a zombie (a killed worker reparented to an init that does
    not reap is dead for our purposes)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def wait_until_asleep(marker, what="the worker to sleep"):
    """Waits for a worker that wrote its pid into `marker` and then went to sleep (time.sleep, a C sleep)
    to be in that sleep: a stop sent before would find it on the line before, not where the test expects."""
    def asleep():
        try:
            pid = int(Path(marker).read_text())
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (OSError, ValueError):
            return False
        return stat.rsplit(")", 1)[1].split()[0] == "S"
    wait_for(lambda: asleep() and (time.sleep(0.05) or asleep()), what=what)


def kill_if_alive(pid):
    try:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def read_pids(directory, pattern="*.pid"):
    return [int(p.read_text()) for p in sorted(Path(directory).glob(pattern)) if p.read_text().strip()]


def load_rank_dumps(outdir, count):
    """Reads the rank<N>.json files that workers/dump_env.py writes; asserts there are exactly `count`."""
    files = sorted(Path(outdir).glob("rank*.json"))
    assert len(files) == count, f"expected {count} rank dumps, found {[f.name for f in files]}"
    dumps = {}
    for f in files:
        d = json.loads(f.read_text())
        dumps[int(d["environ"]["RANK"])] = d
    assert sorted(dumps) == sorted(int(f.stem[4:]) for f in files)
    return dumps


def the_run_dir(log_dir):
    """The one run directory dlaunch made under `log_dir`."""
    dirs = [p for p in Path(log_dir).iterdir() if p.is_dir()]
    assert len(dirs) == 1, f"expected one run directory in {log_dir}, found {dirs}"
    return dirs[0]


def usable_cpus():
    return len(os.sched_getaffinity(0))


def gpu_count():
    """GPUs the way dlaunch's topology sees them: PCI display devices (class 0x0300/0x0302) from
    NVIDIA or AMD."""
    n = 0
    for dev in Path("/sys/bus/pci/devices").glob("*"):
        try:
            vendor = (dev / "vendor").read_text().strip()
            cls = (dev / "class").read_text().strip()
        except OSError:
            continue
        if vendor in ("0x10de", "0x1002") and cls[:6] in ("0x0300", "0x0302"):
            n += 1
    return n


DUMP_ENV = WORKERS / "dump_env.py"


def free_port():
    """A TCP port nothing listens on right now (for --master-port)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def tmpfs(path, size):
    """A tmpfs of `size` (mount's form: "1m") mounted at `path` (made here), unmounted after. Needs root to
    mount: without it the test says SKIP (CI runs as root)."""
    if os.geteuid() != 0:
        pytest.skip("SKIP: needs root to mount a tmpfs; CI runs as root")
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True, timeout=30)
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False, timeout=30)
