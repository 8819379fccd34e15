"""Binding on the real machine (no GPU needed): what the plan says is what the workers get."""
import json
import os
import re
import subprocess

import pytest

from conftest import USAGE

DLAUNCH = os.environ.get("DLAUNCH_BIN", "")
PYTHON = os.environ.get("PYTHON_EXEC", "/usr/bin/python3")

# Each worker reports the CPUs it may run on (its affinity) in list form.
REPORT = (
    "import os, json\n"
    "cpus = sorted(os.sched_getaffinity(0))\n"
    "print(json.dumps({'rank': int(os.environ['RANK']), 'cpus': cpus,"
    " 'omp': os.environ.get('OMP_NUM_THREADS')}))\n"
)


def require_binary():
    assert DLAUNCH and os.path.exists(DLAUNCH), "DLAUNCH_BIN must name the built dlaunch binary"


def to_list(cpus):
    """[0,1,2,5] -> '0-2,5' (the form dlaunch prints)."""
    out, run = [], []
    for c in cpus:
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def usable_cpus():
    return len(os.sched_getaffinity(0))


def run(args, **kw):
    return subprocess.run([DLAUNCH, *args], capture_output=True, text=True, timeout=120, **kw)


def test_workers_are_bound_to_the_planned_cpusets(tmp_path):
    require_binary()
    nproc = min(2, usable_cpus())
    common = ["--bind", "closest", "--nproc-per-node", str(nproc), "--master-port", "29731", "--no-python",
              PYTHON, "-c", REPORT]
    plan = run(["plan", "--format", "json", *common])
    assert plan.returncode == 0, plan.stderr
    planned = {r["rank"]: r["cpuset"] for r in json.loads(plan.stdout)["ranks"]}
    assert all(planned.values()), planned

    result = run(common)
    assert result.returncode == 0, result.stderr
    seen = {}
    for line in result.stdout.splitlines():
        payload = json.loads(line.split("]:", 1)[1])
        seen[payload["rank"]] = payload
    assert sorted(seen) == list(range(nproc))
    for rank, report in seen.items():
        assert to_list(report["cpus"]) == planned[rank], (rank, report, planned)
        # OMP_NUM_THREADS = the cores in the rank's cpuset (one hardware thread per core here or more).
        assert int(report["omp"]) >= 1
    all_cpus = [c for r in seen.values() for c in r["cpus"]]
    assert len(all_cpus) == len(set(all_cpus)), "cpusets must be disjoint"


def test_bind_none_leaves_affinity_alone():
    require_binary()
    result = run(["--bind", "none", "--nproc-per-node", "2", "--no-python", PYTHON, "-c", REPORT])
    assert result.returncode == 0, result.stderr
    mine = sorted(os.sched_getaffinity(0))
    for line in result.stdout.splitlines():
        assert json.loads(line.split("]:", 1)[1])["cpus"] == mine


def test_more_ranks_than_cores_with_bind_closest_is_a_usage_error(tmp_path):
    require_binary()
    marker = tmp_path / "started"
    result = run(["--bind", "closest", "--nproc-per-node", str(usable_cpus() + 1), "--no-python", "touch", str(marker)])
    assert result.returncode == USAGE
    assert result.stderr.startswith("dlaunch: bind: ")
    assert "whole cores usable" in result.stderr and "--bind none" in result.stderr
    assert not marker.exists()


def test_cpus_per_rank_that_does_not_fit_is_a_usage_error(tmp_path):
    require_binary()
    marker = tmp_path / "started"
    result = run(["--cpus-per-rank", str(usable_cpus()), "--nproc-per-node", "2", "--no-python", "touch", str(marker)])
    assert result.returncode == USAGE
    assert result.stderr.startswith("dlaunch: bind: --cpus-per-rank ")
    assert not marker.exists()


@pytest.mark.parametrize("content", [None, "<topology><object"])
def test_missing_or_corrupt_topology_xml_is_a_usage_error(tmp_path, content):
    require_binary()
    path = tmp_path / "topo.xml"
    if content is not None:
        path.write_text(content)
    result = run(["plan", "--topology-xml", str(path), "--no-python", "/bin/true"])
    assert result.returncode == USAGE
    assert result.stderr.startswith(f"dlaunch: topology: {path}: ")
    env = dict(os.environ, DLAUNCH_TOPOLOGY_XML=str(path))
    assert run(["topo"], env=env).returncode == USAGE


def test_devices_naming_absent_gpus_is_a_usage_error():
    require_binary()
    source = os.environ.get("DLAUNCH_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    xml = os.path.join(source, "tests", "data", "topologies", "cts1-pascal.xml")
    result = run(["plan", "--topology-xml", xml, "--devices", "0,2", "--no-python", "/bin/true"])
    assert result.returncode == USAGE
    assert result.stderr.strip() == ("dlaunch: plan: --devices: device 2 does not exist; "
                                     "this node has 2 usable GPU(s), numbered 0-1")


def test_topo_prints_gpus_nics_numa_and_the_affinity_matrix():
    require_binary()
    source = os.environ.get("DLAUNCH_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    xml = os.path.join(source, "tests", "data", "topologies", "jrc0386.xml")
    result = run(["topo", "--topology-xml", xml])
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "gpus:\n  0: 0000:03:00.0 nvidia" in out
    assert "mlx5_2: 0000:c3:00.0, netdev ib2, numa 5, ports 1 (active)" in out
    assert "numa nodes:\n  0: cpus 0-15,128-143" in out
    matrix = out.split("gpu x nic affinity")[1].splitlines()[2:6]
    assert [row.split()[0] for row in matrix] == ["gpu0", "gpu1", "gpu2", "gpu3"]
    assert all(row.split()[1:].count("PIX") == 1 and row.split()[1:].count("SYS") == 3 for row in matrix)


def test_topology_is_discovered_once_per_boot_and_then_read_from_the_cache(tmp_path):
    require_binary()
    env = dict(os.environ, TMPDIR=str(tmp_path))
    first = run(["topo"], env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("topology of this machine\n")
    boot = open("/proc/sys/kernel/random/boot_id").read().strip()
    cache = tmp_path / f"dlaunch-topology-{os.geteuid()}" / f"machine-whole-{boot}.xml"
    assert cache.is_file()
    # Read at every start: it keeps what dlaunch reads, not the CPU caches, which cost most of hwloc's import.
    export = cache.read_text()
    assert 'type="Core"' in export or 'type="PU"' in export, export
    assert not re.search(r'type="(L\dCache|L\diCache|MemCache)"', export), export
    second = run(["topo"], env=dict(env, SLURM_JOB_ID="4242"))  # any job on this node reuses it
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines()[0] == f"topology of this machine (cached in {cache})"
    assert second.stdout.splitlines()[1:] == first.stdout.splitlines()[1:]


def test_torchruns_numa_binding_and_virtual_local_rank_on_a_four_gpu_node():
    """torchrun's --numa-binding node: each rank on every core of its GPU's NUMA node (JURECA-DC: one A100 per
    NUMA node of 16 cores); --virtual-local-rank: LOCAL_RANK=0 and only its own GPU visible."""
    require_binary()
    source = os.environ.get("DLAUNCH_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    xml = os.path.join(source, "tests", "data", "topologies", "jrc0386.xml")
    result = run(["plan", "--format", "json", "--topology-xml", xml, "--nproc-per-node", "4", "--numa-binding", "node",
                  "--virtual-local-rank", "--no-python", "/bin/true"])
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["bind"] == "numa"
    numa_cpus = {3: "48-63,176-191", 1: "16-31,144-159", 7: "112-127,240-255", 5: "80-95,208-223"}
    for r in plan["ranks"]:
        assert r["env"]["LOCAL_RANK"] == "0" and r["local_rank"] == r["rank"]
        assert r["env"]["CUDA_VISIBLE_DEVICES"] == str(r["gpu"]["index"]), "its own GPU only"
        assert r["cpuset"] == numa_cpus[int(r["mems"])], r
    socket = run(["plan", "--format", "json", "--topology-xml", xml, "--nproc-per-node", "4", "--numa-binding",
                  "socket", "--no-python", "/bin/true"])
    assert socket.returncode == 0, socket.stderr
    ranks = json.loads(socket.stdout)["ranks"]
    assert [r["cpuset"] for r in ranks] == ["0-63,128-191"] * 2 + ["64-127,192-255"] * 2
    assert {r["env"]["OMP_NUM_THREADS"] for r in ranks} == {"32"}, "two ranks share a socket's 64 cores"
    both = run(["--numa-binding", "node", "--bind", "closest", "--no-python", "/bin/true"])
    assert both.returncode == USAGE
    assert both.stderr.strip() == "dlaunch: cli: --numa-binding and --bind set the same thing; give one of them"


def test_a_run_planned_for_another_machine_is_refused_before_it_starts(tmp_path):
    marker = tmp_path / "started"
    script = tmp_path / "t.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    xml = os.path.join(os.environ["DLAUNCH_SOURCE_DIR"], "tests", "data", "topologies", "g4dnmetal.xml")
    result = run(["--nproc-per-node", "2", "--topology-xml", xml, str(script)])
    assert result.returncode == USAGE, result.stderr
    assert f"bind: --topology-xml {xml}: rank 0's cpus " in result.stderr, result.stderr
    assert "are not all usable here (cpus " in result.stderr, result.stderr
    assert not marker.exists()
    plan = run(["plan", "--nproc-per-node", "2", "--topology-xml", xml, str(script)])
    assert plan.returncode == 0, plan.stderr  # looking at its plan is what the file is for
