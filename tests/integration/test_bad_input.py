"""Bad input: dlaunch refuses it with exit code 2 and a "dlaunch: " message before starting anything
(the script would leave a marker file if any worker ran)."""

import json
import re
import shutil
import tempfile
import os
import resource
import socket
import subprocess
from pathlib import Path

import pytest

from conftest import LAUNCH_FAILED, USAGE, base_env, describe, gpu_count, run_dlaunch, source_dir, write_script

MARKER_SCRIPT = """
import os, sys
open(os.path.join(sys.argv[1], "started." + os.environ.get("RANK", "x")), "w").close()
"""


@pytest.fixture
def marker_run(tmp_path):
    """Returns run(options, script=None): runs dlaunch with `options` before the marker script (or
    `script`), and asserts exit code 2, the message shape and that no worker started."""
    script = write_script(tmp_path, "marker.py", MARKER_SCRIPT)
    markers = tmp_path / "markers"
    markers.mkdir()

    def run(options, script_path=None, args=None, env=None, preexec_fn=None):
        target = script if script_path is None else script_path
        proc = run_dlaunch([*options, target, *(args if args is not None else [markers])], env=env, cwd=tmp_path,
                           preexec_fn=preexec_fn)
        assert proc.returncode == USAGE, describe(proc)
        assert proc.stderr.startswith("dlaunch: "), proc.stderr
        assert proc.stderr.count("\n") == 1, f"one message line expected:\n{proc.stderr}"
        assert proc.stdout == ""
        assert list(markers.iterdir()) == [], "a worker was started"
        return proc.stderr

    return run


def test_the_marker_script_really_marks(tmp_path):
    # The check the other tests rely on: a run that is accepted does leave the marker.
    script = write_script(tmp_path, "marker.py", MARKER_SCRIPT)
    proc = run_dlaunch(["--nproc-per-node", 2, script, tmp_path])
    assert proc.returncode == 0, describe(proc)
    assert sorted(p.name for p in tmp_path.glob("started.*")) == ["started.0", "started.1"]


@pytest.mark.parametrize("options, needle", [
    (["--no-such-option"], "--no-such-option"),
    (["--nnodes", "x"], "--nnodes"),
    (["--nnodes", "0"], "--nnodes"),
    (["--nnodes", "3:2"], "--nnodes"),
    (["--nnodes", "1:4"], "--rdzv-backend c10d"),
    (["--nproc-per-node", "0"], "--nproc-per-node"),
    (["--nproc-per-node", "abc"], "--nproc-per-node"),
    (["--nproc-per-node", "-1"], "--nproc-per-node"),
    (["--local-ranks-filter", "a"], "--local-ranks-filter"),
    (["--local-ranks-filter", "3-1"], "--local-ranks-filter"),
    (["--local-ranks-filter", "0,"], "--local-ranks-filter"),
    (["--local-ranks-filter", "0,9"], "--local-ranks-filter: local rank 9 does not exist: this node runs 2 workers"),
    (["--rdzv-id", "job\n7"], "--rdzv-id: the run id contains a control character"),
    (["--redirects", "5"], "--redirects"),
    (["--redirects", "0:9"], "--redirects"),
    (["--tee", "x"], "--tee"),
    (["--max-restarts", "-1"], "--max-restarts"),
    (["--grace", "soon"], "--grace"),
    (["--signals", "KILL"], "SIGKILL"),
    (["--master-port", "70000"], "--master-port"),
    (["--start-method", "thread"], "--start-method"),
    (["--nnodes", "2", "--node-rank", "2", "--master-addr", "127.0.0.1"], "--node-rank 2"),
    (["--nnodes", "2", "--node-rank", "1"], "master address"),
    (["--nnodes", "2", "--node-rank", "1", "--master-addr", "::1"], "an IPv6 address; dlaunch's agents meet at the "
                                                                    "master over IPv4"),
    (["--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1", "--rdzv-conf", "timeout=9",
      "--join-timeout", "9"], "--join-timeout and --rdzv-conf timeout: one setting given twice"),
    (["--rdzv-backend", "etcd"], "etcd"),
    (["--rdzv-backend", "etcd-v2", "--nnodes", "2", "--node-rank", "0"], "etcd-v2"),
    (["--standalone", "--nnodes", "2"], "--standalone"),
])
def test_bad_option_values(marker_run, options, needle):
    message = marker_run(["--nproc-per-node", "2", *options])
    assert needle in message


def test_bad_pet_variable(marker_run):
    message = marker_run([], env={"PET_NPROC_PER_NODE": "many"})
    assert "PET_NPROC_PER_NODE" in message


def test_module_with_no_python(marker_run):
    message = marker_run(["-m", "--no-python"], script_path="json.tool")
    assert "--module" in message and "--no-python" in message


def test_missing_script(marker_run, tmp_path):
    message = marker_run([], script_path=tmp_path / "does_not_exist.py")
    assert "does_not_exist.py" in message


def test_script_that_is_a_directory(marker_run, tmp_path):
    # (Unreadable files cannot be produced with chmod as root, who reads everything: a directory is
    # the way to give a path that exists but cannot be run.)
    d = tmp_path / "a_directory.py"
    d.mkdir()
    message = marker_run([], script_path=d)
    assert "not a regular file, nor a directory with __main__.py" in message


def test_a_directory_with_main_runs_as_python_runs_it(tmp_path):
    package = tmp_path / "app"
    package.mkdir()
    (package / "__main__.py").write_text("import os, sys\nprint('app', os.environ['RANK'], sys.argv[1:])\n")
    proc = run_dlaunch(["--nproc-per-node", 2, package, "--epochs", "1"])
    assert proc.returncode == 0, describe(proc)
    assert sorted(proc.stdout.splitlines()) == ["[0]:app 0 ['--epochs', '1']", "[1]:app 1 ['--epochs', '1']"]


def test_double_dash_ends_the_options(tmp_path):
    # As in torchrun and every POSIX tool: after `--`, a script whose name starts with '-' is the script.
    write_script(tmp_path, "-dash.py", "import sys\nprint('dash', sys.argv[1:])\n")
    proc = run_dlaunch(["--nproc-per-node", 1, "--", "-dash.py", "--lr", "1"], cwd=tmp_path)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.splitlines() == ["[0]:dash ['--lr', '1']"], describe(proc)


def test_no_python_command_not_executable(marker_run, tmp_path):
    # No execute bit at all: refused even for root.
    script = write_script(tmp_path, "not_exec.sh", "#!/bin/sh\ntouch started.x\n")
    os.chmod(script, 0o644)
    message = marker_run(["--no-python"], script_path=script)
    assert "not_exec.sh" in message and "not found or not executable" in message


def test_no_python_command_not_on_path(marker_run):
    message = marker_run(["--no-python"], script_path="dlaunch-no-such-command-xyz")
    assert "dlaunch-no-such-command-xyz" in message


def test_python_exec_not_an_interpreter(marker_run, tmp_path):
    message = marker_run([], env={"PYTHON_EXEC": str(tmp_path / "no-python-here")})
    assert "PYTHON_EXEC" in message


@pytest.mark.parametrize("address", ["", "127.0.0.1"])
def test_master_port_in_use(marker_run, address):
    with socket.socket() as s:
        s.bind((address, 0))
        s.listen()
        port = s.getsockname()[1]
        message = marker_run(["--master-port", str(port)])
    assert f"--master-port {port}" in message and "in use" in message


def low_open_file_limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


@pytest.mark.parametrize("options", [
    ["--nnodes", "1000", "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:29400"],
    ["--nnodes", "1000", "--node-rank", "0", "--master-addr", "127.0.0.1"],
])
def test_too_few_open_files_to_lead_every_node(marker_run, options):
    # The agent that hosts the rendezvous and leads the group holds a connection per node: a limit that
    # cannot hold them is refused before the rendezvous, not met by refused connections in the middle of it.
    message = marker_run([*options, "--nproc-per-node", "2"], preexec_fn=low_open_file_limit)
    assert "leading 1000 nodes needs about 1072 open files, and its limit is 256" in message, message
    assert "raise the hard limit of open files to 1072" in message, message


def test_an_agent_that_does_not_lead_needs_no_descriptor_per_node(tmp_path):
    # Node 3 of the static form joins node 0 and holds one connection: the same low limit lets it start, and
    # it ends for want of node 0 (no rendezvous host within its join timeout), not for its limit.
    script = write_script(tmp_path, "marker.py", MARKER_SCRIPT)
    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = run_dlaunch(["--nnodes", "1000", "--node-rank", "3", "--master-addr", "127.0.0.1", "--master-port",
                        port, "--join-timeout", "1", "--nproc-per-node", "2", script, tmp_path],
                       preexec_fn=low_open_file_limit)
    assert proc.returncode != USAGE and proc.returncode != 0, describe(proc)
    assert "open files" not in proc.stderr, describe(proc)
    assert list(tmp_path.glob("started.*")) == [], "a worker was started"


def test_unwritable_log_dir(marker_run, tmp_path):
    a_file = tmp_path / "regular_file"
    a_file.write_text("")
    message = marker_run(["--log-dir", a_file / "logs"])
    assert "--log-dir" in message


def test_log_dir_that_is_a_file(marker_run, tmp_path):
    a_file = tmp_path / "regular_file"
    a_file.write_text("")
    message = marker_run(["--log-dir", a_file])
    assert "--log-dir" in message


@pytest.mark.parametrize("tmpdir, problem", [("/nonexistent/dir", "does not exist"), ("/etc/hostname", "not a directory")])
def test_a_tmpdir_that_cannot_be_used_is_named(marker_run, tmpdir, problem):
    # Port locks, FIFOs and run directories live there: the problem is $TMPDIR, whatever needs it first.
    message = marker_run([], env={"TMPDIR": tmpdir})
    assert f"dlaunch: launch: TMPDIR={tmpdir}: {problem}; create it" in message


def test_devices_absent(marker_run):
    # The first index this machine does not have (0 on a GPU-less machine), and one no machine has.
    for index in (gpu_count(), 1023):
        message = marker_run(["--devices", str(index)])
        assert f"device {index} does not exist" in message


def test_gpu_workers_without_gpu(marker_run, tmp_path):
    if gpu_count() == 0:
        message = marker_run(["--nproc-per-node", "gpu"])
        assert "no GPU" in message
    else:  # valid here: one worker per GPU
        proc = run_dlaunch(["plan", "--format", "json", "--nproc-per-node", "gpu", tmp_path / "marker.py"])
        assert proc.returncode == 0, describe(proc)
        assert json.loads(proc.stdout)["nproc_per_node"] == gpu_count()


def test_no_python_found(marker_run):
    env = base_env({"PATH": "/nonexistent"}, drop=["PYTHON_EXEC"])
    message = marker_run([], env=env)
    assert "no python3 found" in message


def test_unreadable_script(tmp_path):
    # chmod 000 stops everyone but root; as root, run dlaunch as nobody to see the check.
    base = Path(tempfile.mkdtemp(prefix="dlaunch-unreadable-"))
    try:
        base.chmod(0o755)
        script = write_script(base, "secret.py", MARKER_SCRIPT)
        script.chmod(0o000)
        markers = base / "markers"
        markers.mkdir()
        markers.chmod(0o777)
        preexec = None
        if os.geteuid() == 0:
            def preexec():
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
        proc = run_dlaunch([script, markers], env=base_env({"HOME": str(base)}), preexec_fn=preexec)
        assert proc.returncode == USAGE, describe(proc)
        assert proc.stderr.startswith("dlaunch: ") and "not readable" in proc.stderr, proc.stderr
        assert list(markers.iterdir()) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)


def help_options(args):
    text = run_dlaunch(args).stdout
    names = set()
    for spelled in re.findall(r"^\s+((?:-\w,)?--[\w-]+(?:,--[\w-]+)*)", text, re.M):
        names |= set(re.findall(r"--[\w-]+", spelled))
    return {n.replace("_", "-") for n in names}  # torchrun's two spellings of one option


def test_help_and_readme_name_the_same_options():
    # Every option `dlaunch --help` offers is in the README's option tables, and every option those tables
    # give is accepted (torchrun's --a-b and --a_b count as one).
    readme = (source_dir() / "README.md").read_text()
    documented = set()
    for row in (line for line in readme.splitlines() if line.startswith("| `-")):
        documented |= {n.replace("_", "-") for n in re.findall(r"--[\w-]+", row.split("|")[1])}
    offered = help_options(["--help"])
    assert offered - documented == set(), "in --help, not in the README's tables"
    assert documented - offered == set(), "in the README's tables, not in --help"
    assert help_options(["topo", "--help"]) == {"--help", "--topology-xml", "--format", "--verbose", "--quiet"}
    assert "--format" in help_options(["plan", "--help"])


def test_a_bad_dlaunch_log_is_refused():
    proc = run_dlaunch(["--nproc-per-node", 1, "--no-python", "true"], env={"DLAUNCH_LOG": "bogus"})
    assert proc.returncode == USAGE, describe(proc)
    assert "DLAUNCH_LOG=bogus: not a log level; give trace, debug, info, warn, error, critical or off" in proc.stderr


@pytest.mark.parametrize("method, interval", [("fork", 1), ("spawn", 5)])  # torchrun's defaults too
def test_verbose_reports_every_option_without_effect(tmp_path, method, interval):
    proc = run_dlaunch(["-v", "--start-method", method, "--monitor-interval", interval, "--nproc-per-node", 1,
                        "--no-python", "true"])
    assert proc.returncode == 0, describe(proc)
    assert f"--start-method {method} has no effect" in proc.stderr, describe(proc)
    assert f"--monitor-interval {interval} has no effect" in proc.stderr, describe(proc)


def test_topo_refuses_options_it_would_ignore():
    proc = run_dlaunch(["topo", "--nproc-per-node", 3])
    assert proc.returncode == USAGE, describe(proc)
    assert "topo: '--nproc-per-node' is not an option of dlaunch topo" in proc.stderr


def test_a_nettle_that_cannot_be_loaded_is_named_with_what_to_install(tmp_path):
    # Nettle is opened when a path first proves or hashes (nettle_api.hpp); with a run secret, every message is
    # proved, so the agent opens it at once (not as each joiner's refusal until the rendezvous times out). A
    # libnettle.so.8 without Nettle's functions comes first on the library path.
    fake = tmp_path / "lib" / "libnettle.so.8"
    fake.parent.mkdir()
    assert shutil.which("cc"), "a C compiler is needed to make a broken libnettle.so.8"
    subprocess.run(["cc", "-shared", "-o", fake, "-x", "c", "/dev/null", "-Wl,-soname,libnettle.so.8"], check=True)
    markers = tmp_path / "markers"
    markers.mkdir()
    script = write_script(tmp_path, "marker.py", MARKER_SCRIPT)
    proc = run_dlaunch(["--rdzv-backend", "etcd", "--rdzv-endpoint", "127.0.0.1:1", "--rdzv-id", "job1", "--nnodes",
                        "2", "--nproc-per-node", "1", script, markers],
                       env={"LD_LIBRARY_PATH": str(fake.parent), "DLAUNCH_RDZV_SECRET": "0123456789abcdef0123"})
    assert proc.returncode == LAUNCH_FAILED, describe(proc)
    assert re.search(r"cannot load libnettle\.so\.8: .*lacks nettle_\w+; install Nettle \(apt-get install libnettle8\)",
                     proc.stderr), proc.stderr
    assert list(markers.iterdir()) == [], "a worker was started"
