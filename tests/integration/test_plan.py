"""`dlaunch plan`: prints what a launch would do (table or JSON) and starts nothing."""

import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import USAGE, describe, python_exec, run_dlaunch, source_dir, write_script

MARKER_SCRIPT = """
import os, sys
open(os.path.join(sys.argv[1], "started." + os.environ.get("RANK", "x")), "w").close()
"""


def test_plan_json(tmp_path):
    script = write_script(tmp_path, "x.py", MARKER_SCRIPT)
    proc = run_dlaunch(["plan", "--format", "json", "--nproc-per-node", 2, script, tmp_path, "${local_rank}"])
    assert proc.returncode == 0, describe(proc)
    plan = json.loads(proc.stdout)
    assert plan["nnodes"] == 1 and plan["world_size"] == 2 and plan["nproc_per_node"] == 2
    assert plan["master_addr"] == "127.0.0.1" and isinstance(plan["master_port"], int)
    ranks = plan["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    for r in ranks:
        assert r["local_rank"] == r["rank"]
        assert r["node_rank"] == 0
        assert r["world_size"] == 2
        assert r["local_world_size"] == 2
        assert r["argv"] == [python_exec(), "-u", str(script), str(tmp_path), str(r["rank"])]
        env = r["env"]
        assert env["RANK"] == str(r["rank"]) and env["LOCAL_RANK"] == str(r["local_rank"])
        assert env["WORLD_SIZE"] == "2" and env["MASTER_PORT"] == str(plan["master_port"])
    assert list(tmp_path.glob("started.*")) == [], "plan started a worker"


def test_plan_json_second_node(tmp_path):
    script = write_script(tmp_path, "x.py", MARKER_SCRIPT)
    proc = run_dlaunch(["plan", "--format", "json", "--nnodes", 2, "--node-rank", 1, "--master-addr", "10.0.0.1",
                        "--nproc-per-node", 3, script, tmp_path])
    assert proc.returncode == 0, describe(proc)
    plan = json.loads(proc.stdout)
    assert [r["rank"] for r in plan["ranks"]] == [3, 4, 5]
    assert {r["node_rank"] for r in plan["ranks"]} == {1}
    assert {r["world_size"] for r in plan["ranks"]} == {6}
    assert plan["master_addr"] == "10.0.0.1" and plan["master_port"] == 29500


def test_plan_table_has_one_row_per_rank(tmp_path):
    script = write_script(tmp_path, "x.py", MARKER_SCRIPT)
    proc = run_dlaunch(["plan", "--nproc-per-node", 3, script, tmp_path])
    assert proc.returncode == 0, describe(proc)
    lines = proc.stdout.splitlines()
    header = [i for i, l in enumerate(lines)
              if re.match(r"RANK\s+LOCAL\s+NODE\s+GPU\s+NIC\s+CPUS\s+MEMS\s+CONSOLE\s+COMMAND$", l)]
    assert len(header) == 1, proc.stdout
    rows = [l for l in lines if re.match(r"\d+\s+\d+\s+\d+\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+\S", l)]
    assert len(rows) == 3, proc.stdout
    for rank, row in enumerate(rows):
        # No GPU here and binding defaults to none without GPUs: GPU, NIC, CPUS and MEMS show "-".
        assert row.split()[:8] == [str(rank), str(rank), "0", "-", "-", "-", "-", "out+err"]
        assert row.endswith(f"{script} {tmp_path}")
    assert list(tmp_path.glob("started.*")) == [], "plan started a worker"


def test_plan_shows_console_choices(tmp_path):
    script = write_script(tmp_path, "x.py", MARKER_SCRIPT)
    proc = run_dlaunch(["plan", "--format", "json", "--nproc-per-node", 2, "--local-ranks-filter", "1",
                        script, tmp_path])
    assert proc.returncode == 0, describe(proc)
    console = [r["console"] for r in json.loads(proc.stdout)["ranks"]]
    assert console == [{"stdout": False, "stderr": False}, {"stdout": True, "stderr": True}]


def test_plan_bad_format(tmp_path):
    script = write_script(tmp_path, "x.py", MARKER_SCRIPT)
    proc = run_dlaunch(["plan", "--format", "yaml", script, tmp_path])
    assert proc.returncode == USAGE, describe(proc)
    assert proc.stderr.startswith("dlaunch: ")


def test_plan_multi_node_does_not_restart_locally(tmp_path):
    script = write_script(tmp_path, "x.py", MARKER_SCRIPT)
    proc = run_dlaunch(["plan", "--format", "json", "--nnodes", 2, "--node-rank", 0, "--master-addr", "127.0.0.1",
                        "--max-restarts", 3, script, tmp_path])
    assert proc.returncode == 0, describe(proc)
    plan = json.loads(proc.stdout)
    assert plan["max_restarts"] == 0
    assert any("--max-restarts 3" in w for w in plan["warnings"]), plan["warnings"]
    assert {r["env"]["TORCHELASTIC_MAX_RESTARTS"] for r in plan["ranks"]} == {"0"}


def test_plan_is_the_plan_the_run_uses_log_paths_included(tmp_path):
    """`dlaunch plan` and the run make one plan from the same facts: every variable the plan sets is what
    each worker gets, and the log paths differ only in the run directory's random suffix."""
    from conftest import DUMP_ENV, free_port, load_rank_dumps, the_run_dir

    logs, out = tmp_path / "logs", tmp_path / "out"
    out.mkdir()
    port = free_port()
    options = ["--nproc-per-node", 2, "--rdzv-id", "same", "--master-port", port, "--log-dir", logs]
    planned = run_dlaunch(["plan", "--format", "json", *options, DUMP_ENV, out])
    assert planned.returncode == 0, describe(planned)
    plan = json.loads(planned.stdout)
    assert not logs.exists() or not any(logs.iterdir()), "plan made a run directory"
    template = str(logs.resolve() / "same_XXXXXX")
    assert plan["attempt_dir"] == template + "/attempt_0"
    assert plan["log_files"] is True

    ran = run_dlaunch([*options, DUMP_ENV, out])
    assert ran.returncode == 0, describe(ran)
    run_dir = str(the_run_dir(logs))
    dumps = load_rank_dumps(out, 2)
    for r in plan["ranks"]:
        assert r["logs"]["error_file"] == template + f"/attempt_0/{r['rank']}/error.json"
        assert r["logs"]["stdout"] == template + f"/attempt_0/{r['rank']}/stdout.log"
        got = dumps[r["rank"]]["environ"]
        for key, value in r["env"].items():
            # The agent's FIFOs are in its private directory, named by its pid and a random suffix, which
            # the plan cannot know: it shows $TMPDIR/dlaunch-private-<agent pid>-XXXXXX.
            private = re.escape(os.environ.get("TMPDIR") or "/tmp") + r"/dlaunch-private-<agent pid>-XXXXXX"
            value = re.sub(private, ran_private_dir(got), value.replace(template, run_dir))
            assert got.get(key) == value, (key, value, got.get(key))
        assert dumps[r["rank"]]["argv"] == r["argv"][2:], "the worker runs the planned command"


def ran_private_dir(worker_env):
    """The agent's private directory, from the heartbeat FIFO it gave its workers
    ($TMPDIR/dlaunch-private-<pid>-XXXXXX/heartbeat)."""
    return os.path.dirname(worker_env["DLAUNCH_HEARTBEAT_FILE"])


def test_the_plan_says_when_the_run_picks_its_own_port(tmp_path):
    script = write_script(tmp_path, "t.py", "pass")
    picked = run_dlaunch(["plan", "--nproc-per-node", 1, script])
    assert picked.returncode == 0, describe(picked)
    assert "(a free port; a run picks its own when it starts)" in picked.stdout, picked.stdout
    given = run_dlaunch(["plan", "--format", "json", "--master-port", 29555, "--nproc-per-node", 1, script])
    plan = json.loads(given.stdout)
    assert plan["master_port"] == 29555 and plan["master_port_free_pick"] is False, plan
    free = json.loads(run_dlaunch(["plan", "--format", "json", "--nproc-per-node", 1, script]).stdout)
    assert free["master_port_free_pick"] is True, free


SVG = "{http://www.w3.org/2000/svg}"
FIXTURES = sorted((Path(source_dir()) / "tests" / "data" / "topologies").glob("*.xml"))


def topo_counts(text):
    """Cores, GPUs and RDMA NICs as `dlaunch topo` prints them."""
    cores = int(re.search(r"(\d+) cores", text).group(1))
    sections = dict.fromkeys(("gpus:", "rdma nics:"), 0)
    current = None
    for line in text.splitlines():
        if line in sections or line.startswith("rdma nics:"):
            current = line if line in sections else None
        elif line.startswith("  ") and current:
            sections[current] += 1
        elif not line.startswith("  "):
            current = None
    return cores, sections["gpus:"], sections["rdma nics:"]


def rects(root, kind):
    return root.findall(f"{SVG}rect[@class='{kind}']")


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.stem)
def test_topo_and_plan_draw_every_shared_topology(fixture):
    text = run_dlaunch(["topo", "--topology-xml", fixture])
    assert text.returncode == 0, describe(text)
    cores, gpus, nics = topo_counts(text.stdout)
    topo = run_dlaunch(["topo", "--format", "svg", "--topology-xml", fixture])
    assert topo.returncode == 0, describe(topo)
    root = ET.fromstring(topo.stdout)
    assert root.tag == f"{SVG}svg"
    assert (len(rects(root, "core")), len(rects(root, "gpu")), len(rects(root, "nic"))) == (cores, gpus, nics)
    assert not any("data-rank" in r.attrib for r in root.iter()), "no plan: nothing coloured"

    args = ["--topology-xml", fixture, "--nproc-per-node", 2, "--no-python", "true"]
    plan = json.loads(run_dlaunch(["plan", "--format", "json", *args]).stdout)
    drawn = run_dlaunch(["plan", "--format", "svg", *args])
    assert drawn.returncode == 0, describe(drawn)
    root = ET.fromstring(drawn.stdout)
    assert [int(r.get("data-rank")) for r in rects(root, "rank")] == [0, 1]
    for rank in plan["ranks"]:
        mine = {int(r.get("data-core")) for r in rects(root, "core") if r.get("data-rank") == str(rank["rank"])}
        assert bool(mine) == bool(rank.get("cpuset")), (rank.get("cpuset"), mine)
        if rank.get("gpu") is not None:
            gpu = [r for r in rects(root, "gpu") if r.get("data-gpu") == str(rank["gpu"]["index"])]
            assert len(gpu) == 1 and gpu[0].get("data-rank") is not None, rank["gpu"]


def test_topo_refuses_an_unknown_format():
    proc = run_dlaunch(["topo", "--format", "png"])
    assert proc.returncode == USAGE, describe(proc)
    assert "--format" in proc.stderr, describe(proc)
