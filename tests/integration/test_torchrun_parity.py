"""Parity with the installed PyTorch's own torchrun: the same command line under `python -m
torch.distributed.run` and under dlaunch, from the same minimal environment; every variable torchrun adds
or changes in a worker must come from dlaunch with the same value (per-run values normalized), unless
DIFFERENCES says why not; whatever dlaunch adds beyond that must be in docs/env-contract.md. The worker's
command line must be torchrun's too. Nothing here names a torch version: on a new torch, a failure is the
to-do list."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import (DEFAULT_TIMEOUT, DUMP_ENV, describe, dlaunch_bin, free_port, load_rank_dumps, run_dlaunch,
                      source_dir, wait_for)
from etcd_server import etcd  # noqa: F401 (a fixture)

# Set by torchrun, set differently by dlaunch on purpose. Each name is in docs/env-contract.md.
DIFFERENCES = {
    "MASTER_ADDR": "On one node without --master-addr dlaunch uses --local-addr or 127.0.0.1; torchrun uses this "
                   "host's fully qualified name (socket.getfqdn), which may resolve to an interface the workers "
                   "cannot reach or to nothing at all.",
    "TORCHELASTIC_USE_AGENT_STORE": "dlaunch's agent serves no TCPStore to its workers, so it always says False "
                                    "and rank 0 creates the store at MASTER_ADDR:MASTER_PORT; torchrun says True "
                                    "when its agent's store is shared (static rendezvous; c10d since torch 2.4).",
    "OMP_NUM_THREADS": "dlaunch gives each rank its share of the usable CPUs (the cores of its cpuset when bound); "
                       "torchrun sets 1 whenever it starts more than one worker.",
}

# Run by the interpreter in place of `-m torch.distributed.run`: torch < 2.0 on Python >= 3.11 cannot parse
# its own default --redirects/--tee "0" (IntFlag iteration skips Std.NONE; meta-llama/llama#86), so torchrun
# fails before starting a worker. The agent, its environment and its command lines stay torch's own.
# And a torch built without libuv (Debian 13's 2.6) whose c10d rendezvous still asks TCPStore for it, so
# that torchrun cannot start at all: with USE_LIBUV=0 (what such a user exports), its stores get none.
TORCHRUN = """
import os
import runpy
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing import api
if api.Std.from_str("0") is None:
    api.Std.from_str = staticmethod(lambda s: api.Std(int(s)))  # the tests pass no per-rank -r/-t maps
if os.environ.get("USE_LIBUV") == "0":
    class TCPStoreWithoutLibuv(dist.TCPStore):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("use_libuv", False)
            super().__init__(*args, **kwargs)
    dist.TCPStore = TCPStoreWithoutLibuv
runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
"""
SCRIPT_ARGS = ["--shard=${local_rank}", "plain"]


# Whether this torch's store asks for libuv (USE_LIBUV, default 1, torch >= 2.4) that it was built without
# (Debian 13's torch 2.6): torchrun then fails creating its own store unless the user exports USE_LIBUV=0;
# dlaunch sets USE_LIBUV=0 for its workers itself (docs/env-contract.md).
LIBUV_PROBE = """
import torch.distributed as d
try:
    d.TCPStore("127.0.0.1", 0, 1, True, use_libuv=True)
except Exception as e:
    print("without libuv" if "without libuv" in str(e) else "")
"""


@pytest.fixture(scope="module")
def torchrun(torch_python):
    """(torch version, the long options this torchrun accepts, the environment torchrun needs besides the
    tests'), read from the installed torch."""
    version, helptext = subprocess.run([torch_python, "-c", "import torch; print(torch.__version__)" + TORCHRUN,
                                        "--help"], capture_output=True, text=True, timeout=DEFAULT_TIMEOUT,
                                       check=True).stdout.split("\n", 1)
    probe = subprocess.run([torch_python, "-c", LIBUV_PROBE], capture_output=True, text=True, timeout=DEFAULT_TIMEOUT)
    needs = {"USE_LIBUV": "0"} if probe.stdout.startswith("without libuv") else {}
    return version, set(re.findall(r"--[a-z][a-z_-]*", helptext)), needs


def spelled(options, style, accepted=None):
    """`options` (dash spelling) in `style`; with `accepted`, in the other style where torchrun has only that."""
    def respell(o, style):
        return "--" + (o[2:].replace("-", "_") if style == "underscore" else o[2:].replace("_", "-"))

    out = [respell(o, style) if o.startswith("--") else o for o in options]
    other = "dash" if style == "underscore" else "underscore"
    return [respell(o, other) if accepted is not None and o.startswith("--") and o not in accepted else o
            for o in out]


def launch(tmp_path, who, python, options, extra_env):
    """Runs one launcher on DUMP_ENV from a minimal environment and `extra_env`: (given env, rank -> dump,
    tmpdir, outdir)."""
    tmpdir, outdir = tmp_path / who / "tmp", tmp_path / who / "out"
    tmpdir.mkdir(parents=True)
    outdir.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"), "TMPDIR": str(tmpdir), "PYTHON_EXEC": python,
           **extra_env}
    args = [*options, DUMP_ENV, outdir, *SCRIPT_ARGS]
    if who == "dlaunch":
        proc = run_dlaunch(args, env=env)
    else:
        proc = subprocess.Popen([python, "-c", TORCHRUN, *map(str, args)], env=env, text=True, start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            proc.stdout, proc.stderr = proc.communicate(timeout=DEFAULT_TIMEOUT)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
    assert proc.returncode == 0, f"{who} {args}: {describe(proc)}"
    return env, load_rank_dumps(outdir, 2), tmpdir, outdir


def what_it_set(given, dump, tmpdir, outdir, master_port):
    """The variables the launcher added or changed (None: removed), per-run values normalized, and argv."""
    env = dump["environ"]
    changed = {k: env.get(k) for k in given.keys() | env.keys() if given.get(k) != env.get(k)}
    if re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", changed.get("TORCHELASTIC_RUN_ID") or ""):
        changed["TORCHELASTIC_RUN_ID"] = "<a uuid, one per --standalone run>"
    port = changed.get("MASTER_PORT") or ""
    if master_port is None and port.isdigit() and 0 < int(port) < 65536:
        changed["MASTER_PORT"] = "<a free port>"
    elif port == str(master_port):
        changed["MASTER_PORT"] = "<the --master-port given>"
    if m := re.fullmatch(re.escape(f"{tmpdir}/") + r".+(/attempt_\d+/\d+/error\.json)",
                         changed.get("TORCHELASTIC_ERROR_FILE") or ""):
        changed["TORCHELASTIC_ERROR_FILE"] = "$TMPDIR/<run dir>" + m.group(1)
    argv = [[str(a).replace(str(outdir), "OUT") for a in dump[k] or []] for k in ("orig_argv", "argv")]
    return changed, argv, dump["unbuffered"]


MONITOR = ["--monitor-interval", "0.1"]  # torchrun checks on its workers every 5 s by default
SHAPES = {  # name: (options in dash spelling, whether MASTER_PORT is the --master-port given)
    "standalone": (["--nproc-per-node", "2", "--standalone"], False),
    "c10d": (["--nnodes", "1", "--nproc-per-node", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:{port}",
              "--rdzv-id", "parity", "--max-restarts", "1"], False),
    "static": (["--nnodes", "1", "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port", "{port}",
                "--nproc-per-node", "2"], True),
    # torch's own etcd-v2 rendezvous through python3-etcd, against dlaunch's through etcd's v3 API (one etcd).
    "etcd-v2": (["--nnodes", "1", "--nproc-per-node", "2", "--rdzv-backend", "etcd-v2", "--rdzv-endpoint", "{etcd}",
                 "--rdzv-id", "parity", "--max-restarts", "1"], False),
}


@pytest.mark.parametrize("style", ["dash", "underscore"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_worker_environment_and_command_match_torchrun(tmp_path, torch_python, torchrun, shape, style, request):
    version, accepted, torchrun_needs = torchrun
    contract = (source_dir() / "docs" / "env-contract.md").read_text()
    endpoint = request.getfixturevalue("etcd").endpoint if "{etcd}" in SHAPES[shape][0] else None
    seen = {}
    for who in ("torchrun", "dlaunch"):
        port = free_port()
        options = [o.format(port=port, etcd=endpoint) for o in SHAPES[shape][0] + MONITOR]
        options = spelled(options, style, accepted if who == "torchrun" else None)
        master_port = port if SHAPES[shape][1] else None
        given, dumps, tmpdir, outdir = launch(tmp_path, who, torch_python, options,
                                              torchrun_needs if who == "torchrun" else {})
        seen[who] = {r: what_it_set(given, d, tmpdir, outdir, master_port) for r, d in dumps.items()}
        for name in ("MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
            values = {d["environ"].get(name) for d in dumps.values()}
            assert len(values) == 1, f"{who} {options}: ranks disagree on {name}: {values}"

    todo = []
    for rank, (theirs, their_argv, their_unbuffered) in sorted(seen["torchrun"].items()):
        ours, our_argv, our_unbuffered = seen["dlaunch"][rank]
        for name in sorted(theirs.keys() - DIFFERENCES.keys()):
            if name not in ours or ours[name] != theirs[name]:
                todo.append(f"rank {rank}: {name}: torchrun {did(theirs, name)}, dlaunch {did(ours, name)}")
        for name in sorted(ours.keys() - theirs.keys() - DIFFERENCES.keys()):
            if f"`{name}`" not in contract:
                todo.append(f"rank {rank}: {name}: only dlaunch {did(ours, name)}, and docs/env-contract.md "
                            f"does not document it")
        if our_argv != their_argv or our_unbuffered != their_unbuffered:
            todo.append(f"rank {rank}: worker command line (orig_argv, argv, unbuffered): torchrun runs "
                        f"{their_argv + [their_unbuffered]}, dlaunch {our_argv + [our_unbuffered]}")
    if todo:
        known = "; ".join(f"{n}: torchrun {did(seen['torchrun'][0][0], n)}, dlaunch {did(seen['dlaunch'][0][0], n)}"
                          for n in DIFFERENCES)
        pytest.fail(f"torch {version}, shape {shape} ({style} options): dlaunch differs from torchrun:\n  "
                    + "\n  ".join(todo) + f"\n(allowed by DIFFERENCES, rank 0: {known})", pytrace=False)


def did(changed, name):  # what a launcher did to `name`, for the to-do list
    if name not in changed:
        return "does not set it"
    return "removes it" if changed[name] is None else f"sets {changed[name]!r}"


def test_every_known_difference_is_documented():
    contract = (source_dir() / "docs" / "env-contract.md").read_text()
    assert DIFFERENCES and all(reason.endswith(".") for reason in DIFFERENCES.values())
    section = contract.split("## Differences from torchrun", 1)[-1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([A-Z_]+)` \|", section, re.M))
    assert listed == DIFFERENCES.keys(), "docs/env-contract.md's \"Differences from torchrun\" lists exactly these"


# The launcher's own TORCHELASTIC_ERROR_FILE (set for torchrun by schedulers that wrap it): what it says
# when rank 1 raises under @record, exits without a record, or the launcher is stopped.
FAILING = """
import os, sys, time
from torch.distributed.elastic.multiprocessing.errors import record

@record
def main():
    open(os.path.join(sys.argv[1], os.environ["LOCAL_RANK"]), "w").close()
    if os.environ["LOCAL_RANK"] == "1" and sys.argv[2] == "raise":
        raise RuntimeError("rank 1 failed on purpose")
    if os.environ["LOCAL_RANK"] == "1" and sys.argv[2] == "exit":
        sys.exit(3)
    time.sleep(60)

main()
"""


def launcher_error_file(tmp_path, who, python, how, torchrun):
    """Runs `who` on FAILING with TORCHELASTIC_ERROR_FILE set (stopped with SIGTERM once both ranks run when
    `how` is "stop"): (its error file's JSON or None, its pid)."""
    base = tmp_path / who / how
    (base / "tmp").mkdir(parents=True)
    (base / "started").mkdir()
    script = base / "failing.py"
    script.write_text(FAILING)
    error_file = base / "launcher-error.json"
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"), "TMPDIR": str(base / "tmp"),
           "PYTHON_EXEC": python, "TORCHELASTIC_ERROR_FILE": str(error_file), **(torchrun[2] if who == "torchrun" else {})}
    options = ["--nproc-per-node", "2", "--standalone", *MONITOR]
    args = [*(options if who == "dlaunch" else spelled(options, "dash", torchrun[1])), script, base / "started", how]
    cmd = [dlaunch_bin()] if who == "dlaunch" else [python, "-c", TORCHRUN]
    proc = subprocess.Popen([*cmd, *map(str, args)], env=env, text=True, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        if how == "stop":
            wait_for(lambda: len(list((base / "started").iterdir())) == 2, what=f"{who}'s two ranks")
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=DEFAULT_TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode != 0, f"{who} {how}: exit 0\n{out}\n{err}"
    return (json.loads(error_file.read_text()) if error_file.exists() else None), proc.pid


@pytest.mark.parametrize("how", ["raise", "exit", "stop"])
def test_launcher_error_file_matches_torchrun(tmp_path, torch_python, torchrun, how):
    seen = {who: launcher_error_file(tmp_path, who, torch_python, how, torchrun) for who in ("torchrun", "dlaunch")}
    (theirs, their_pid), (ours, our_pid) = seen["torchrun"], seen["dlaunch"]
    if how == "exit":  # no record from the worker: torchrun writes none
        assert theirs is None and ours is None, f"torchrun wrote {theirs}, dlaunch {ours}"
        return
    assert theirs is not None and ours is not None, f"torchrun wrote {theirs}, dlaunch {ours}"
    assert list(ours) == list(theirs) == ["message"]
    assert list(ours["message"]) == list(theirs["message"]), "the same fields, in the same order"
    assert list(ours["message"]["extraInfo"]) == list(theirs["message"]["extraInfo"])
    if how == "raise":
        assert ours["message"]["message"] == theirs["message"]["message"] == "RuntimeError: rank 1 failed on purpose"
        assert ours["message"]["errorCode"] == theirs["message"]["errorCode"] == 1
        last_line = [info["message"]["extraInfo"]["py_callstack"].strip().splitlines()[-1] for info in (ours, theirs)]
        assert last_line[0] == last_line[1] == "RuntimeError: rank 1 failed on purpose"
    else:
        assert theirs["message"]["message"] == f"SignalException: Process {their_pid} got signal: 15"
        assert ours["message"]["message"] == f"SignalException: Process {our_pid} got signal: 15"
        assert abs(int(ours["message"]["extraInfo"]["timestamp"]) - time.time()) < 60


def test_launcher_error_file_says_dlaunchs_own_failure(tmp_path):
    """A launch that fails in dlaunch itself (here: the other node never comes) is recorded as torchrun
    records its own exceptions; a usage error is not (torchrun's argparse records none)."""
    error_file = tmp_path / "launcher-error.json"
    proc = run_dlaunch(["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                        "--rdzv-conf", "join_timeout=1", "--no-python", "/bin/true"],
                       env={"TORCHELASTIC_ERROR_FILE": str(error_file)})
    assert proc.returncode == 69, describe(proc)
    record = json.loads(error_file.read_text())
    said = [line for line in proc.stderr.splitlines() if line.startswith("dlaunch: rdzv")]
    assert said and record["message"]["message"] == said[-1], describe(proc)
    assert record["message"]["extraInfo"]["py_callstack"] == ""
    assert (error_file.stat().st_mode & 0o777) == 0o600
    error_file.unlink()
    assert run_dlaunch(["--bogus", "/bin/true"], env={"TORCHELASTIC_ERROR_FILE": str(error_file)}).returncode == 64
    assert not error_file.exists()


def start_node(who, python, options, outdir, env):
    cmd = [dlaunch_bin()] if who == "dlaunch" else [python, "-c", TORCHRUN]
    return subprocess.Popen([*cmd, *map(str, options), DUMP_ENV, outdir], env=env, text=True, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def rank_layout(dumps):
    """Per worker what is node-order independent, and whether RANK runs node by node (GROUP_RANK order)."""
    env = [d["environ"] for d in dumps.values()]
    workers = sorted((e["ROLE_NAME"], int(e["LOCAL_RANK"]), int(e["LOCAL_WORLD_SIZE"]), int(e["ROLE_RANK"]),
                      int(e["ROLE_WORLD_SIZE"]), int(e["WORLD_SIZE"]), int(e["GROUP_WORLD_SIZE"])) for e in env)
    sizes = {int(e["GROUP_RANK"]): int(e["LOCAL_WORLD_SIZE"]) for e in env}
    node_by_node = all(int(e["RANK"]) == sum(n for g, n in sizes.items() if g < int(e["GROUP_RANK"]))
                       + int(e["LOCAL_RANK"]) for e in env)
    return workers, node_by_node


def test_nodes_with_different_workers_and_roles_match_torchrun(tmp_path, torch_python, torchrun):
    """torchrun's c10d form with a `master` node of one worker and two `trainer` nodes of one and two: one
    world of 4, ranks node by node, ROLE_RANK and ROLE_WORLD_SIZE counted within each role."""
    seen = {}
    for who in ("torchrun", "dlaunch"):
        port, outdir = free_port(), tmp_path / who
        outdir.mkdir()
        env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"), "PYTHON_EXEC": torch_python,
               **(torchrun[2] if who == "torchrun" else {})}
        nodes = []
        for role, nproc in (("master", 1), ("trainer", 1), ("trainer", 2)):
            options = ["--nnodes", "3", "--nproc-per-node", str(nproc), "--role", role, "--rdzv-backend", "c10d",
                       "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "roles", *MONITOR]
            nodes.append(start_node(who, torch_python, options if who == "dlaunch"
                                    else spelled(options, "dash", torchrun[1]), outdir, env))
            time.sleep(0.5)  # the first one hosts the rendezvous
        try:
            ends = [n.communicate(timeout=DEFAULT_TIMEOUT) for n in nodes]
        finally:
            for n in nodes:
                if n.poll() is None:
                    os.killpg(n.pid, signal.SIGKILL)
                    n.communicate()
        assert all(n.returncode == 0 for n in nodes), f"{who}: {[(n.returncode, e[1][-2000:]) for n, e in zip(nodes, ends)]}"
        seen[who] = rank_layout(load_rank_dumps(outdir, 4))
    assert seen["dlaunch"] == seen["torchrun"]
    workers, node_by_node = seen["dlaunch"]
    assert node_by_node
    assert [w[:5] for w in workers] == [("master", 0, 1, 0, 1), ("trainer", 0, 1, 0, 3), ("trainer", 0, 2, 1, 3),
                                        ("trainer", 1, 2, 2, 3)] or [w[:5] for w in workers] == [
        ("master", 0, 1, 0, 1), ("trainer", 0, 1, 2, 3), ("trainer", 0, 2, 0, 3), ("trainer", 1, 2, 1, 3)]
