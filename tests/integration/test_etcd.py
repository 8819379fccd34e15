"""torchrun's etcd backends by hand, on this machine (docs/etcd.md): agents with the same command line meet
through a real etcd on loopback, run one world, restart together, share one etcd between runs, go on while
etcd restarts, take a node that comes late (scale-up) or keep it as a spare, and leave no keys behind. What
they refuse: no endpoint, TLS options that do not fit, an etcd that does not answer."""
import json
import re
import time

from c10d_agents import CRASH_ONCE, Agent, finish
from conftest import (DUMP_ENV, GROUP_FAILED, NOT_READY, USAGE, dlaunch_bin, free_port, load_rank_dumps, run_dlaunch,
                      source_dir, wait_for)
from etcd_server import etcd  # noqa: F401 (a fixture)


def over_etcd(endpoint, nnodes, *extra, run_id="job7", backend="etcd"):
    return [dlaunch_bin(), "--rdzv-backend", backend, "--rdzv-endpoint", endpoint, "--rdzv-id", run_id, "--nnodes",
            nnodes, *extra]


def agents(args, tmp_path, count, prefix="node"):
    return [Agent(args, tmp_path, f"{prefix}{i}", secret=None) for i in range(count)]


def test_three_nodes_meet_through_etcd_as_one_world_and_leave_no_keys(tmp_path, etcd):
    out = tmp_path / "out"
    out.mkdir()
    ended = finish(*agents(over_etcd(etcd.endpoint, 3, "--nproc-per-node", 2, DUMP_ENV, out), tmp_path, 3))
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    dumps = load_rank_dumps(out, 6)
    envs = [dumps[r]["environ"] for r in range(6)]
    assert {e["WORLD_SIZE"] for e in envs} == {"6"}
    assert {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs} == {(envs[0]["MASTER_ADDR"], envs[0]["MASTER_PORT"])}
    assert [e["GROUP_RANK"] for e in envs] == ["0", "0", "1", "1", "2", "2"]
    assert {e["TORCHELASTIC_RUN_ID"] for e in envs} == {"job7"}
    leads = [err for _, _, err in ended if "3 node(s) met for attempt 0; this node leads them" in err]
    assert len(leads) == 1, "one leader"
    assert etcd.keys("/dlaunch/") == [], "the run's keys are removed when it ends"


def test_the_ddp_example_runs_over_etcd_v2(tmp_path, etcd, torch_python):
    example = str(source_dir() / "examples" / "ddp_allreduce.py")
    ended = finish(*agents(over_etcd(etcd.endpoint, 2, "--nproc-per-node", 2, example, backend="etcd-v2"),
                           tmp_path, 2))
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    assert "OK world=4 sum=10" in "".join(out for _, out, _ in ended)


def test_ranged_nodes_meet_after_the_last_call_with_the_nodes_there(tmp_path, etcd):
    out = tmp_path / "out"
    out.mkdir()
    args = over_etcd(etcd.endpoint, "2:3", "--rdzv-conf", "last_call_timeout=2", "--nproc-per-node", 1, DUMP_ENV, out)
    ended = finish(*agents(args, tmp_path, 2))
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    assert "2 node(s), the least asked for; waiting 2 s more for up to 3" in "".join(e for _, _, e in ended)
    assert {d["environ"]["WORLD_SIZE"] for d in load_rank_dumps(out, 2).values()} == {"2"}




def test_nodes_met_through_etcd_restart_together(tmp_path, etcd):
    script = tmp_path / "crash_once.py"
    script.write_text(CRASH_ONCE)
    args = over_etcd(etcd.endpoint, 2, "--max-restarts", 1, "--grace", 2, "--nproc-per-node", 2, script)
    ended = finish(*agents(args, tmp_path, 2))
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    assert "1 of 1 restarts (--max-restarts) used: attempt 1 on 2 node(s), world size 4" in "".join(
        e for _, _, e in ended)
    done = sorted(line.split("]:", 1)[-1] for _, out, _ in ended for line in out.splitlines() if "done in" in line)
    assert done == [f"rank {r} of 4 done in attempt 1" for r in range(4)]


LAST_ATTEMPT_DONE = """import os, sys, time
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
if attempt == "0":
    open(os.path.join(sys.argv[1], "started." + os.environ["RANK"]), "w").close()
    time.sleep(60)  # training, until its leader's node is lost
print(f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} done in attempt {attempt} at "
      f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
"""


def test_losing_the_leader_the_nodes_left_meet_again_and_go_on(tmp_path, etcd):
    """kill -9 of the leading agent (node 0, the workers' master): the two others see their leader gone,
    meet again through etcd once its lease ends (--heartbeat-timeout 5), one of them leads, and attempt 1 runs
    on 2 nodes (--nnodes 2:3) with world size 4 and a new master port."""
    script = tmp_path / "train.py"
    script.write_text(LAST_ATTEMPT_DONE)
    args = over_etcd(etcd.endpoint, "2:3", "--max-restarts", 1, "--heartbeat-timeout", 5, "--nproc-per-node", 2,
                     script, tmp_path)
    started = agents(args, tmp_path, 3)
    wait_for(lambda: len(list(tmp_path.glob("started.*"))) == 6, what="the 6 workers of attempt 0")
    leader = next(a for a in started if "this node leads them" in a.err.read_text())
    first_port = re.search(r"master 127\.0\.0\.1:(\d+)", leader.err.read_text()).group(1)
    leader.proc.kill()
    others = [a for a in started if a is not leader]
    ended = finish(*others)
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    said = "".join(e for _, _, e in ended)
    assert "group: lost the leader" in said, said
    assert "1 of 1 restarts (--max-restarts) used; the nodes left meet again under a new leader" in said, said
    assert said.count("2 node(s) met for attempt 1; this node leads them") == 1, said
    done = sorted(line.split("]:", 1)[-1] for _, out, _ in ended for line in out.splitlines() if "done in" in line)
    assert [d.split(" at ")[0] for d in done] == [f"rank {r} of 4 done in attempt 1" for r in range(4)], done
    assert len({d.split(" at ")[1] for d in done}) == 1 and not done[0].endswith(f":{first_port}"), done


FAIL_AROUND_A_LOST_LEADER = """import os, sys, time
attempt, rank = os.environ["TORCHELASTIC_RESTART_COUNT"], os.environ["RANK"]
if attempt == "0" and rank == "1":
    sys.exit(3)
if attempt == "1":
    open(os.path.join(sys.argv[1], "started." + rank), "w").close()
if attempt == "2" and rank == "0":
    sys.exit(4)
time.sleep(60)  # stopped by the group
"""


def test_the_summary_after_a_new_leader_tells_the_whole_run(tmp_path, etcd):
    """Attempt 0 fails (rank 1, exit 3) and the group restarts; in attempt 1 the leader is killed and the two
    others meet again under a new leader; attempt 2 fails (rank 0, exit 4) with no restart left. Each node's
    summary tells the whole run as it saw it: its failures from before the new leader too (rank 1's exit 3 is
    on its own node, node 1, which is left)."""
    script = tmp_path / "train.py"
    script.write_text(FAIL_AROUND_A_LOST_LEADER)
    args = over_etcd(etcd.endpoint, "2:3", "--max-restarts", 2, "--heartbeat-timeout", 5, "--restart-backoff", 0,
                     "--grace", 2, "--nproc-per-node", 1, script, tmp_path)
    started = agents(args, tmp_path, 3)
    wait_for(lambda: len(list(tmp_path.glob("started.*"))) == 3, what="the 3 workers of attempt 1")
    leader = next(a for a in started if "this node leads them" in a.err.read_text())
    leader.proc.kill()
    ended = finish(*[a for a in started if a is not leader])
    assert [rc for rc, _, _ in ended] == [4, 4], "\n".join(err for _, _, err in ended)
    assert "the nodes left meet again under a new leader" in ended[0][2], ended[0][2]
    summaries = [err[err.rindex("failures:\n"):] for _, _, err in ended]
    assert all("\n  attempt 0: rank " in s and "\n  attempt 2: rank " in s for s in summaries), summaries
    assert any("\n  attempt 0: rank 1 (local 0): exit code 3 " in s for s in summaries), summaries


def test_a_leader_gone_before_the_group_formed_is_replaced(tmp_path, etcd):
    """The first node takes the leader key with an address nobody reaches (--local-addr 192.0.2.1, a
    documentation address), publishes attempt 0 and is killed before any member joined its group; the two others,
    still trying to reach it, see in etcd that it is gone once its lease ends (--heartbeat-timeout 5), and meet
    again under a new leader: attempt 1 runs as a world of 4."""
    script = tmp_path / "train.py"
    script.write_text(LAST_ATTEMPT_DONE)
    args = over_etcd(etcd.endpoint, "2:3", "--rdzv-conf", "last_call_timeout=2", "--max-restarts", 1,
                     "--heartbeat-timeout", 5, "--nproc-per-node", 2, script, tmp_path)
    bad = Agent([*args[:1], "--local-addr", "192.0.2.1", *args[1:]], tmp_path, "bad", secret=None)
    wait_for(lambda: etcd.keys("/dlaunch/job7/leader"), what="the first node leading")
    others = agents(args, tmp_path, 2)
    bad.wait_for("this is node 0 of 3")
    bad.proc.kill()  # nobody reaches it anyway: it dies before any member joined its group
    ended = finish(*others)
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    said = "".join(e for _, _, e in ended)
    assert "the nodes left meet again under a new leader" in said, said
    assert "attempt 0 failed (192.0.2.1 lost: its lease in etcd ended before the group formed)" in said, said
    done = sorted(line.split("]:", 1)[-1] for _, out, _ in ended for line in out.splitlines() if "done in" in line)
    assert [d.split(" at ")[0] for d in done] == [f"rank {r} of 4 done in attempt 1" for r in range(4)], done


def test_losing_the_leader_without_a_restart_left_ends_the_run(tmp_path, etcd):
    script = tmp_path / "train.py"
    script.write_text(LAST_ATTEMPT_DONE)
    args = over_etcd(etcd.endpoint, "2:3", "--heartbeat-timeout", 5, "--nproc-per-node", 1, script, tmp_path)
    started = agents(args, tmp_path, 3)
    wait_for(lambda: len(list(tmp_path.glob("started.*"))) == 3, what="the 3 workers of attempt 0")
    leader = next(a for a in started if "this node leads them" in a.err.read_text())
    leader.proc.kill()
    ended = finish(*[a for a in started if a is not leader])
    assert all(rc == GROUP_FAILED for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    said = "".join(e for _, _, e in ended)
    assert "root cause: attempt 0: 127.0.0.1 lost: connection closed" in said and "meet again" not in said, said


def test_two_runs_share_one_etcd_by_run_id(tmp_path, etcd):
    outs = {run: tmp_path / run for run in ("a", "b")}
    started = []
    for run, out in outs.items():
        out.mkdir()
        started += agents(over_etcd(etcd.endpoint, 2, "--nproc-per-node", 1, DUMP_ENV, out, run_id=run), tmp_path, 2,
                          prefix=run)
    ended = finish(*started)
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    for run, out in outs.items():
        dumps = load_rank_dumps(out, 2)
        assert {d["environ"]["TORCHELASTIC_RUN_ID"] for d in dumps.values()} == {run}
        assert {d["environ"]["WORLD_SIZE"] for d in dumps.values()} == {"2"}
    assert etcd.keys("/dlaunch/") == []


WAIT_FOR_RELEASE = """import os, sys, time
deadline = time.time() + 300
while not os.path.exists(sys.argv[1]) and time.time() < deadline:
    time.sleep(0.1)
sys.exit(0 if os.path.exists(sys.argv[1]) else 7)
"""


def test_training_goes_on_while_etcd_restarts(tmp_path, etcd):
    """The leases (10 s, --heartbeat-timeout) are renewed every ~3 s: etcd away for 4 s costs nothing. The
    workers run until both agents said their lease is renewed again."""
    script = tmp_path / "wait.py"
    script.write_text(WAIT_FOR_RELEASE)
    release = tmp_path / "release"
    started = agents(over_etcd(etcd.endpoint, 2, "--nproc-per-node", 1, script, release), tmp_path, 2)
    for a in started:
        a.wait_for("this is node")
    etcd.kill()
    time.sleep(4)
    etcd.start()
    for a in started:
        a.wait_for("etcd answers again", timeout=60)
    release.touch()
    ended = finish(*started)
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    said = "".join(e for _, _, e in ended)
    assert "cannot renew this node's lease in etcd" in said and "lease in run job7 expired" not in said, said


def test_a_late_node_joins_at_once_and_the_world_grows_without_using_a_restart(tmp_path, etcd):
    """torchrun's scale-up: two nodes of --nnodes 2:3 run; a third comes; the leader sees it waiting in etcd,
    stops the group, and the three meet again: attempt 1 runs on 3 nodes, world size 6, with --max-restarts 0
    (a membership change is no retry)."""
    script = tmp_path / "train.py"
    script.write_text(LAST_ATTEMPT_DONE)
    args = over_etcd(etcd.endpoint, "2:3", "--rdzv-conf", "last_call_timeout=1", "--max-restarts", 0, "--grace", 2,
                     "--nproc-per-node", 2, script, tmp_path)
    started = agents(args, tmp_path, 2)
    wait_for(lambda: len(list(tmp_path.glob("started.*"))) == 4, what="the 4 workers of attempt 0")
    late = Agent(args, tmp_path, "late", secret=None)
    ended = finish(*started, late)
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    said = "".join(e for _, _, e in ended)
    assert "this node waits to join: the group restarts to take it" in late.err.read_text()
    assert ("attempt 0: 1 node waits to join, below --nnodes MAX 3 (a membership change: no restart of "
            "--max-restarts used): the nodes meet again, attempt 1 on 3 node(s)") in said, said
    assert said.count("3 node(s) met for attempt 1; this node leads them") == 1, said
    done = sorted(line.split("]:", 1)[-1] for _, out, _ in ended for line in out.splitlines() if "done in" in line)
    assert [d.split(" at ")[0] for d in done] == [f"rank {r} of 6 done in attempt 1" for r in range(6)], done
    assert etcd.keys("/dlaunch/") == []


def test_a_spare_waiting_in_etcd_takes_the_place_of_a_lost_member(tmp_path, etcd):
    """--nnodes 2 with a third node waiting as a spare: kill -9 of the member that does not lead leaves one
    node, fewer than MIN, yet the spare makes up MIN: the nodes meet again and attempt 1 runs on the leader and
    the spare (world 2), using the one restart of --max-restarts 1."""
    script = tmp_path / "train.py"
    script.write_text(LAST_ATTEMPT_DONE)
    args = over_etcd(etcd.endpoint, 2, "--max-restarts", 1, "--grace", 2, "--nproc-per-node", 1, script, tmp_path)
    started = agents(args, tmp_path, 2)
    wait_for(lambda: len(list(tmp_path.glob("started.*"))) == 2, what="the 2 workers of attempt 0")
    spare = Agent(args, tmp_path, "spare", secret=None)
    spare.wait_for("this node waits as a spare")
    member = next(a for a in started if "this node leads them" not in a.err.read_text())
    member.proc.kill()
    ended = finish(*[a for a in started if a is not member], spare)
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    said = "".join(e for _, _, e in ended)
    assert "1 of 1 restarts (--max-restarts) used; 1 node waits to join: the nodes meet again, attempt 1 on 2" in said
    done = sorted(line.split("]:", 1)[-1] for _, out, _ in ended for line in out.splitlines() if "done in" in line)
    assert [d.split(" at ")[0] for d in done] == [f"rank {r} of 2 done in attempt 1" for r in range(2)], done


FAIL_ONCE_ON_GO = """import os, sys, time
attempt, rank = os.environ["TORCHELASTIC_RESTART_COUNT"], os.environ["RANK"]
if attempt == "0":
    open(os.path.join(sys.argv[1], "started." + rank), "w").close()
    while not os.path.exists(os.path.join(sys.argv[1], "go")):
        time.sleep(0.05)
    if rank == "1":
        sys.exit(3)
    time.sleep(60)  # stopped by the group
print(f"rank {rank} of {os.environ['WORLD_SIZE']} done in attempt {attempt}", flush=True)
"""


def test_a_spare_waiting_in_etcd_takes_the_place_of_a_node_that_fails_the_health_check(tmp_path, etcd):
    """--nnodes 2 with a third node waiting as a spare: the member fails its worker, then its health check
    before the restart. Rather than refuse the attempt (one node passed, fewer than MIN), the nodes meet again
    without it and with the spare: attempt 2 runs on the leader and the spare, no restart used for the swap
    (--max-restarts 1 was used by the failure). The member ends at once, not ready (78), saying why."""
    script = tmp_path / "train.py"
    script.write_text(FAIL_ONCE_ON_GO)
    args = over_etcd(etcd.endpoint, 2, "--max-restarts", 1, "--grace", 2, "--nproc-per-node", 1, script, tmp_path)
    leader = Agent(args, tmp_path, "leader", secret=None)
    wait_for(lambda: etcd.keys("/dlaunch/job7/leader"), what="the leader's key")
    sick = tmp_path / "sick"
    member = Agent([*args[:-2], "--health-check", f"test ! -e {sick} || {{ echo feels sick; exit 1; }}", *args[-2:]],
                   tmp_path, "member", secret=None)
    wait_for(lambda: len(list(tmp_path.glob("started.*"))) == 2, what="the 2 workers of attempt 0")
    spare = Agent(args, tmp_path, "spare", secret=None)
    spare.wait_for("this node waits as a spare")
    sick.touch()
    (tmp_path / "go").touch()
    ended = finish(leader, member, spare)
    assert [rc for rc, _, _ in ended] == [0, NOT_READY, 0], "\n".join(err for _, _, err in ended)
    said = leader.err.read_text()
    assert ("attempt 1: 127.0.0.1 (site check `test ! -e") in said and ("feels sick) failed the health check; 1 node "
            "waits to join: the nodes meet again without the failing node(s) (no restart of --max-restarts used), "
            "attempt 2 on 2 node(s)") in said, said
    assert said.count("attempt 2 on 2 node(s)") == 1, "the leader says it once"
    left = member.err.read_text()
    assert "feels sick) failed the health check; 1 node waits to join" in left, left
    assert "this node is left behind and its run ends" in left and "went on without this node" not in left, left
    assert re.search(r"attempt 1: 127\.0\.0\.\d left out \(health check: site check .*feels sick", left), left
    done = sorted(line.split("]:", 1)[-1] for _, out, _ in ended for line in out.splitlines() if "done in" in line)
    assert done == [f"rank {r} of 2 done in attempt 2" for r in range(2)], done


def test_a_run_begun_by_one_node_takes_a_second(tmp_path, etcd):
    """--nnodes 1:2: one node alone leads a group of one, so that the second one, coming later, joins it."""
    script = tmp_path / "train.py"
    script.write_text(LAST_ATTEMPT_DONE)
    args = over_etcd(etcd.endpoint, "1:2", "--rdzv-conf", "last_call_timeout=1", "--grace", 2, "--nproc-per-node", 1,
                     script, tmp_path)
    first = Agent(args, tmp_path, "first", secret=None)
    wait_for(lambda: len(list(tmp_path.glob("started.*"))) == 1, what="the worker of attempt 0")
    ended = finish(first, Agent(args, tmp_path, "second", secret=None))
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    done = sorted(line.split("]:", 1)[-1] for _, out, _ in ended for line in out.splitlines() if "done in" in line)
    assert [d.split(" at ")[0] for d in done] == [f"rank {r} of 2 done in attempt 1" for r in range(2)], done


def test_a_node_beyond_max_waits_as_a_spare_and_ends_with_the_run(tmp_path, etcd):
    args = over_etcd(etcd.endpoint, 2, "--nproc-per-node", 1, "--no-python", "sleep", 5)
    started = agents(args, tmp_path, 2)
    for a in started:
        a.wait_for("this is node")
    late = Agent(args, tmp_path, "late", secret=None)
    ended = finish(*started, late)
    assert [rc for rc, _, _ in ended] == [0, 0, GROUP_FAILED], "\n".join(err for _, _, err in ended)
    said = late.err.read_text()
    assert "under way on --nnodes MAX 2 node(s) (attempt 0, led by 127.0.0.1); this node waits as a spare" in said
    assert "rdzv: run job7 in etcd ended (its nodes all left) while this node waited to join" in said
    assert etcd.keys("/dlaunch/") == [], "the last node out removes the run's keys"


def test_a_late_node_started_with_another_range_or_secret_is_refused_and_the_run_goes_on(tmp_path, etcd):
    """Two nodes of --nnodes 2:3 run; a node with --nnodes 2:4, then one with a secret the others lack, come
    late: the leader does not count them as waiting (no restart for them), and each ends at once with exit 69
    saying what differs. A node of an older dlaunch, whose entry says neither, cannot tell itself: the leader
    says once why it is not taken."""
    args = over_etcd(etcd.endpoint, "2:3", "--rdzv-conf", "last_call_timeout=1", "--nproc-per-node", 1, "--no-python",
                     "sleep", 6)
    started = agents(args, tmp_path, 2)
    for a in started:
        a.wait_for("this is node")
    older = {"id": "older:1:0", "addr": "192.0.2.7", "nproc": 1, "role": "default"}
    older_lease = etcd.put_leased("/dlaunch/job7/nodes/older:1:0", json.dumps(older), 60)
    wider = Agent(over_etcd(etcd.endpoint, "2:4", "--nproc-per-node", 1, "--no-python", "true"), tmp_path, "wider",
                  secret=None)
    secret = Agent(args, tmp_path, "secret", secret="another-secret-of-this-test")
    late = finish(wider, secret, timeout=30)
    wait_for(lambda: any("not taking the node at 192.0.2.7" in a.err.read_text() for a in started),
             what="the leader's word on the older node")
    etcd.revoke(older_lease)  # it leaves, as its agent would at the end
    assert [rc for rc, _, _ in late] == [GROUP_FAILED, GROUP_FAILED], "\n".join(err for _, _, err in late)
    assert ("rdzv: this node cannot join run job7 in etcd (led by 127.0.0.1): this node has --nnodes 2:4 and the "
            "run's leader 2:3") in late[0][2], late[0][2]
    assert "this node has a DLAUNCH_RDZV_SECRET and the run's leader none" in late[1][2], late[1][2]
    assert "start every node of a run with the same --nnodes and the same DLAUNCH_RDZV_SECRET" in late[1][2]
    ended = finish(*started)
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    said = "".join(e for _, _, e in ended)
    assert "waits to join" not in said and "meet again" not in said, said
    assert said.count("rdzv: not taking the node at 192.0.2.7 (older:1:0) into run job7: in its words, this node "
                      "does not say its --nnodes (another version of dlaunch)") == 1, said
    assert etcd.keys("/dlaunch/") == []


def test_a_node_that_does_not_fit_the_waiting_leader_is_refused_and_not_counted(tmp_path, etcd):
    """Before the first attempt: the leader of --nnodes 2 waits; a node with --nnodes 3 comes and is refused
    at once (it would make 2 nodes, but not 2 of the same run); the next node that fits makes the pair."""
    out = tmp_path / "out"
    out.mkdir()
    args = over_etcd(etcd.endpoint, 2, "--nproc-per-node", 1, DUMP_ENV, out)
    leader = Agent(args, tmp_path, "leader", secret=None)
    wait_for(lambda: etcd.keys("/dlaunch/job7/leader"), what="the leader's key")
    misfit = Agent(over_etcd(etcd.endpoint, 3, "--nproc-per-node", 1, DUMP_ENV, out), tmp_path, "misfit", secret=None)
    [(rc, _, err)] = finish(misfit, timeout=30)
    assert rc == GROUP_FAILED and "this node has --nnodes 3 and the run's leader 2" in err, err
    assert leader.proc.poll() is None, "the leader still waits for a node that fits"
    ended = finish(leader, Agent(args, tmp_path, "second", secret=None))
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    assert {d["environ"]["WORLD_SIZE"] for d in load_rank_dumps(out, 2).values()} == {"2"}


def test_paddles_elastic_example_meets_through_etcd(tmp_path, etcd):
    """Paddle's documented elastic form, `--master etcd://HOST:PORT --nnodes 2:4`: two nodes (two addresses)
    wait --elastic_timeout for up to 4, then run as one job of 2 nodes with Paddle's endpoints of both."""
    from test_paddle import DUMP, dumps, paddle_bin
    script = tmp_path / "dump.py"
    script.write_text(DUMP)
    out = tmp_path / "out"
    out.mkdir()
    started = [Agent([paddle_bin(), "--master", f"etcd://{etcd.endpoint}", "--nnodes", "2:4", "--elastic_timeout", 2,
                      "--host", f"127.0.0.{i}", "--nproc_per_node", 1, script, out], tmp_path, f"paddle{i}", secret=None)
               for i in (1, 2)]
    ended = finish(*started)
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    envs = dumps(out)
    assert sorted(envs) == ["0", "1"]
    endpoints = envs["0"]["PADDLE_TRAINER_ENDPOINTS"].split(",")
    assert sorted(e.split(":")[0] for e in endpoints) == ["127.0.0.1", "127.0.0.2"], endpoints
    assert envs["1"]["PADDLE_NNODES"] == "2" and envs["1"]["PADDLE_MASTER"] == envs["0"]["PADDLE_MASTER"]
    assert etcd.keys("/dlaunch/") == []


def test_paddles_fleet_elastic_example_meets_through_etcd(tmp_path, etcd):
    """Paddle's fleet elastic form, `--elastic_server HOST:PORT --np 2 --job_id ID` (paddle.distributed.launch
    runs fleet's launcher for it), one node with the options and one with Paddle's PADDLE_ELASTIC_* variables:
    one job of two nodes under that id, its keys gone at the end."""
    from test_paddle import DUMP, dumps, paddle_bin
    script = tmp_path / "dump.py"
    script.write_text(DUMP)
    out = tmp_path / "out"
    out.mkdir()
    with_options = Agent([paddle_bin(), f"--elastic_server={etcd.endpoint}", "--np=2", "--job_id=fleet1",
                          "--host=127.0.0.1", "--nproc_per_node", 1, script, out], tmp_path, "options", secret=None)
    variables = {"PADDLE_ELASTIC_SERVER": etcd.endpoint, "PADDLE_ELASTIC_NP": "2", "PADDLE_ELASTIC_JOB_ID": "fleet1",
                 "POD_IP": "127.0.0.2"}
    with_variables = Agent([paddle_bin(), "--nproc_per_node", 1, script, out], tmp_path, "variables", secret=None,
                           env=variables)
    ended = finish(with_options, with_variables)
    assert all(rc == 0 for rc, _, _ in ended), "\n".join(err for _, _, err in ended)
    envs = dumps(out)
    assert sorted(envs) == ["0", "1"]
    assert {e["PADDLE_JOB_ID"] for e in envs.values()} == {"fleet1"}
    assert {e["PADDLE_TRAINERS_NUM"] for e in envs.values()} == {"2"}
    endpoints = envs["0"]["PADDLE_TRAINER_ENDPOINTS"].split(",")
    assert sorted(e.split(":")[0] for e in endpoints) == ["127.0.0.1", "127.0.0.2"], endpoints
    assert etcd.keys("/dlaunch/") == []


def test_an_etcd_that_does_not_answer_is_named(tmp_path):
    port = free_port()
    r = run_dlaunch(["--rdzv-backend", "etcd", "--rdzv-endpoint", f"127.0.0.1:{port}", "--nnodes", 2, "--no-python",
                     "true"], timeout=60)
    assert r.returncode == GROUP_FAILED, r.stderr
    assert f"etcd: http://127.0.0.1:{port} is not reachable" in r.stderr, r.stderr


def test_etcd_options_that_cannot_work_are_refused_before_anything_starts():
    cases = [
        (["--rdzv-backend", "etcd", "--nnodes", 2], "--rdzv-backend etcd --nnodes 2: no --rdzv-endpoint"),
        (["--rdzv-backend", "etcd", "--rdzv-endpoint", "h:2379", "--rdzv-conf", "cert=/c.pem"],
         "--rdzv-conf cert without key"),
        (["--rdzv-backend", "etcd-v2", "--rdzv-endpoint", "h:2379", "--rdzv-conf", "ssl_cert_key=/k.pem"],
         "--rdzv-conf ssl_cert_key without ssl_cert"),
        (["--rdzv-backend", "etcd", "--rdzv-endpoint", "h:2379", "--rdzv-conf", "protocol=ftp"],
         "--rdzv-conf protocol=ftp: not a protocol etcd speaks"),
        (["--rdzv-backend", "etcd", "--rdzv-endpoint", "h:2379", "--rdzv-conf", "cacert=/ca.pem"],
         "--rdzv-conf: TLS files for an http:// endpoint"),
        (["--rdzv-backend", "etcd", "--rdzv-endpoint", "https://h:2379", "--rdzv-conf", "protocol=http"],
         "--rdzv-conf protocol=http and --rdzv-endpoint https://h:2379 disagree"),
        (["--rdzv-backend", "etcd", "--rdzv-endpoint", "ftp://h"], "--rdzv-endpoint: endpoint 'ftp://h' is not"),
        (["--rdzv-backend", "etcd", "--rdzv-endpoint", "h", "--nnodes", 2, "--node-rank", 1],
         "--node-rank with --rdzv-backend etcd: the nodes take their ranks"),
    ]
    for options, needle in cases:
        r = run_dlaunch([*options, "--no-python", "true"], timeout=30)
        assert r.returncode == USAGE and needle in r.stderr, (options, r.stderr)
