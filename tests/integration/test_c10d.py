"""torchrun's c10d form by hand, on this machine: the same command on every "node" (two agents; the first
to bind the endpoint serves the rendezvous, the other joins), fixed and ranged --nnodes with the join
window, connections that must not change the group (another secret, none, another run id, garbage), and
the nodes that met restarting together with --max-restarts."""
import re
import signal
import socket
import time

import pytest

from c10d_agents import CRASH_ONCE, Agent, c10d, finish, host_then
from conftest import (DUMP_ENV, GROUP_FAILED, NOT_READY, USAGE, dlaunch_bin, free_port, load_rank_dumps, run_dlaunch,
                      source_dir, tmpfs)


def test_same_command_on_two_nodes_runs_one_world(tmp_path, torch_python):
    """The DDP example, two agents with the very same command line: one world of 4, every rank the same run id."""
    port = free_port()
    args = c10d(port, 2, "--nproc-per-node", 2, str(source_dir() / "examples" / "ddp_allreduce.py"))
    first = host_then(args, tmp_path)
    second = Agent(args, tmp_path, "second")
    (rc1, out1, err1), (rc2, out2, err2) = finish(first, second)
    assert rc1 == 0 and rc2 == 0, f"{err1}\n{err2}"
    assert "OK world=4 sum=10" in out1 + out2, f"{out1}\n{out2}\n{err1}"
    assert f"hosting the node rendezvous at 127.0.0.1:{port}" in err1, err1
    assert "2 node(s) assembled; this node is node 0" in err1, err1


def test_an_endpoint_naming_this_host_by_its_hostname_is_served_for_every_interface(tmp_path):
    """torchrun's docs say `--rdzv-endpoint $HOST_NODE_ADDR`; on the host itself its name resolves to a
    loopback address (Debian: 127.0.1.1). The agent there serves the rendezvous on every interface and gives
    the workers a non-loopback MASTER_ADDR that the other hosts can reach."""
    port = free_port()
    out = tmp_path / "out"
    out.mkdir()
    args = [dlaunch_bin(), "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{socket.gethostname()}:{port}",
            "--rdzv-id", "job7", "--nnodes", 2, "--nproc-per-node", 1, DUMP_ENV, out]
    first = host_then(args, tmp_path)
    second = Agent(args, tmp_path, "second")
    (rc1, _, err1), (rc2, _, err2) = finish(first, second)
    assert rc1 == 0 and rc2 == 0, f"{err1}\n{err2}"
    master = load_rank_dumps(out, 2)[0]["environ"]["MASTER_ADDR"]
    assert not master.startswith("127."), master
    assert f"hosting the node rendezvous at {master}:{port}" in err1, err1


def test_ranged_nodes_start_after_the_last_call_with_the_nodes_there(tmp_path):
    """--nnodes 1:3, two agents: once the first is there the host waits last_call_timeout for more, then
    both start as one world of 2 nodes: ranks, world size and node ranks recomputed for the nodes there."""
    port = free_port()
    out = tmp_path / "out"
    out.mkdir()
    args = c10d(port, "1:3", "--rdzv-conf", "last_call_timeout=5", "--nproc-per-node", 1, DUMP_ENV, out)
    first = host_then(args, tmp_path)
    second = Agent(args, tmp_path, "second")
    (rc1, _, err1), (rc2, _, err2) = finish(first, second)
    assert rc1 == 0 and rc2 == 0, f"{err1}\n{err2}"
    assert "1 node(s), the least asked for; waiting 5 s more for up to 3" in err1, err1
    dumps = load_rank_dumps(out, 2)
    for rank, d in dumps.items():
        env = d["environ"]
        assert env["WORLD_SIZE"] == "2" and env["GROUP_RANK"] == str(rank), env
        assert env["TORCHELASTIC_RUN_ID"] == "job7" and env["MASTER_ADDR"] == "127.0.0.1", env
        assert "DLAUNCH_RDZV_SECRET" not in env, "the secret is the agents', never the workers'"
    assert dumps[0]["environ"]["MASTER_PORT"] == dumps[1]["environ"]["MASTER_PORT"]


def test_with_max_restarts_the_nodes_that_met_restart_together(tmp_path):
    """--max-restarts 1: rank 3 (on the second node) fails in attempt 0. The agents form a group on the
    rendezvous's port: the host stops its own ranks and both nodes run attempt 1, restart count 1 on every rank."""
    port = free_port()
    script = tmp_path / "crash_once.py"
    script.write_text(CRASH_ONCE)
    args = c10d(port, 2, "--max-restarts", 1, "--grace", 2, "--nproc-per-node", 2, script)
    first = host_then(args, tmp_path)
    second = Agent(args, tmp_path, "second")
    (rc1, out1, err1), (rc2, out2, err2) = finish(first, second)
    assert rc1 == 0 and rc2 == 0, f"{err1}\n{err2}"
    assert "restart: --max-restarts" not in err1 + err2, "applied, not warned about"
    assert f"group: attempt 0: rank 3 on {socket.gethostname()}: exit code 3; stopping every node" in err1, err1
    assert "1 of 1 restarts (--max-restarts) used: attempt 1 on 2 node(s), world size 4" in err1, err1
    done = sorted(line.split("]:", 1)[-1] for line in (out1 + out2).splitlines() if "done in attempt" in line)
    assert done == [f"rank {r} of 4 done in attempt 1" for r in range(4)], f"{out1}\n{out2}"


# Rank 1 (the second node's) fills the file system of its node's log directory, then fails; rank 0 waits to be
# stopped. In a later attempt every rank finishes.
FILL_AND_FAIL = """import os, sys, time
rank, attempt = os.environ["RANK"], os.environ["TORCHELASTIC_RESTART_COUNT"]
if attempt == "0" and rank == "1":
    with open(sys.argv[1], "wb") as f:
        f.write(bytes(16 << 20))
    sys.exit(3)
if attempt == "0":
    time.sleep(60)
print(f"rank {rank} of {os.environ['WORLD_SIZE']} done in attempt {attempt}", flush=True)
"""


@pytest.mark.parametrize("backoff", [0, 1])
def test_a_nodes_log_directory_that_filled_keeps_the_group_from_restarting(tmp_path, backoff):
    """Rank 1 fills the file system of the second node's log directory (a 72 MiB tmpfs: less than the 64 MiB an
    attempt needs is left), then fails. The health check before attempt 1 finds it on that node, the gate
    leaves it out, and a run of --nnodes 2 cannot go on: both nodes end 78 with that cause. --restart-backoff
    0: the member's check (the log directory alone, a quick one) went to the leader with its end of attempt 0
    and the leader answered with its decision and the gate in one write; 1: the check runs after the wait."""
    with tmpfs(tmp_path / "small", "72m") as small:
        port = free_port()
        script = tmp_path / "fill.py"
        script.write_text(FILL_AND_FAIL)
        common = ["--max-restarts", 1, "--restart-backoff", backoff, "--grace", 2, "--nproc-per-node", 1]
        first = host_then(c10d(port, 2, *common, "--log-dir", tmp_path / "logs", script, small / "filler"), tmp_path)
        second = Agent(c10d(port, 2, *common, "--log-dir", small / "logs", script, small / "filler"), tmp_path,
                       "second")
        (rc1, out1, err1), (rc2, out2, err2) = finish(first, second)
    assert rc1 == NOT_READY and rc2 == NOT_READY, f"{err1}\n{err2}"
    assert "1 of 1 restarts (--max-restarts) used: attempt 1 on 2 node(s), world size 2" in err1, err1
    cause = (rf"attempt 1: 127\.0\.0\.1 \(log-dir: {small}/logs/job7_\w+: only 0\.\d GiB free\) failed the health "
             r"check")
    for err in (err1, err2):
        assert re.search(rf"^root cause: {cause} \(restarts used 2 of 1\)$", err, re.M), err
    assert re.search(r"^attempt 1: 127\.0\.0\.1 left out \(health check: log-dir: .*only 0\.\d GiB free\)$", err1,
                     re.M), err1
    assert "done in attempt" not in out1 + out2, "no worker ran in attempt 1"


def test_a_restart_without_a_wait_lets_a_node_whose_check_may_take_long_check_after_the_decision(tmp_path):
    """--restart-backoff 0 with a site check (--health-check) on the second node only: that check may take long,
    so it does not go with the node's end of attempt 0 as the host's quick one does; the leader sends its
    decision at once and the node checks then. Both nodes run attempt 1, and no node is taken for silent."""
    port = free_port()
    script = tmp_path / "crash_once.py"
    script.write_text(CRASH_ONCE)
    checks = tmp_path / "checks"
    check = tmp_path / "check.sh"
    check.write_text(f'#!/bin/sh\necho "attempt $DLAUNCH_ATTEMPT" >> {checks}\n')
    check.chmod(0o755)
    common = ["--max-restarts", 1, "--restart-backoff", 0, "--grace", 2, "--nproc-per-node", 2]
    first = host_then(c10d(port, 2, *common, script), tmp_path)
    second = Agent(c10d(port, 2, "--health-check", check, *common, script), tmp_path, "second")
    (rc1, out1, err1), (rc2, out2, err2) = finish(first, second)
    assert rc1 == 0 and rc2 == 0, f"{err1}\n{err2}"
    assert "no health report" not in err1, err1
    assert checks.read_text().split("\n")[:-1] == ["attempt 0", "attempt 1"], checks.read_text()
    done = sorted(line.split("]:", 1)[-1] for line in (out1 + out2).splitlines() if "done in attempt" in line)
    assert done == [f"rank {r} of 4 done in attempt 1" for r in range(4)], f"{out1}\n{out2}"


def test_nodes_with_different_worker_counts_form_one_world_and_restart_as_one(tmp_path):
    """As torchrun: a host with 1 worker and a node with 3 are one world of 4, ranks node by node; rank 3 (on
    the second node) fails in attempt 0, and attempt 1 is again one world of 4 on both nodes."""
    port = free_port()
    script = tmp_path / "crash_once.py"
    script.write_text(CRASH_ONCE)
    common = ["--max-restarts", 1, "--grace", 2]
    first = host_then(c10d(port, 2, *common, "--nproc-per-node", 1, script), tmp_path)
    second = Agent(c10d(port, 2, *common, "--nproc-per-node", 3, script), tmp_path, "second")
    (rc1, out1, err1), (rc2, out2, err2) = finish(first, second)
    assert rc1 == 0 and rc2 == 0, f"{err1}\n{err2}"
    assert "1 of 1 restarts (--max-restarts) used: attempt 1 on 2 node(s), world size 4" in err1, err1
    assert [line.split("]:", 1)[-1] for line in out1.splitlines() if "done" in line] == ["rank 0 of 4 done in attempt 1"]
    done = sorted(line.split("]:", 1)[-1] for line in out2.splitlines() if "done in attempt" in line)
    assert done == [f"rank {r} of 4 done in attempt 1" for r in (1, 2, 3)], out2


# The host (node rank 0) with a node waiting, then a node whose rank cannot be: its rank, the waiting node's
# (None: any), the options of the form, and the reason every node gives.
RANK_CLASHES = {
    "master": (0, None, lambda port: ["--master", f"127.0.0.1:{port}"],
               "rank 0 is the host's; give each node its own --node-rank from 0 to 2, or none"),
    "static": (1, 1, lambda port: ["--master-addr", "127.0.0.1", "--master-port", port],
               "rank 1 is taken; give each node its own --node-rank from 0 to 2, or none"),
}


@pytest.mark.parametrize("form", RANK_CLASHES)
def test_a_node_of_the_run_that_cannot_join_ends_the_rendezvous_on_every_node_at_once(tmp_path, form):
    """A node asking for a rank it cannot have (the host's with --master; one taken in torchrun's static form):
    it is refused, and the host and the node waiting end at once with the reason, not after their join
    timeout."""
    clash_rank, waiting_rank, where, why = RANK_CLASHES[form]
    args = [dlaunch_bin(), *where(free_port()), "--nnodes", 3, "--nproc-per-node", 1, "--no-python", "/bin/true"]

    def ranked(rank):
        return args if rank is None else [*args[:1], "--node-rank", rank, *args[1:]]

    started = time.monotonic()
    host = host_then(ranked(0), tmp_path)
    waiting = Agent(ranked(waiting_rank), tmp_path, "waiting")
    waiting.wait_for("waiting for the other nodes")
    clash = Agent(ranked(clash_rank), tmp_path, "clash")
    ends = finish(host, waiting, clash, timeout=30)
    assert time.monotonic() - started < 30
    assert [rc for rc, _, _ in ends] == [GROUP_FAILED] * 3, ends
    assert f"dlaunch: rdzv: the node at 127.0.0.1 cannot join: {why}" in ends[0][2], ends[0][2]
    assert f"the rendezvous ended: the node at 127.0.0.1 cannot join: {why}" in ends[1][2], ends[1][2]
    assert f"the rendezvous host refused this node: {why}" in ends[2][2], ends[2][2]


SLOW_TO_STOP = """import os, signal, sys, time
rank, ready = os.environ["RANK"], os.path.join(sys.argv[1], "rank2-ignores-sigterm")
if rank == "3":
    while not os.path.exists(ready):
        time.sleep(0.05)
    sys.exit(3)
if rank == "2":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as a rank stuck in a collective: it takes the whole grace
    open(ready, "w").close()
time.sleep(60)
"""


def test_a_stop_signal_while_the_leader_waits_for_the_others_ends_it_as_a_stop(tmp_path):
    """Rank 3 fails; rank 2 (same node) ignores SIGTERM, so that node takes its --grace to end while the
    leader, its own ranks stopped, waits outside any attempt. A SIGTERM then (Slurm ending the job, a user's
    kill) ends the leader as a stop by signal (it dies of SIGTERM once it said so), at once."""
    port = free_port()
    script = tmp_path / "slow_to_stop.py"
    script.write_text(SLOW_TO_STOP)
    args = c10d(port, 2, "--max-restarts", 1, "--grace", 30, "--nproc-per-node", 2, script, tmp_path)
    first = host_then(args, tmp_path)
    second = Agent(args, tmp_path, "second")
    first.wait_for("stopping every node")
    time.sleep(1)
    first.proc.send_signal(signal.SIGTERM)
    try:
        rc = first.proc.wait(timeout=10)
    finally:
        second.proc.kill()
        finish(first, second)
    err = first.err.read_text()
    assert rc == -signal.SIGTERM, f"{rc}\n{err}"
    assert "group: received SIGTERM between attempts; this node leaves the group" in err, err


def test_a_leader_stopped_by_a_signal_takes_the_members_with_it(tmp_path):
    """^C on node 0 while the group trains: node 0 tells the members it leaves by SIGINT before its connection
    closes; they stop as if they had the ^C themselves (dying of SIGINT), not as after a lost leader (3)."""
    port = free_port()
    script = tmp_path / "train.py"
    script.write_text("import os, sys, time\nopen(os.path.join(sys.argv[1], 'started-' + os.environ['RANK']), 'w')"
                      ".close()\ntime.sleep(60)\n")
    args = c10d(port, 2, "--max-restarts", 1, "--grace", 5, "--nproc-per-node", 1, script, tmp_path)
    first = host_then(args, tmp_path)
    second = Agent(args, tmp_path, "second")
    deadline = time.time() + 30
    while len(list(tmp_path.glob("started-*"))) < 2 and time.time() < deadline:
        time.sleep(0.05)
    first.proc.send_signal(signal.SIGINT)
    (rc1, _, err1), (rc2, _, err2) = finish(first, second, timeout=30)
    assert rc1 == -signal.SIGINT, err1
    assert rc2 == -signal.SIGINT, err2
    assert "lost the leader" not in err2, err2


def test_a_member_says_why_it_stops_with_its_leader(tmp_path):
    """^C on node 0: node 1 had no signal of its own, so it says that its leader left, and on what."""
    first, second = two_nodes_training(tmp_path, "--grace", 5)
    first.proc.send_signal(signal.SIGINT)
    (rc1, _, err1), (rc2, _, err2) = finish(first, second, timeout=30)
    assert rc2 == -signal.SIGINT, err2
    assert "group: the leader on 127.0.0.1 left the group on SIGINT; this node leaves with it" in err2, err2


def test_a_lost_node_is_the_root_cause_of_the_leaders_summary(tmp_path):
    """Node 1's agent is killed: node 0's run fails (fewer nodes than --nnodes MIN), and its summary names
    the lost node as the root cause, as it would name a failed rank."""
    first, second = two_nodes_training(tmp_path, "--heartbeat-timeout", 2)
    second.proc.kill()
    (rc1, _, err1), _ = finish(first, second, timeout=60)
    assert rc1 == GROUP_FAILED, err1
    assert "==================== run job7 failed ====================" in err1, err1
    assert re.search(r"root cause: attempt 0: \S+ lost: ", err1), err1


TRAIN_60_S = ("import os, sys, time\nopen(os.path.join(sys.argv[1], 'started-' + os.environ['RANK']), 'w').close()\n"
              "time.sleep(60)\n")


def two_nodes_training(tmp_path, *extra):
    """Two agents with --max-restarts 1 (and `extra`), once both ranks run TRAIN_60_S: (host, second)."""
    script = tmp_path / "train.py"
    script.write_text(TRAIN_60_S)
    args = c10d(free_port(), 2, "--max-restarts", 1, *extra, "--nproc-per-node", 1, script, tmp_path)
    first = host_then(args, tmp_path)
    second = Agent(args, tmp_path, "second")
    wait_started(tmp_path, 2)
    return first, second


def wait_started(directory, ranks):
    deadline = time.time() + 30
    while len(list(directory.glob("started-*"))) < ranks and time.time() < deadline:
        time.sleep(0.05)


def test_a_node_late_for_a_fixed_size_group_is_told_the_nodes_met(tmp_path):
    """--nnodes 2 with restarts: two agents meet and run as a group on the endpoint's port; a third one
    that comes after is told the run started without it, at once, instead of waiting out its join timeout."""
    port = free_port()
    script = tmp_path / "sleep.py"
    script.write_text("import time\ntime.sleep(8)\n")
    args = c10d(port, 2, "--max-restarts", 1, "--nproc-per-node", 1, script)
    first = host_then(args, tmp_path)
    second = Agent(args, tmp_path, "second")
    first.wait_for("2 node(s) assembled")
    time.sleep(1)
    late = Agent(args, tmp_path, "late")
    (rc3, _, err3), = finish(late, timeout=20)
    (rc1, _, err1), (rc2, _, err2) = finish(first, second)
    assert rc3 == GROUP_FAILED, err3
    assert "the rendezvous is over: its nodes have started and run as a group" in err3, err3
    assert "start every node again with the same command" in err3, err3
    assert rc1 == 0 and rc2 == 0, f"{err1}\n{err2}"


def test_a_host_that_is_not_node_0_leaves_the_port_to_node_0s_group(tmp_path):
    """The host asks for --node-rank 1 (torchrun allows it): the other agent, on the same address, is node 0 and
    its group's leader listens on the rendezvous's port. The host closes its socket there before it answers, so
    the leader can take the port, and the two run as one group."""
    script = tmp_path / "sleep.py"
    script.write_text("import time\ntime.sleep(2)\n")
    args = c10d(free_port(), 2, "--max-restarts", 1, "--nproc-per-node", 1)
    host = host_then([*args, "--node-rank", 1, script], tmp_path)
    second = Agent([*args, script], tmp_path, "second")
    (rc1, _, err1), (rc2, _, err2) = finish(host, second, timeout=60)
    assert "this node is node 1" in err1, err1
    assert "this node asked for rank 1: node 0 (MASTER_ADDR 127.0.0.1) must reach port" in err1, err1
    assert rc1 == 0 and rc2 == 0, f"{err1}\n{err2}"


# A worker that trains until its attempt is stopped (attempt 0), then finishes, naming its place.
TRAIN_UNTIL_STOPPED = """import os, sys, time
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
if attempt == "0":
    open(os.path.join(sys.argv[1], "started-" + os.environ["RANK"]), "w").close()
    time.sleep(60)
print(f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} done in attempt {attempt}", flush=True)
"""


def training(tmp_path, nnodes, max_restarts, nproc, nodes=2):
    """`nodes` agents of --nnodes `nnodes` (the host first) running TRAIN_UNTIL_STOPPED, once every worker of
    attempt 0 trains: the agents' command line, and the agents."""
    port = free_port()
    script = tmp_path / "train.py"
    script.write_text(TRAIN_UNTIL_STOPPED)
    args = c10d(port, nnodes, "--rdzv-conf", "last_call_timeout=1", "--max-restarts", max_restarts, "--grace", 2,
                "--nproc-per-node", nproc, script, tmp_path)
    started = [host_then(args, tmp_path)] + [Agent(args, tmp_path, f"node{i}") for i in range(1, nodes)]
    wait_started(tmp_path, nodes * nproc)
    return args, started


def done_lines(ended):
    """The workers' "rank R of W done in attempt A" lines of every agent, sorted, without their prefixes."""
    return sorted(line.split("]:", 1)[-1] for _, out, _ in ended for line in out.splitlines() if "done in" in line)


def test_a_late_node_joins_a_ranged_run_at_its_next_attempt_and_the_world_grows(tmp_path):
    """torchrun's c10d scale-up: two nodes of --nnodes 2:3 run; a third comes and waits at node 0's
    rendezvous, which stays open; the leader stops the group and the three meet again there: attempt 1 runs
    on 3 nodes, world size 6, with --max-restarts 0 (a membership change is no retry)."""
    args, (first, second) = training(tmp_path, "2:3", 0, 2)
    late = Agent(args, tmp_path, "late")
    ended = finish(first, second, late)
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    said = "".join(e for _, _, e in ended)
    assert "the rendezvous stays open while the run lasts" in ended[0][2], ended[0][2]
    assert "waits to join the run at its next attempt (1 waiting)" in ended[0][2], ended[0][2]
    assert "is under way: this node waits to be taken at its next attempt" in ended[2][2], ended[2][2]
    assert ("attempt 0: 1 node waits to join, below --nnodes MAX 3 (a membership change: no restart of "
            "--max-restarts used): the nodes meet again, attempt 1 on 3 node(s)") in said, said
    assert "3 node(s) met again for attempt 1 (0 still waiting)" in ended[0][2], ended[0][2]
    done = done_lines(ended)
    assert done == [f"rank {r} of 6 done in attempt 1" for r in range(6)], done
    assert "this is node 2 of 3 in attempt 1, taken into the run under way" in ended[2][2], ended[2][2]


def test_a_node_alone_leads_a_group_of_one_so_that_a_late_node_can_join_it(tmp_path):
    """--nnodes 1:2 started on one node: it runs alone (world 1) yet as a group, so that a second node, coming
    later, joins it at once: attempt 1 runs on both (world 2)."""
    args, (first,) = training(tmp_path, "1:2", 0, 1, nodes=1)
    late = Agent(args, tmp_path, "late")
    ended = finish(first, late)
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    assert "1 node(s) assembled; this node is node 0" in ended[0][2], ended[0][2]
    done = done_lines(ended)
    assert done == [f"rank {r} of 2 done in attempt 1" for r in range(2)], done


def test_a_spare_waiting_at_node_0_takes_the_place_of_a_lost_member(tmp_path):
    """--nnodes 1:2 with a third node held as a spare: kill -9 of the member that does not lead; the leader
    finds the attempt failed with a node waiting, and the spare and node 0 meet again: attempt 1 runs on
    them (world 2), using the one restart of --max-restarts 1."""
    args, (first, second) = training(tmp_path, "1:2", 1, 1)
    spare = Agent(args, tmp_path, "spare")
    spare.wait_for("this node waits to be taken")
    second.proc.kill()
    ended = finish(first, spare)
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    said = "".join(e for _, _, e in ended)
    assert "1 node waits to join: the nodes meet again, attempt 1 on 2 node(s)" in said, said
    assert "2 node(s) met again for attempt 1 (0 still waiting)" in ended[0][2], ended[0][2]
    done = done_lines(ended)
    assert done == [f"rank {r} of 2 done in attempt 1" for r in range(2)], done


def take_a_place_and_leave(port):
    """A stand-in node without a secret: says its hello at node 0's open rendezvous, waits to be taken, reads
    its place in the next attempt, and leaves without joining the group."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        lines = conn.makefile("r")
        nonce = lines.readline().split()[1]
        conn.sendall(f"dlaunch-rdzv 7 job7 env=0 -1 127.0.0.1 2 - -1 fake{nonce[:8]} -\n".encode())
        said = [lines.readline()]
        while said[-1].startswith("wait "):
            said.append(lines.readline())
        assert said[0].startswith("wait 1 ") and said[-1].startswith("ok "), said
        return said[-1]


def test_a_node_taken_that_never_joins_the_group_is_left_out_and_the_run_goes_on(tmp_path):
    """A node takes its place at node 0's open rendezvous, then never joins the group (it died, say): once the
    group's join window is over the leader counts it lost, and the health gate leaves it out as --nnodes MIN
    allows. The two real nodes run the next attempt (world 4) instead of ending the run."""
    port = free_port()
    script = tmp_path / "train.py"
    script.write_text(TRAIN_UNTIL_STOPPED)
    args = c10d(port, "2:3", "--rdzv-conf", "last_call_timeout=1,join_timeout=10", "--max-restarts", 0, "--grace",
                2, "--nproc-per-node", 2, script, tmp_path)
    first = host_then(args, tmp_path, secret=None)
    second = Agent(args, tmp_path, "second", secret=None)
    wait_started(tmp_path, 4)
    place = take_a_place_and_leave(port)
    assert " 2 3 127.0.0.1 " in place, "node 2 of 3"
    assert place.split()[5] == "-", f"under torchrun's contract no node is told the others' addresses: {place}"
    ended = finish(first, second)
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    assert "group: the agent on 127.0.0.1 did not join the group within 10 s" in ended[0][2], ended[0][2]
    assert done_lines(ended) == [f"rank {r} of 4 done in attempt 1" for r in range(4)], done_lines(ended)


def a_spare_at_max(tmp_path, seconds):
    """Two agents of --nnodes 1:2 whose workers sleep `seconds`, and a third held at node 0's rendezvous."""
    port = free_port()
    script = tmp_path / "sleep.py"
    script.write_text(f"import time\ntime.sleep({seconds})\n")
    args = c10d(port, "1:2", "--rdzv-conf", "last_call_timeout=1", "--nproc-per-node", 1, script)
    first = host_then(args, tmp_path)
    second = Agent(args, tmp_path, "second")
    first.wait_for("2 node(s) assembled")
    spare = Agent(args, tmp_path, "spare")
    spare.wait_for("this node waits to be taken")
    return first, second, spare


def test_at_max_a_late_node_waits_as_a_spare_and_is_told_when_the_run_ends(tmp_path):
    """--nnodes 1:2 with both nodes there: a third is held at node 0's rendezvous as a spare (told to wait,
    never counted towards a restart) and, when the run ends, told so: it ends with exit 69, the run with 0."""
    first, second, spare = a_spare_at_max(tmp_path, 6)
    (rc1, _, err1), (rc2, _, err2), (rc3, _, err3) = finish(first, second, spare)
    assert rc1 == 0 and rc2 == 0, f"{err1}\n{err2}"
    assert "meet again" not in err1 + err2, err1
    assert rc3 == GROUP_FAILED, err3
    assert "the rendezvous host refused this node: the run ended" in err3, err3


def test_a_node_waiting_at_node_0_ends_at_once_when_node_0_is_lost(tmp_path):
    """kill -9 of node 0 while a spare waits at its rendezvous: the spare does not try to reach the dead
    endpoint until its join timeout (600 s by default); it ends at once with exit 69, naming node 0."""
    first, second, spare = a_spare_at_max(tmp_path, 60)
    first.proc.kill()
    (rc3, _, err3), = finish(spare, timeout=20)
    finish(second)
    assert rc3 == GROUP_FAILED, err3
    assert "ended or lost its node 0 while this node waited to join it" in err3, err3


def test_without_restarts_a_node_late_for_the_rendezvous_is_told_at_once_too(tmp_path):
    """Without --max-restarts nothing else listens on the endpoint once the nodes met; the host still
    answers there for the rest of the run, so a late node is told at once instead of hosting a rendezvous of
    its own and waiting out its join timeout (600 s by default)."""
    port = free_port()
    script = tmp_path / "sleep.py"
    script.write_text("import time\ntime.sleep(6)\n")
    args = c10d(port, 2, "--nproc-per-node", 1, script)
    first = host_then(args, tmp_path)
    second = Agent(args, tmp_path, "second")
    first.wait_for("2 node(s) assembled")
    late = Agent(args, tmp_path, "late")
    (rc3, _, err3), = finish(late, timeout=20)
    (rc1, _, err1), (rc2, _, err2) = finish(first, second)
    assert rc3 == GROUP_FAILED, err3
    assert "the rendezvous is over: its nodes have started" in err3, err3
    assert rc1 == 0 and rc2 == 0, f"{err1}\n{err2}"


def test_foreign_connections_are_refused_logged_and_change_nothing(tmp_path):
    port = free_port()
    out = tmp_path / "out"
    out.mkdir()
    args = c10d(port, 2, "--nproc-per-node", 1, DUMP_ENV, out)
    host = host_then(args, tmp_path)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # not a dlaunch node at all
            s.recv(100)
            s.sendall(b"GET / HTTP/1.1\r\n\r\n")
            assert s.recv(200).startswith(b"error "), "garbage must be answered with a refusal"
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:  # a connection that says nothing
            s.recv(100)
            assert s.recv(100) == b"", "dropped once its time to speak is over"
        refused = [finish(Agent(args, tmp_path, "wrong", secret="the-wrong-secret-for-this-run"))[0],
                   finish(Agent(args, tmp_path, "none", secret=None))[0]]
        other_job = [a if a != "job7" else "job8" for a in args]
        refused.append(finish(Agent(other_job, tmp_path, "other"))[0])
        joiner = Agent(args, tmp_path, "joiner")
        (rc_host, _, err_host), (rc_join, _, err_join) = finish(host, joiner)
    finally:
        host.proc.kill()
    for rc, _, err in refused:
        assert rc == GROUP_FAILED, err
        assert "the rendezvous host refused this node" in err, err
    assert "wrong secret: DLAUNCH_RDZV_SECRET differs between the nodes" in refused[0][2]
    assert "the other side has no secret" in refused[1][2]
    assert "this node is of job 'job8', the host of job 'job7'; give every node the same --rdzv-id" in refused[2][2]
    # Five refusals from one address: said once per 10 s with the address, the rest counted (said by the end).
    said = err_host.count("rdzv: refused a connection from 127.0.0.1: ")
    counted = sum(int(n) for n in re.findall(r"refused (\d+) more connection\(s\) from 127\.0\.0\.1", err_host))
    assert said >= 1 and said + counted == 5, err_host
    assert rc_host == 0 and rc_join == 0, f"{err_host}\n{err_join}"
    dumps = load_rank_dumps(out, 2)
    assert {d["environ"]["WORLD_SIZE"] for d in dumps.values()} == {"2"}


def test_without_a_secret_the_host_says_anyone_may_join(tmp_path):
    port = free_port()
    args = c10d(port, 2, "--rdzv-conf", "join_timeout=1,is_host=1", "--nproc-per-node", 1, "/bin/true")
    (rc, _, err), = finish(Agent([*args[:1], "--no-python", *args[1:]], tmp_path, "alone", secret=None))
    assert rc == GROUP_FAILED, err
    assert "no DLAUNCH_RDZV_SECRET: any process that reaches this port" in err, err
    assert "only 1 of 2 nodes joined within 1 s" in err, err
    assert "start dlaunch with the same command on the other nodes, or raise --rdzv-conf join_timeout" in err, err


def test_a_short_secret_is_refused_before_anything_starts(tmp_path):
    port = free_port()
    args = c10d(port, 2, "--nproc-per-node", 1, "--no-python", "/bin/true")
    (rc, out, err), = finish(Agent(args, tmp_path, "short", secret="hunter2"))
    assert rc == USAGE, err
    assert "DLAUNCH_RDZV_SECRET has 7 characters; use at least 16" in err, err
    assert "openssl rand -hex 16" in err, err
    assert "rdzv:" not in err, "refused before the rendezvous"


@pytest.mark.parametrize("endpoint", ["a b", "no.such.host.invalid:29400"])
def test_an_endpoint_whose_host_does_not_resolve_is_a_bad_value(tmp_path, endpoint):
    args = [dlaunch_bin(), "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "job7", "--nnodes", 2,
            "--nproc-per-node", 1, "--no-python", "/bin/true"]
    (rc, out, err), = finish(Agent(args, tmp_path, "unresolved"))
    assert rc == USAGE, err
    host = endpoint.split(":")[0]
    assert f"dlaunch: rdzv: --rdzv-endpoint '{endpoint}': host '{host}' has no IPv4 address here; give the hosting " \
           "node's name or IP address" in err, err


def test_a_node_that_leaves_before_the_start_is_not_counted(tmp_path):
    """A joiner killed while it waits for the others is dropped; the node that comes next takes its place."""
    port = free_port()
    out = tmp_path / "out"
    out.mkdir()
    args = c10d(port, 3, "--nproc-per-node", 1, DUMP_ENV, out)
    host = host_then(args, tmp_path)
    leaver = Agent(args, tmp_path, "leaver")
    host.wait_for("(2 of 3)")
    leaver.proc.kill()
    leaver.proc.wait()
    second, third = Agent(args, tmp_path, "second"), Agent(args, tmp_path, "third")
    (rc, _, err), (rc2, _, err2), (rc3, _, err3) = finish(host, second, third)
    assert rc == 0 and rc2 == 0 and rc3 == 0, f"{err}\n{err2}\n{err3}"
    assert "rdzv: node at 127.0.0.1 left before the start; waiting for another" in err, err
    assert {d["environ"]["WORLD_SIZE"] for d in load_rank_dumps(out, 3).values()} == {"3"}


@pytest.mark.parametrize("wait", [["--join-timeout", 2], ["--rdzv-conf", "timeout=2"]])
def test_the_static_form_waits_for_its_nodes_and_names_the_fix_when_one_never_comes(tmp_path, wait):
    """torchrun's static form, node 0 of 2 alone: its agent waits for node 1 at the master (--join-timeout, or
    torch's static rendezvous key `timeout`), then ends with exit 69 naming what to start; no worker ever ran
    (they would have waited in torch's rendezvous with nothing said)."""
    port = free_port()
    marker = tmp_path / "ran"
    proc = run_dlaunch(["--nnodes", 2, "--node-rank", 0, "--master-addr", "127.0.0.1", "--master-port", port, *wait,
                        "--nproc-per-node", 1, "--no-python", "touch", marker], timeout=60)
    assert proc.returncode == GROUP_FAILED, proc.stderr
    assert (f"dlaunch: rdzv: only 1 of 2 nodes joined within 2 s; start every node with --nnodes 2, its own "
            f"--node-rank 0..1 and --master-addr 127.0.0.1 --master-port {port}, or raise --join-timeout"
            in proc.stderr), proc.stderr
    assert "has no effect" not in proc.stderr, proc.stderr
    assert not marker.exists()


def test_a_static_node_that_comes_after_the_start_is_told_so_without_waiting_out_its_timeout(tmp_path):
    """Once the static form's nodes met, MASTER_PORT is rank 0's store, which never answers as dlaunch's
    rendezvous (a listener that says nothing stands in for it): a node started late ends in ~10 s, saying the
    run probably started without it, not after its 600 s."""
    with socket.socket() as store:
        store.bind(("127.0.0.1", 0))
        store.listen()
        port = store.getsockname()[1]
        started = time.monotonic()
        proc = run_dlaunch(["--nnodes", 2, "--node-rank", 1, "--master-addr", "127.0.0.1", "--master-port", port,
                            "--nproc-per-node", 1, "--no-python", "/bin/true"], timeout=60)
    assert proc.returncode == GROUP_FAILED, proc.stderr
    assert time.monotonic() - started < 40
    assert (f"accepted the connection but did not answer as dlaunch's rendezvous within 10 s: the other nodes have "
            f"probably started without this one" in proc.stderr), proc.stderr


def test_a_static_node_waits_for_the_master_name_to_resolve_as_torch_does(tmp_path):
    proc = run_dlaunch(["--nnodes", 2, "--node-rank", 1, "--master-addr", "master-0.invalid", "--join-timeout", 1,
                        "--nproc-per-node", 1, "--no-python", "/bin/true"], timeout=60)
    assert proc.returncode == GROUP_FAILED, proc.stderr
    assert "rdzv: --master-addr 'master-0.invalid' does not resolve yet; waiting for it" in proc.stderr
    assert "rdzv: --master-addr 'master-0.invalid' had no IPv4 address here within 1 s" in proc.stderr
