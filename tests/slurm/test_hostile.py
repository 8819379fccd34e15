"""Strangers on the group port of a real three-node Slurm job (README, "Security model"; issue 35): one
dlaunch agent per node under srun, --max-restarts 1, a rank that crashes in attempt 0 so that the group
restarts while the strangers are at node 0's group port. From the host (the cluster's bridge, not a node) a
client sends one line of up to 100 MiB, hellos without a valid credential (garbage, a made-up credential,
another user's MUNGE credential) and two waves of 100 silent connections, the second during the restart.
The job keeps its result, the leader holds at most 8 strangers from one address, a stranger learns nothing,
and the refusals are logged with the host's address, once per 10 s. tests/integration/test_hostile_network.py
tries the same against two agents by hand, on loopback."""
import json
import re
import socket
import subprocess
import time

import pytest

from slurmtest import (CLUSTER, ENV, HOSTS, NODES, ended, job_fields, make_outdir, output, reference_result, starts,
                       wait_for, wait_job)
from test_group import submit

STRANGER = "10.77.0.254"  # the host's side of the cluster's bridge (cluster.sh): no node of the job
# dlaunch's default --port-range and its ports per job (launcher/core/include/dlaunch/scheduler.hpp).
PORT_RANGE = (21000, 28999)
STEP_SLOTS = 8
MAX_STRANGERS_PER_ADDRESS = 8  # launcher/group/include/dlaunch/group_channel.hpp
NOT_ADMITTED = {"v": 6, "type": "refused", "reason": "not admitted to this group"}
NOBODY = 65534


def group_port(job, step=0):
    """Node 0's group port in step `step` of `job`: group_port(deterministic_port(job, step)) as
    launcher/core/scheduler.cpp computes it for the default --port-range."""
    low, high = PORT_RANGE
    span = high - low + 1
    master = low + (job % (span // STEP_SLOTS)) * STEP_SLOTS + step % STEP_SLOTS
    return low + (master - low + span // 2) % span


def node_sockets(node, port):
    """(state, local address, remote address) of the TCP sockets on `port` in `node`'s network namespace
    (its /proc/net/tcp; states in hex, 0A listening, 01 established)."""
    out = subprocess.run([CLUSTER, "exec", node, "cat", "/proc/net/tcp"], capture_output=True, text=True,
                         check=True).stdout

    def address(field):
        ip, p = field.split(":")
        return socket.inet_ntoa(int(ip, 16).to_bytes(4, "little")), int(p, 16)
    found = []
    for line in out.splitlines()[1:]:
        fields = line.split()
        local, remote = address(fields[1]), address(fields[2])
        if local[1] == port:
            found.append((fields[3], local[0], remote[0]))
    return found


def held_from(node, port, address):
    """How many connections from `address` the agent on `node` holds open on `port` (accepted or waiting)."""
    return sum(1 for state, _, remote in node_sockets(node, port) if state == "01" and remote == address)


def connect(addr, port, timeout=10):
    s = socket.create_connection((addr, port), timeout=timeout)
    s.settimeout(timeout)
    return s


def read_line(s):
    line = b""
    while not line.endswith(b"\n"):
        chunk = s.recv(4096)
        if not chunk:
            break
        line += chunk
    return line


def closed_by_peer(s, wait=10):
    """Whether the other end closed the connection within `wait` s (a reset when what we sent was left unread)."""
    s.settimeout(wait)
    try:
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                return True
    except ConnectionResetError:
        return True
    except (socket.timeout, BlockingIOError):
        return False


def long_line(addr, port, total=100 << 20):
    """Sends up to `total` bytes without a line end; (bytes the socket took, whether the peer closed it)."""
    sent = 0
    chunk = b"x" * (1 << 20)
    with connect(addr, port) as s:
        try:
            while sent < total:
                sent += s.send(chunk)
        except OSError:
            return sent, True
        s.shutdown(socket.SHUT_WR)
        return sent, closed_by_peer(s)


def bad_hello(addr, port, make_hello):
    """Answers the leader's welcome with make_hello(welcome) (bytes); returns what the leader answered."""
    with connect(addr, port) as s:
        welcome = json.loads(read_line(s))
        assert welcome["type"] == "welcome", welcome
        s.sendall(make_hello(welcome))
        answer = read_line(s)
        assert closed_by_peer(s), "the leader closes a refused connection"
        return answer


def hello(welcome, credential):
    return (json.dumps({"v": welcome["v"], "type": "hello", "run": "job7", "member": 1, "host": "intruder",
                        "credential": credential, "attempt": 0, "nonce": welcome["nonce"]}) + "\n").encode()


def nobodys_credential():
    """A real MUNGE credential, of user nobody: what another user on a node of the cluster can make."""
    return subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "munge", "-s",
                           "job7"], capture_output=True, text=True, check=True).stdout.strip()


def silent(addr, port, count=100):
    """`count` connections that say nothing (open until the caller closes them)."""
    return [connect(addr, port) for _ in range(count)]


@pytest.fixture()
def workdir(stage):
    return make_outdir("hostile-")


def test_strangers_on_the_group_port_change_nothing_in_a_three_node_job(stage, workdir):
    expected = reference_result(stage, workdir, "--steps", "80")
    leader, leader_addr = NODES[0], HOSTS[NODES[0]]
    job = submit(stage, workdir, ["--max-restarts", "1", "--log-dir", f"{workdir}/logs"],
                 ["--steps", "80", "--step-seconds", "0.25", "--save-every", "5", "--crash-at-step", "30",
                  "--crash-rank", "3", "--crash-on-attempt", "0"])
    port = group_port(job)
    sockets = []
    try:
        wait_for(f"job {job}: attempt 0 running", lambda: "start: rank 0 of 6 attempt 0" in output(workdir), 120,
                 diagnose=lambda: (job_fields(job), output(workdir)))
        listening = wait_for(f"{leader}: the group channel listening on port {port}",
                             lambda: [a for s, a, _ in node_sockets(leader, port) if s == "0A"], 30,
                             diagnose=lambda: node_sockets(leader, port))
        assert listening == [leader_addr], "the leader listens on its own address only"

        # (a) One line without an end: cut at the hello's bound, the socket closed long before 100 MiB.
        started = time.monotonic()
        sent, closed = long_line(leader_addr, port)
        line_seconds = time.monotonic() - started
        wait_for("the long line's refusal, said at once, in the job's output",
                 lambda: f"group: refused a connection from {STRANGER}: sent a line longer than 16 KiB"
                 in output(workdir), 15, diagnose=lambda: output(workdir))

        # (c) Hellos that prove nothing: each told only that it is not admitted, then closed.
        answers = [bad_hello(leader_addr, port, lambda w: b'{"v": 6, "type": "hello", "run": \n'),
                   bad_hello(leader_addr, port, lambda w: hello(w, "0" * 64)),
                   bad_hello(leader_addr, port, lambda w: hello(w, nobodys_credential()))]

        # (b) 100 silent connections: the leader keeps at most 8 from one address, then none past 5 s.
        sockets = silent(leader_addr, port)
        wait_for(f"{leader}: at most {MAX_STRANGERS_PER_ADDRESS} connections from {STRANGER} held",
                 lambda: held_from(leader, port, STRANGER) <= MAX_STRANGERS_PER_ADDRESS, 10,
                 diagnose=lambda: held_from(leader, port, STRANGER))
        wait_for(f"{leader}: the silent connections closed after their 5 s",
                 lambda: held_from(leader, port, STRANGER) == 0, 15,
                 diagnose=lambda: held_from(leader, port, STRANGER))
        unheard = [s for s in sockets if not closed_by_peer(s, wait=0.05)]

        # Again while the group restarts: a second wave and a second long line.
        wait_for("rank 3's crash", lambda: "crash: rank 3 at step 30 on attempt 0" in output(workdir), 120,
                 diagnose=lambda: output(workdir))
        sockets += silent(leader_addr, port)
        restarting = "start: rank 0 of 6 attempt 1" not in output(workdir)
        sent_again, closed_again = long_line(leader_addr, port)
        wait_for(f"{leader}: at most {MAX_STRANGERS_PER_ADDRESS} connections from {STRANGER} held in the restart",
                 lambda: held_from(leader, port, STRANGER) <= MAX_STRANGERS_PER_ADDRESS, 10,
                 diagnose=lambda: held_from(leader, port, STRANGER))

        f = wait_job(job, "the job ended", ended)
        attack_seconds = time.monotonic() - started
    finally:
        for s in sockets:
            s.close()
        if not ended(job_fields(job)):
            subprocess.run(["scancel", str(job)], env=ENV)
    text = output(workdir)
    assert f["JobState"] == "COMPLETED" and f["ExitCode"] == "0:0", text
    assert f["Restarts"] == "0", "restarted inside the allocation, never requeued"
    seen = starts(text)
    assert restarting, "the second wave came while the group restarted, before attempt 1 began"
    assert sorted(r for a, _, r, w in seen if a == 1 and w == 6) == list(range(6)), \
        "every node started attempt 1\n" + text
    assert expected in text, f"the resumed run's result differs from an uninterrupted run's ({expected})\n{text}"
    assert " lost" not in text and "Too many open files" not in text, text

    # The leader stopped reading each line at its bound: what it took is what the sockets' buffers hold.
    assert closed and closed_again, "the leader closed the long lines' connections"
    assert sent < (32 << 20) and sent_again < (32 << 20), f"the leader took {sent} and {sent_again} bytes of a line"
    for answer in answers:
        assert json.loads(answer) == NOT_ADMITTED, answer
    assert not unheard, f"{len(unheard)} of the first 100 silent connections still open after 5 s"

    # Refusals carry the host's address and are said once per 10 s from it, then counted.
    said = re.findall(rf"group: refused a connection from {re.escape(STRANGER)}: (.*)", text)
    counted = [int(n) for n in re.findall(rf"group: refused (\d+) more connection\(s\) from {re.escape(STRANGER)} "
                                          r"in the last \d+ s", text)]
    assert said[0] == "sent a line longer than 16 KiB" and len(said) <= 1 + attack_seconds / 10, said
    # Every connection made is accounted for: said, or counted (the last count when the leader stops).
    assert len(said) + sum(counted) == 2 * 100 + 2 + len(answers), (said, counted)
    assert "joined already" not in text and "intruder" not in text, text
    print(f"long lines: {sent} and {sent_again} bytes taken ({line_seconds:.2f} s); refusals said: {said}; "
          f"counted: {counted}")
