"""`dlaunch doctor`: passes on this machine, says "not present" (never "ok") for hardware that is not here,
and fails with the fix named for each broken case: a missing helper, a port in use, an unwritable or absent
log directory, an absent interpreter, a plugstack.conf that does not list the plugin."""
import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

from conftest import NOT_READY, USAGE, base_env, describe, dlaunch_bin, gpu_count, run_dlaunch

NO_SLURM = {"SLURM_CONF": "/nonexistent/slurm.conf"}  # this machine's own Slurm, if any, stays out of it


def doctor(*args, env=None, binary=None):
    """Runs `dlaunch doctor --format json ARGS`: the process, the report, its checks by name."""
    cmd = [str(binary or dlaunch_bin()), "doctor", "--format", "json", *map(str, args)]
    proc = subprocess.run(cmd, env=base_env({**NO_SLURM, **(env or {})}), capture_output=True, text=True,
                          timeout=120)
    report = json.loads(proc.stdout)
    return proc, report, {c["name"]: c for c in report["checks"]}


def test_this_machine_is_ready_and_absent_hardware_is_not_present():
    proc, report, checks = doctor()
    assert proc.returncode == 0 and report["ready"] is True, describe(proc)
    assert list(checks) == ["topology", "cpuset", "gpus", "ib-ports", "helpers", "spank-plugin", "pmix", "srun-mpi",
                            "mpi-launchers", "nccl", "ports", "log-dir", "python"], checks
    assert all(c["verdict"] in ("ok", "not present", "warn") for c in report["checks"]), report
    assert checks["gpus"]["verdict"] == ("ok" if gpu_count() else "not present"), checks["gpus"]
    has_rdma = Path("/sys/class/infiniband").is_dir() and any(Path("/sys/class/infiniband").iterdir())
    assert has_rdma or checks["ib-ports"]["verdict"] == "not present", checks["ib-ports"]
    assert checks["spank-plugin"]["verdict"] == "not present" and checks["srun-mpi"]["verdict"] == "not present"
    launchers = checks["mpi-launchers"]
    assert launchers["verdict"] == "ok", launchers
    assert "mpirun: Open MPI " in launchers["detail"] and "mpiexec.hydra: Hydra " in launchers["detail"], launchers
    assert checks["python"]["detail"].startswith(os.environ["PYTHON_EXEC"]) and ", torch " in checks["python"]["detail"]
    text = run_dlaunch(["doctor"], env=NO_SLURM, timeout=120)
    assert text.returncode == 0 and text.stdout.splitlines()[-1].startswith("ready"), describe(text)
    assert "  not present  gpus " in text.stdout or gpu_count(), text.stdout


def test_a_dlaunch_without_its_helpers_fails_naming_them(tmp_path):
    lonely = tmp_path / "bin" / "dlaunch"
    lonely.parent.mkdir()
    shutil.copy(os.environ["DLAUNCH_BIN"], lonely)
    proc, report, checks = doctor(binary=lonely)
    assert proc.returncode == NOT_READY and report["ready"] is False, proc.stdout + proc.stderr
    helpers = checks["helpers"]
    assert helpers["verdict"] == "FAIL" and helpers["detail"] == (
        f"missing in {tmp_path}/libexec/dlaunch: python/sitecustomize.py, python/dlaunch_heartbeat.py, "
        "dlaunch-python, dlaunch-watch"), helpers
    assert helpers["fix"].startswith("reinstall dlaunch"), helpers


def test_a_port_in_use_fails_naming_it():
    with socket.socket() as busy:
        busy.bind(("", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc, _, checks = doctor("--master-port", port)
    assert proc.returncode == NOT_READY, describe(proc)
    assert checks["ports"]["verdict"] == "FAIL", checks["ports"]
    assert f"in use: {port}" in checks["ports"]["detail"] and "--master-port" in checks["ports"]["fix"]


def test_the_c10d_endpoints_default_port_is_checked_too():
    # Outside Slurm the ports are --master-port, its group port, and c10d's 29400 (--rdzv-endpoint HOST).
    proc, _, checks = doctor("--master-port", 29500)
    assert "29400" in checks["ports"]["detail"], checks["ports"]
    with socket.socket() as busy:
        try:
            busy.bind(("", 29400))
            busy.listen()
        except OSError:
            pass  # another process holds it: in use all the same
        proc, _, checks = doctor("--master-port", 29500)
    assert proc.returncode == NOT_READY, describe(proc)
    assert "in use: 29400" in checks["ports"]["detail"] and "--rdzv-endpoint" in checks["ports"]["fix"], checks["ports"]


def test_an_unwritable_log_dir_fails_naming_it(tmp_path):
    proc, _, checks = doctor("--log-dir", "/proc")  # not even root can create a file there
    assert proc.returncode == NOT_READY, describe(proc)
    assert checks["log-dir"]["verdict"] == "FAIL" and checks["log-dir"]["detail"].startswith("/proc: cannot create")
    proc, _, checks = doctor("--log-dir", tmp_path / "absent")
    assert checks["log-dir"]["detail"] == f"{tmp_path}/absent: does not exist", checks["log-dir"]
    assert "--log-dir" in checks["log-dir"]["fix"]
    (tmp_path / "a_file").write_text("")
    proc, _, checks = doctor("--log-dir", tmp_path / "a_file")
    assert checks["log-dir"]["detail"] == f"{tmp_path}/a_file: not a directory", checks["log-dir"]


def test_a_python_exec_that_is_not_there_fails_saying_so(tmp_path):
    proc, _, checks = doctor(env={"PYTHON_EXEC": str(tmp_path / "absent")})
    assert proc.returncode == NOT_READY, describe(proc)
    assert checks["python"]["detail"] == f"{tmp_path}/absent: does not exist", checks["python"]
    proc, _, checks = doctor(env={"PYTHON_EXEC": str(tmp_path)})
    assert checks["python"]["detail"] == f"{tmp_path}: not a regular file", checks["python"]


def test_a_plugstack_without_the_plugin_fails_naming_the_package(tmp_path):
    (tmp_path / "plugstack.conf").write_text("optional /usr/lib/other/spank_other.so\n")
    (tmp_path / "slurm.conf").write_text(f"ClusterName=x\nPlugStackConfig={tmp_path}/plugstack.conf\n")
    proc, _, checks = doctor(env={"SLURM_CONF": str(tmp_path / "slurm.conf")})
    assert proc.returncode == NOT_READY, describe(proc)
    plugin = checks["spank-plugin"]
    assert plugin["verdict"] == "FAIL" and plugin["detail"] == f"{tmp_path}/plugstack.conf does not list spank_dlaunch.so"
    assert "dlaunch-slurm" in plugin["fix"], plugin


def test_bad_options_are_usage_errors():
    proc = run_dlaunch(["doctor", "--format", "yaml"])
    assert proc.returncode == USAGE and "--format" in proc.stderr, describe(proc)
    proc = run_dlaunch(["doctor", "--port-range", "9-3"])
    assert proc.returncode == USAGE and "--port-range: '9-3' is not LOW-HIGH" in proc.stderr, describe(proc)


def test_warnings_on_stderr_do_not_fail_the_python_check(tmp_path):
    noisy = tmp_path / "python3"
    noisy.write_text(f"#!/bin/sh\necho 'UserWarning: a warning before anything' >&2\nexec {os.environ['PYTHON_EXEC']} \"$@\"\n")
    noisy.chmod(0o755)
    proc, _, checks = doctor(env={"PYTHON_EXEC": str(noisy)})
    assert checks["python"]["verdict"] == "ok" and ", torch " in checks["python"]["detail"], checks["python"]
    broken = tmp_path / "nothing"
    broken.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named torch' >&2\nexit 1\n")
    broken.chmod(0o755)
    proc, _, checks = doctor(env={"PYTHON_EXEC": str(broken)})
    assert proc.returncode == NOT_READY and checks["python"]["verdict"] == "FAIL", checks["python"]
