"""torchrun's c10d form by hand, on this machine: the same command on every "node" (two agents; the first
to bind the endpoint serves the rendezvous, the other joins), fixed and ranged --nnodes with the join
window, and connections that must not change the group: another secret, none, another run id, garbage."""
import socket
import subprocess
import time

import pytest

from conftest import DUMP_ENV, base_env, describe, dlaunch_bin, free_port, load_rank_dumps, source_dir


def c10d(port, nnodes, *extra):
    return [dlaunch_bin(), "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "job7",
            "--nnodes", nnodes, *extra]


def start(args, secret="s3cret"):
    env = base_env({"DLAUNCH_RDZV_SECRET": secret} if secret else None)
    return subprocess.Popen([str(a) for a in args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_for_line(proc_err_path, text, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if text in proc_err_path.read_text():
            return
        time.sleep(0.05)
    pytest.fail(f"no '{text}' within {timeout} s:\n{proc_err_path.read_text()}")


def finish(*procs, timeout=120):
    out = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=timeout)
        finally:
            p.kill()
        out.append((p.returncode, o, e))
    return out


def test_same_command_on_two_nodes_runs_one_world(tmp_path, torch_python):
    """The DDP example, two agents with the very same command line: one world of 4, every rank the same run id."""
    port = free_port()
    args = c10d(port, 2, "--nproc-per-node", 2, str(source_dir() / "examples" / "ddp_allreduce.py"))
    first = start(args)
    time.sleep(0.3)
    second = start(args)
    (rc1, out1, err1), (rc2, out2, err2) = finish(first, second)
    assert rc1 == 0 and rc2 == 0, f"{err1}\n{err2}"
    assert "OK world=4 sum=10" in out1 + out2, f"{out1}\n{out2}\n{err1}"
    assert f"hosting the node rendezvous at 127.0.0.1:{port}" in err1, err1
    assert "2 node(s) assembled; this node is node 0" in err1, err1


def test_ranged_nodes_start_after_the_last_call_with_the_nodes_there(tmp_path):
    """--nnodes 1:3, two agents: once the first is there the host waits last_call_timeout for more, then
    both start as one world of 2 nodes: ranks, world size and node ranks recomputed for the nodes there."""
    port = free_port()
    out = tmp_path / "out"
    out.mkdir()
    args = c10d(port, "1:3", "--rdzv-conf", "last_call_timeout=2", "--nproc-per-node", 1, DUMP_ENV, out)
    first = start(args)
    time.sleep(0.3)
    second = start(args)
    (rc1, _, err1), (rc2, _, err2) = finish(first, second)
    assert rc1 == 0 and rc2 == 0, f"{err1}\n{err2}"
    assert "1 node(s), the least asked for; waiting 2 s more for up to 3" in err1, err1
    dumps = load_rank_dumps(out, 2)
    for rank, d in dumps.items():
        env = d["environ"]
        assert env["WORLD_SIZE"] == "2" and env["GROUP_RANK"] == str(rank), env
        assert env["TORCHELASTIC_RUN_ID"] == "job7" and env["MASTER_ADDR"] == "127.0.0.1", env
    assert dumps[0]["environ"]["MASTER_PORT"] == dumps[1]["environ"]["MASTER_PORT"]


def test_foreign_connections_are_refused_logged_and_change_nothing(tmp_path):
    port = free_port()
    out = tmp_path / "out"
    out.mkdir()
    args = c10d(port, 2, "--nproc-per-node", 1, DUMP_ENV, out)
    host = start(args)
    err_path = tmp_path / "host.err"
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # not a dlaunch node at all
            s.recv(100)
            s.sendall(b"GET / HTTP/1.1\r\n\r\n")
            assert s.recv(200).startswith(b"error "), "garbage must be answered with a refusal"
        refused = [finish(start(args, secret="wrong"))[0], finish(start(args, secret=None))[0]]
        other_job = [a if a != "job7" else "job8" for a in args]
        refused.append(finish(start(other_job))[0])
        joiner = start(args)
        (rc_host, _, err_host), (rc_join, _, err_join) = finish(host, joiner)
    finally:
        host.kill()
    err_path.write_text(err_host)
    for rc, _, err in refused:
        assert rc == 3, err
        assert "the rendezvous host refused this node" in err, err
    assert "wrong secret: DLAUNCH_RDZV_SECRET differs between the nodes" in refused[0][2]
    assert "the other side has no secret" in refused[1][2]
    assert "job 'job8' knocked at job 'job7''s rendezvous" in refused[2][2]
    assert err_host.count("refused a connection from 127.0.0.1") == 4, err_host
    assert rc_host == 0 and rc_join == 0, f"{err_host}\n{err_join}"
    dumps = load_rank_dumps(out, 2)
    assert {d["environ"]["WORLD_SIZE"] for d in dumps.values()} == {"2"}


def test_without_a_secret_the_host_says_anyone_may_join(tmp_path):
    port = free_port()
    args = c10d(port, 2, "--rdzv-conf", "join_timeout=1,is_host=1", "--nproc-per-node", 1, "/bin/true")
    (rc, _, err), = finish(start([*args[:1], "--no-python", *args[1:]], secret=None))
    assert rc == 3, err
    assert "no DLAUNCH_RDZV_SECRET: any process that reaches this port" in err, err
    assert "only 1 of 2 nodes joined within 1 s" in err and "--rdzv-conf join_timeout=SECONDS" in err, err
