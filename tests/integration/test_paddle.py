"""paddle.distributed.launch drop-in: `dlaunch-paddle` with Paddle's options gives Paddle's worker
environment (names as Paddle 2.4-2.6 set them, docs/paddle.md), its log layout, PS roles, the ABORT line,
and the copy-the-command rendezvous between two nodes (two loopback addresses on this machine)."""
import json
import os
import re
import subprocess
import time

import pytest

from c10d_agents import Agent, finish
from conftest import GROUP_FAILED, USAGE, base_env, describe, dlaunch_bin, source_dir, write_script

DUMP = """
import json, os, sys
out = sys.argv[1]
key = os.environ.get("PADDLE_TRAINER_ID") or os.environ.get("TRAINING_ROLE", "") + os.environ.get("PADDLE_PORT", "")
with open(os.path.join(out, key), "w") as f:
    json.dump(dict(os.environ), f)
print("hello from", key)
print("stderr from", key, file=sys.stderr)
"""

COLLECTIVE_NAMES = ["PADDLE_TRAINER_ID", "PADDLE_GLOBAL_RANK", "PADDLE_TRAINERS_NUM", "PADDLE_GLOBAL_SIZE",
                    "PADDLE_RANK_IN_NODE", "PADDLE_LOCAL_RANK", "PADDLE_LOCAL_SIZE", "PADDLE_NNODES",
                    "PADDLE_MASTER", "PADDLE_CURRENT_ENDPOINT", "PADDLE_TRAINER_ENDPOINTS", "PADDLE_JOB_ID"]


def paddle_bin():
    path = os.path.join(os.path.dirname(dlaunch_bin()), "dlaunch-paddle")
    assert os.path.islink(path) and os.access(path, os.X_OK), "the build must create dlaunch-paddle next to dlaunch"
    return path


def run(args, timeout=60, **kw):
    return subprocess.run([paddle_bin(), *map(str, args)], env=base_env(), capture_output=True, text=True,
                          timeout=timeout, **kw)


def dumps(out):
    return {p.name: json.loads(p.read_text()) for p in out.iterdir()}


def test_collective_environment_has_paddles_names_and_torchs(tmp_path):
    script = write_script(tmp_path, "dump.py", DUMP)
    out = tmp_path / "out"
    out.mkdir()
    proc = run(["--nproc_per_node", "2", "--job_id", "j1", script, out])
    assert proc.returncode == 0, describe(proc)
    envs = dumps(out)
    assert sorted(envs) == ["0", "1"]
    endpoints = envs["0"]["PADDLE_TRAINER_ENDPOINTS"].split(",")
    assert len(endpoints) == 2
    for rank in (0, 1):
        env = envs[str(rank)]
        for name in COLLECTIVE_NAMES:
            assert name in env, name
        expected = {"PADDLE_TRAINER_ID": rank, "PADDLE_GLOBAL_RANK": rank, "PADDLE_TRAINERS_NUM": 2,
                    "PADDLE_GLOBAL_SIZE": 2, "PADDLE_RANK_IN_NODE": rank, "PADDLE_LOCAL_RANK": rank,
                    "PADDLE_LOCAL_SIZE": 2, "PADDLE_NNODES": 1, "PADDLE_JOB_ID": "j1",
                    "PADDLE_CURRENT_ENDPOINT": endpoints[rank], "PADDLE_DISTRI_BACKEND": "gloo",
                    "PADDLE_MASTER": f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}",
                    # torch's contract is there too, for the same rank
                    "RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": 2, "TORCHELASTIC_RUN_ID": "j1"}
        for name, value in expected.items():
            assert env.get(name) == str(value), (name, env.get(name))
        assert "FLAGS_selected_gpus" not in env  # no GPU on this machine: Gloo, as Paddle does on CPUs


def test_ddp_example_runs_under_dlaunch_paddle(tmp_path, torch_python):
    proc = run(["--nproc_per_node", "2", source_dir() / "examples" / "ddp_allreduce.py"], timeout=120)
    assert proc.returncode == 0, describe(proc)
    assert "OK world=2 sum=3" in proc.stdout, describe(proc)


def test_log_layout_appends_with_headers_and_shows_rank_0(tmp_path):
    script = write_script(tmp_path, "dump.py", DUMP)
    out, logs = tmp_path / "out", tmp_path / "log"
    out.mkdir()
    for attempt in range(2):
        proc = run(["--nproc_per_node", "2", "--log_dir", logs, script, out])
        assert proc.returncode == 0, describe(proc)
        assert "hello from 0" in proc.stdout and "hello from 1" not in proc.stdout, describe(proc)
        assert "stderr from 1" not in proc.stderr, describe(proc)
    for rank in (0, 1):
        text = (logs / f"workerlog.{rank}").read_text()
        headers = re.findall(rf"^==== dlaunch-paddle: job default, attempt 0, rank {rank} \(local {rank}\) on .* ====",
                             text, re.M)
        assert len(headers) == 2, text  # both runs, nothing overwritten
        assert text.count(f"hello from {rank}") == 2 and text.count(f"stderr from {rank}") == 2, text
    endpoints = (logs / "endpoints.log").read_text()
    assert endpoints.count("PADDLE_TRAINER_ENDPOINTS:") == 2, endpoints
    proc = run(["--nproc_per_node", "2", "--log_dir", logs, "--log_overwrite", "true", script, out])
    assert proc.returncode == 0, describe(proc)
    assert (logs / "workerlog.1").read_text().count("hello from 1") == 1


SERVER_OR_TRAINER = """
import glob, os, signal, sys, time
role = os.environ["TRAINING_ROLE"]
if role == "PSERVER":
    def stop(*_):
        open(os.path.join(sys.argv[1], "server-stopped"), "w").close()
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
with open(os.path.join(sys.argv[1], role + os.environ["PADDLE_PORT"]), "w") as f:
    f.write(" ".join(f"{k}={os.environ.get(k, '')}" for k in sorted(os.environ) if k.startswith(("PADDLE_", "TRAINING_", "POD_"))))
if role == "PSERVER":
    while True:  # a parameter server serves until the launcher stops it
        time.sleep(0.1)
deadline = time.time() + 30  # a trainer works while its server is up
while not glob.glob(os.path.join(sys.argv[1], "PSERVER*")) and time.time() < deadline:
    time.sleep(0.05)
"""


def test_parameter_server_roles_and_servers_stopped_after_trainers(tmp_path):
    script = write_script(tmp_path, "ps.py", SERVER_OR_TRAINER)
    out = tmp_path / "out"
    out.mkdir()
    proc = run(["--server_num", "1", "--trainer_num", "2", script, out], timeout=60)
    assert proc.returncode == 0, describe(proc)
    assert (out / "server-stopped").exists(), "the server must get SIGTERM once the trainers are done"
    files = {p.name: dict(kv.split("=", 1) for kv in p.read_text().split()) for p in out.iterdir()
             if p.name != "server-stopped"}
    servers = [v for k, v in files.items() if k.startswith("PSERVER")]
    trainers = [v for k, v in files.items() if k.startswith("TRAINER")]
    assert len(servers) == 1 and len(trainers) == 2, files
    assert sorted(t["PADDLE_TRAINER_ID"] for t in trainers) == ["0", "1"]
    for env in servers + trainers:
        assert env["PADDLE_PSERVERS_IP_PORT_LIST"] == servers[0]["POD_IP"] + ":" + servers[0]["PADDLE_PORT"]
        assert len(env["PADDLE_TRAINER_ENDPOINTS"].split(",")) == 2
        assert env["PADDLE_TRAINERS_NUM"] == "2"
        assert env["PADDLE_ROLE"] == env["TRAINING_ROLE"]
    assert "PADDLE_TRAINER_ID" not in servers[0]


def test_abort_line_then_root_cause_summary(tmp_path):
    script = write_script(tmp_path, "fail.py", """
import os, sys, time
if os.environ["PADDLE_TRAINER_ID"] == "1":
    print("loss is nan", file=sys.stderr)
    sys.exit(3)
time.sleep(30)
""")
    proc = run(["--nproc_per_node", "2", script])
    assert proc.returncode == 3, describe(proc)
    line = ("ABORT!!! Out of all 2 trainers, the trainer process with rank=[1] was aborted. "
            "Please check its log.")
    assert line in proc.stderr, describe(proc)
    after = proc.stderr[proc.stderr.index(line):]
    assert "root cause: rank 1" in after and "loss is nan" in after, describe(proc)


@pytest.mark.parametrize("args,message", [
    (["--master", "etcd://127.0.0.1:2379", "--rank", "1"], "--rank with --master etcd://: node ranks follow"),
    (["--legacy", "true"], "--legacy: selects Paddle's old fleet launcher"),
    (["--run_mode", "ps-heter"], "--run_mode ps-heter: not supported by dlaunch"),
    (["--npus", "0"], "--npus: Ascend NPUs are not supported by dlaunch"),
])
def test_unsupported_options_are_refused(tmp_path, args, message):
    marker = tmp_path / "started"
    script = write_script(tmp_path, "t.py", f"open({str(marker)!r}, 'w').close()")
    proc = run([*args, script])
    assert proc.returncode == USAGE, describe(proc)
    assert message in proc.stderr, describe(proc)
    assert not marker.exists()


def test_an_absent_gpu_names_both_spellings_of_the_option(tmp_path):
    script = write_script(tmp_path, "t.py", "raise SystemExit('must not start')")
    proc = run(["--gpus", "9", script])
    assert proc.returncode == USAGE, describe(proc)
    assert "dlaunch: plan: --devices/--gpus: device 9 does not exist; " in proc.stderr, describe(proc)


def start_host(cmd, tmp_path):
    """Starts the first node, its output in files (torch 2.6 writes pages of warnings: a pipe nobody reads while
    the test waits on the other node would fill and stop it); returns (host, the command it printed)."""
    host = Agent(cmd, tmp_path, "host", secret=None)
    deadline = time.time() + 20
    while time.time() < deadline:
        ended = host.proc.poll() is not None  # before the read: what it printed before it ended is read
        lines = host.out.read_text().splitlines()
        if any(line.startswith("-" * 80) for line in lines[3:]):
            return host, lines[2].strip()
        if ended:
            break
        time.sleep(0.05)
    host.proc.kill()
    (_, out, err), = finish(host)
    pytest.fail("the first node printed no command:\n" + out + err)


@pytest.mark.parametrize("program", ["dlaunch-paddle", "dlaunch"])
def test_copy_command_rendezvous_across_two_addresses(tmp_path, torch_python, program):
    """Node A (127.0.0.1) is started with --nnodes 2 and no master; it prints the command; node B
    (127.0.0.2) runs exactly that command plus its own address. Both run the DDP example as one world of 4."""
    binary = os.path.join(os.path.dirname(dlaunch_bin()), program)
    example = str(source_dir() / "examples" / "ddp_allreduce.py")
    nproc = ["--nproc_per_node", "2"] if program == "dlaunch-paddle" else ["--nproc-per-node", "2"]
    addr = "--host" if program == "dlaunch-paddle" else "--local-addr"
    host, command = start_host([binary, addr, "127.0.0.1", "--nnodes", "2", *nproc, example], tmp_path)
    try:
        words = command.split()
        assert words[0] == program and words[1] == "--master" and words[2].startswith("127.0.0.1:"), command
        assert "127.0.0.1" not in " ".join(words[3:]), "this node's own --host must not be in the command"
        joiner = subprocess.run([binary, addr, "127.0.0.2", *words[1:]], env=base_env(), capture_output=True,
                                text=True, timeout=120)
        (rc, out, err), = finish(host, timeout=120)
    finally:
        host.proc.kill()
    assert joiner.returncode == 0, describe(joiner)
    assert rc == 0, f"{out}\n{err}"
    assert "OK world=4 sum=10" in out, f"{out}\n{err}"
    assert "node at 127.0.0.2 joined" in err, err


def test_paddle_endpoints_across_two_addresses(tmp_path):
    script = write_script(tmp_path, "dump.py", DUMP)
    out = tmp_path / "out"
    out.mkdir()
    host, command = start_host([paddle_bin(), "--host", "127.0.0.1", "--nnodes", "2", "--nproc_per_node", "1",
                                script, out], tmp_path)
    try:
        joiner = run(["--host", "127.0.0.2", *command.split()[1:]])
        (rc, _, _), = finish(host, timeout=60)
    finally:
        host.proc.kill()
    assert joiner.returncode == 0 and rc == 0, describe(joiner)
    envs = dumps(out)
    port = int(envs["0"]["MASTER_PORT"]) + 1
    assert envs["0"]["PADDLE_TRAINER_ENDPOINTS"] == f"127.0.0.1:{port},127.0.0.2:{port}"
    assert envs["1"]["PADDLE_CURRENT_ENDPOINT"] == f"127.0.0.2:{port}"
    assert envs["1"]["PADDLE_NNODES"] == "2" and envs["1"]["PADDLE_MASTER"] == envs["0"]["PADDLE_MASTER"]


def test_rendezvous_gives_up_when_nodes_do_not_come(tmp_path):
    script = write_script(tmp_path, "t.py", "raise SystemExit('must not start')")
    proc = subprocess.run([dlaunch_bin(), "--local-addr", "127.0.0.1", "--nnodes", "2", "--join-timeout", "1",
                           script], env=base_env(), capture_output=True, text=True, timeout=30)
    assert proc.returncode == GROUP_FAILED, describe(proc)
    assert "only 1 of 2 nodes joined within 1 s" in proc.stderr, describe(proc)
    assert "must not start" not in proc.stderr


def test_joiner_with_other_worker_options_is_refused_and_the_host_ends_at_once(tmp_path):
    """Another environment contract cannot be one run (another worker count can): the joiner is refused, and
    the host ends with the reason at once instead of waiting out its join timeout."""
    script = write_script(tmp_path, "t.py", "pass")
    host, command = start_host([dlaunch_bin(), "--local-addr", "127.0.0.1", "--nnodes", "2", "--join-timeout", "60",
                                "--env", "torch", script], tmp_path)
    try:
        words = command.split()
        words[words.index("--env") + 1] = "all"
        started = time.monotonic()
        joiner = subprocess.run([dlaunch_bin(), "--local-addr", "127.0.0.2", *words[1:]], env=base_env(),
                                capture_output=True, text=True, timeout=30)
        (rc, _, host_err), = finish(host, timeout=30)
    finally:
        host.proc.kill()
    assert joiner.returncode == GROUP_FAILED, describe(joiner)
    assert "refused this node: this node asks for 'env=" in joiner.stderr, describe(joiner)
    assert rc == GROUP_FAILED
    assert "dlaunch: rdzv: the node at 127.0.0.2 cannot join: this node asks for 'env=" in host_err, host_err
    assert time.monotonic() - started < 30
