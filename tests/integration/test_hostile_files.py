"""Hostile neighbours (issue 35): another local user in a shared $TMPDIR.

Another user (`nobody`) plants FIFOs and symbolic links under the names dlaunch used to take in $TMPDIR
(dlaunch-watchdog-<pid>, dlaunch-heartbeat-<pid>, dlaunch-ports/PORT): dlaunch must use none of them. Its
FIFOs are in a private directory of its own; torchrun's watchdog signals only the ranks and their
descendants; a c10d host stopped during the rendezvous says so and leaves no port lock behind.

Needs root (CI runs as root) to act as `nobody`; without it those tests say SKIP.
"""
import json
import os
import pwd
import re
import signal
import shutil
import subprocess
import tempfile

import pytest

from conftest import base_env, describe, dlaunch_bin, free_port, run_dlaunch, wait_for, write_script

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="SKIP: needs root (another user, a tmpfs); CI runs as root")


@pytest.fixture
def shared_tmpdir():
    """A $TMPDIR shared by every user (mode 1777, as /tmp), under /tmp so that `nobody` can reach it."""
    path = tempfile.mkdtemp(prefix="dlaunch-test-shared-", dir="/tmp")
    os.chmod(path, 0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def as_nobody():
    user = pwd.getpwnam("nobody")
    os.setgroups([])
    os.setgid(user.pw_gid)
    os.setuid(user.pw_uid)


def attacker(code, *args):
    """A Python program run by another local user (nobody), in the background."""
    return subprocess.Popen(["/usr/bin/python3", "-c", code, *map(str, args)], preexec_fn=as_nobody,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


class HeldStart:
    """dlaunch whose pid is known before it starts: a shell that waits for a line, then execs dlaunch (same
    pid), as an attacker who guesses the next pids would see it."""

    def __init__(self, args, env, tmp_path):
        self.err_path, self.out_path = tmp_path / "dlaunch.err", tmp_path / "dlaunch.out"
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(["sh", "-c", 'read _ && exec "$0" "$@"', dlaunch_bin(), *map(str, args)],
                                         env=base_env(env), stdin=subprocess.PIPE, stdout=out, stderr=err)

    def go(self):
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.close()

    def finish(self, timeout=60):
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode, self.out_path.read_text(), self.err_path.read_text()


# Makes a FIFO every user may write to (umask aside), then writes what the agent would obey into it as soon
# as a reader opens it.
PLANT_FIFO = """
import os, sys, time
path, lines, every = sys.argv[1], sys.argv[2].split("|"), float(sys.argv[3])
os.mkfifo(path)
os.chmod(path, 0o666)
fd = os.open(path, os.O_WRONLY)  # blocks until the agent opens it: on a safe agent, never
for line in lines * (1 if every <= 0 else 200):  # beats for a minute: longer than any run here
    os.write(fd, (line + "\\n").encode())
    time.sleep(max(every, 0))
"""


@needs_root
def test_another_users_watchdog_fifo_is_not_used_and_kills_nothing(tmp_path, shared_tmpdir):
    """Finding 2: nobody plants $TMPDIR/dlaunch-watchdog-<agent pid> with a request to SIGKILL a process
    outside the job; before, the agent reused that FIFO and killed it."""
    victim = subprocess.Popen(["sleep", "60"])
    script = write_script(tmp_path, "steps.py", "import time\ntime.sleep(3)\nprint('done')\n")
    agent = HeldStart(["--nproc-per-node", 1, script], {"TMPDIR": shared_tmpdir, "TORCHELASTIC_ENABLE_FILE_TIMER": "1"},
                      tmp_path)
    request = json.dumps({"version": 1, "pid": victim.pid, "scope_id": "x", "expiration_time": 1, "signal": 9})
    planted = attacker(PLANT_FIFO, f"{shared_tmpdir}/dlaunch-watchdog-{agent.proc.pid}", request, 0)
    try:
        wait_for(lambda: os.path.exists(f"{shared_tmpdir}/dlaunch-watchdog-{agent.proc.pid}"), what="the planted FIFO")
        agent.go()
        rc, out, err = agent.finish()
        assert rc == 0, err
        assert victim.poll() is None, f"the agent killed a process outside its job:\n{err}"
        assert "done" in out, out
        assert not [p for p in os.listdir(shared_tmpdir) if p.startswith("dlaunch-private-")], "private dir removed"
    finally:
        for p in (planted, victim):
            p.kill()
            p.wait()


@needs_root
def test_a_request_naming_a_pid_outside_the_ranks_is_refused_and_said(tmp_path):
    """Finding 2: the watchdog signals only its ranks and their descendants, whoever writes into its FIFO."""
    victim = subprocess.Popen(["sleep", "60"])
    script = write_script(tmp_path, "forge.py", f"""
        import json, os, subprocess, time
        def request(pid, signo):
            with open(os.environ["TORCHELASTIC_TIMER_FILE"], "w") as fifo:
                fifo.write(json.dumps({{"version": 1, "pid": pid, "scope_id": "s", "expiration_time": 1,
                                        "signal": signo}}) + "\\n")
        child = subprocess.Popen(["sleep", "30"])
        request({victim.pid}, 9)      # not ours: refused
        request(child.pid, 15)        # the rank's own child: served
        print("child", child.wait(timeout=20), flush=True)
        time.sleep(0.5)
    """)
    try:
        proc = run_dlaunch(["--nproc-per-node", 1, script], env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1"})
        assert proc.returncode == 0, describe(proc)
        assert victim.poll() is None, f"the agent signalled a process outside its job:\n{proc.stderr}"
        assert f"watchdog: pid {victim.pid}: not a rank of this node nor a descendant of one" in proc.stderr, \
            describe(proc)
        assert "[0]:child -15" in proc.stdout, describe(proc)
    finally:
        victim.kill()
        victim.wait()


@needs_root
def test_forged_heartbeats_from_another_user_do_not_hide_a_hang(tmp_path, shared_tmpdir):
    """Finding 3: nobody plants $TMPDIR/dlaunch-heartbeat-<agent pid> and beats for rank 0 every 0.3 s; the
    rank hangs; before, the forged beats kept the run 'alive' until the rank gave up (exit 0)."""
    script = write_script(tmp_path, "hang.py", "import time\ntime.sleep(25)\n")
    agent = HeldStart(["--nproc-per-node", 1, "--hang-timeout", 3, script], {"TMPDIR": shared_tmpdir}, tmp_path)
    planted = attacker(PLANT_FIFO, f"{shared_tmpdir}/dlaunch-heartbeat-{agent.proc.pid}", "beat 0 planted-by-nobody", 0.3)
    try:
        wait_for(lambda: os.path.exists(f"{shared_tmpdir}/dlaunch-heartbeat-{agent.proc.pid}"), what="planted FIFO")
        agent.go()
        rc, out, err = agent.finish()
        assert rc == 124, f"the hang was not found (forged heartbeats?):\n{err}"
        assert "planted-by-nobody" not in err, err
    finally:
        planted.kill()
        planted.wait()


# Symbolic links named after every port the kernel may hand out, in the old shared lock directory, all to
# one file the attacker wants root to create.
PLANT_PORT_LINKS = """
import os, sys
shared, target = sys.argv[1], sys.argv[2]
os.mkdir(shared + "/dlaunch-ports")
os.chmod(shared + "/dlaunch-ports", 0o1777)
low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
for port in range(low, high + 1):
    os.symlink(target, f"{shared}/dlaunch-ports/{port}")
"""


@needs_root
def test_port_locks_never_follow_another_users_symlinks(tmp_path, shared_tmpdir):
    """Finding 8: before, root's agent opened $TMPDIR/dlaunch-ports/PORT with O_CREAT through the link."""
    target = f"{shared_tmpdir}/made-by-root"
    planted = attacker(PLANT_PORT_LINKS, shared_tmpdir, target)
    assert planted.wait(timeout=60) == 0, planted.stderr.read()
    proc = run_dlaunch(["--nproc-per-node", 1, "--no-python", "true"], env={"TMPDIR": shared_tmpdir})
    assert proc.returncode == 0, describe(proc)
    assert not os.path.lexists(target), "a file was created through another user's symbolic link"
    mine = f"{shared_tmpdir}/dlaunch-ports-{os.geteuid()}"
    assert os.stat(mine).st_mode & 0o7777 == 0o700 and os.listdir(mine) == [], "a private, emptied lock directory"


@needs_root
def test_a_port_lock_directory_another_user_made_is_refused(tmp_path, shared_tmpdir):
    planted = attacker("import os, sys; os.mkdir(sys.argv[1], 0o700)", f"{shared_tmpdir}/dlaunch-ports-{os.geteuid()}")
    assert planted.wait(timeout=30) == 0, planted.stderr.read()
    proc = run_dlaunch(["--nproc-per-node", 1, "--no-python", "true"], env={"TMPDIR": shared_tmpdir})
    assert proc.returncode == 71, describe(proc)
    assert re.search(r"dlaunch: launch: master port: \S+/dlaunch-ports-0 is owned by uid \d+, not 0", proc.stderr), \
        describe(proc)


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGINT])
def test_a_c10d_host_stopped_during_the_rendezvous_says_so_and_leaves_no_files(tmp_path, signo):
    """Finding 8: stopped while it waits for the other node, the host removes its port lock and its private
    directory, says it stopped, and dies of the signal."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    port = free_port()
    err_path = tmp_path / "host.err"
    with open(err_path, "w") as err:
        host = subprocess.Popen([dlaunch_bin(), "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                                 "--rdzv-id", "stop", "--nnodes", "2", "--no-python", "true"],
                                env=base_env({"TMPDIR": str(tmp), "DLAUNCH_RDZV_SECRET": "s3cret-of-this-test"}),
                                stdout=subprocess.DEVNULL, stderr=err, text=True)
    try:
        wait_for(lambda: "waiting for 1 more node" in err_path.read_text() or host.poll() is not None, timeout=30,
                 what="the rendezvous")
        assert host.poll() is None, err_path.read_text()
        assert os.listdir(tmp / f"dlaunch-ports-{os.geteuid()}"), "the host reserved its master port"
        host.send_signal(signo)
        host.wait(timeout=20)
    finally:
        host.kill()
        host.wait()
    err = err_path.read_text()
    assert host.returncode == -signo, err
    assert f"dlaunch: stop: {signal.Signals(signo).name}: received while no worker runs" in err, err
    assert os.listdir(tmp / f"dlaunch-ports-{os.geteuid()}") == [], "the port lock is removed"
    assert not list(tmp.glob("dlaunch-private-*")), "the private directory is removed"
