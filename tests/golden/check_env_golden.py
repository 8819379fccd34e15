#!/usr/bin/env python3
"""Golden worker environments: the complete environment every front-end gives a worker, byte for byte.

Each case starts real workers (tests/integration/workers/dump_env.py) under one front-end with a fixed,
minimal environment, or (SPANK) asks the plugin's own functions through tests/programs/step_env, and
compares every rank's environment and argv with tests/golden/env/<case>.json. Values that differ per run
or per machine are replaced by placeholders before the comparison (see normalize()).

    check_env_golden.py BUILD_DIR            compare (CTest runs this)
    check_env_golden.py BUILD_DIR --regen    rewrite the golden files after an intended change; review the diff
"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile

from check_golden import compare_or_regen

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden", "env")
DUMP_ENV = os.path.join(ROOT, "tests", "integration", "workers", "dump_env.py")
TOPOLOGIES = os.path.join(ROOT, "tests", "data", "topologies")
PYTHON = "/usr/bin/python3"
TIMEOUT = 60


def base_env(**extra):
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHON_EXEC": PYTHON}
    env.update(extra)
    return env


def agent(build, program, options, env=None):
    log_flag = "--log_dir" if program == "dlaunch-paddle" else "--log-dir"

    def run(out, logs):
        cmd = [os.path.join(build, "launcher", program), *options, log_flag, logs, DUMP_ENV, out]
        return [subprocess.Popen(cmd, cwd=ROOT, env=env or base_env(), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)]
    return run


def mpi_ranks(build, size, rank_env, options):
    def run(out, logs):
        return [subprocess.Popen([os.path.join(build, "launcher", "dlaunch-mpi"), *options, DUMP_ENV, out], cwd=ROOT,
                                 env=base_env(**rank_env(r)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True) for r in range(size)]
    return run


def openmpi_env(rank):
    return {"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": str(rank),
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": "0",
            "OMPI_MCA_ess_base_jobid": f"golden{os.getpid()}"}


def slurm_env(rank):
    return {"SLURM_PROCID": str(rank), "SLURM_NTASKS": "1", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
            "SLURM_NNODES": "1", "SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "3", "SLURM_JOB_NODELIST": "localhost",
            "SLURM_STEP_NODELIST": "localhost", "SLURM_STEP_TASKS_PER_NODE": "1", "SLURM_TASKS_PER_NODE": "1"}


CASES = {
    "agent-torch-2ranks": lambda b: agent(b, "dlaunch", [
        "--nproc-per-node", "2", "--nnodes", "1", "--rdzv-id", "golden", "--master-addr", "127.0.0.1",
        "--master-port", "24567", "--max-restarts", "1"]),
    "agent-all-dgx2-2ranks": lambda b: agent(b, "dlaunch", [
        "--nproc-per-node", "2", "--rdzv-id", "golden", "--master-port", "24568", "--env", "all", "--bind", "none",
        "--topology-xml", os.path.join(TOPOLOGIES, "nvidiaDGX2.xml")]),
    "agent-launch-underscore": lambda b: agent(b, "dlaunch-launch", [
        "--nproc_per_node", "2", "--master_port", "24569", "--local-rank-arg", "underscore"]),
    "agent-paddle-2ranks": lambda b: agent(b, "dlaunch-paddle", ["--nproc_per_node", "2", "--job_id", "golden"]),
    "mpi-openmpi-2ranks": lambda b: mpi_ranks(b, 2, openmpi_env, ["--master-port", "24570"]),
    "mpi-slurm-env-1task": lambda b: mpi_ranks(b, 1, slurm_env, []),
}

FREE_PORT_CASES = {"agent-paddle-2ranks"}

SPANK_CASES = {
    # Node 1 of a two-node step on a DGX-2, a .py program (run through the dlaunch-python helper).
    "spank-dgx2-node1": {
        "opts": "env=all,port=24571", "job_id": "812", "step_id": "0", "nnodes": 2, "node_id": 1, "total_tasks": 4,
        "local_global_ids": [2, 3], "argv0": "/shared/train.py", "hostname": "localhost",
        "pyexec": "/usr/libexec/dlaunch/dlaunch-python",
        "env": {"PATH": "/usr/bin:/bin", "PYTHON_EXEC": PYTHON, "SLURM_STEP_NODELIST": "localhost,localhost",
                "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
                "DLAUNCH_TOPOLOGY_XML": os.path.join(TOPOLOGIES, "nvidiaDGX2.xml")},
    },
    # Node 0 of a one-node step, a plain program, this machine's topology.
    "spank-plain-node0": {
        "opts": "port=24572,bind=none", "job_id": "813", "step_id": "1", "nnodes": 1, "node_id": 0, "total_tasks": 2,
        "local_global_ids": [0, 1], "argv0": "/bin/true", "hostname": "localhost", "pyexec": "",
        "env": {"PATH": "/usr/bin:/bin", "PYTHON_EXEC": PYTHON, "SLURM_STEP_NODELIST": "localhost",
                "SLURM_STEP_TASKS_PER_NODE": "2"},
    },
    # A watched step (hang-timeout): each task runs under dlaunch-watch, beside the helper; torchrun's
    # watchdog asked for too. The watcher adds the supervision variables itself, at run time.
    "spank-watched-node0": {
        "opts": "port=24573,bind=none,hang-timeout=30", "job_id": "814", "step_id": "0", "nnodes": 1, "node_id": 0,
        "total_tasks": 1, "local_global_ids": [0], "argv0": "/shared/train.py", "hostname": "localhost",
        "pyexec": "/usr/libexec/dlaunch/dlaunch-python",
        "env": {"PATH": "/usr/bin:/bin", "PYTHON_EXEC": PYTHON, "SLURM_STEP_NODELIST": "localhost",
                "SLURM_STEP_TASKS_PER_NODE": "1", "TORCHELASTIC_ENABLE_FILE_TIMER": "1"},
    },
}


BUILD = None  # the build tree under test (main() sets it)


def normalize(text, tmp):
    text = text.replace(tmp, "<TMP>")
    if BUILD:
        text = text.replace(BUILD, "<BUILD>")
    # Random names first: a short host name ("vm") may be part of one.
    text = re.sub(r"(<TMP>/logs/[^/\"]*_)[A-Za-z0-9]{6}/", r"\1XXXXXX/", text)
    text = re.sub(r"dlaunch-private-\d+-[A-Za-z0-9]{6}", "dlaunch-private-<PID>-XXXXXX", text)
    text = text.replace(ROOT, "<SRC>").replace(socket.gethostname(), "<HOST>")
    text = re.sub(r"golden\d+", "golden<PID>", text)
    return text


def run_case(name, start, tmp):
    out, logs = os.path.join(tmp, "out"), os.path.join(tmp, "logs")
    os.makedirs(out)
    procs = start(out, logs)
    for p in procs:
        stdout, stderr = p.communicate(timeout=TIMEOUT)
        if p.returncode != 0:
            raise SystemExit(f"{name}: {' '.join(p.args)} failed ({p.returncode}):\n{stdout}\n{stderr}")
    ranks = {}
    for f in sorted(os.listdir(out)):
        d = json.load(open(os.path.join(out, f)))
        env = d["environ"]
        # The worker's own interpreter adds these; they are not dlaunch's.
        for k in ("LC_CTYPE",):
            env.pop(k, None)
        # A value that follows this machine's CPU count, not the code (the golden files come from 2 CPUs).
        if "OMP_NUM_THREADS" in env and name.startswith(("agent-torch", "agent-launch", "agent-paddle", "mpi-")):
            env["OMP_NUM_THREADS"] = "<CPUS/RANKS>"
        ranks[env["RANK"]] = {"environ": env, "argv": d["argv"], "orig_argv": d["orig_argv"]}
    text = json.dumps(ranks, indent=2, sort_keys=True) + "\n"
    if name in FREE_PORT_CASES:
        # The master port is a free port reserved at run time (no option fixes it); the endpoints follow it.
        port = int(ranks["0"]["environ"]["MASTER_PORT"])
        for offset in range(8, -1, -1):
            text = re.sub(rf"\b{port + offset}\b", f"<PORT+{offset}>" if offset else "<PORT>", text)
    return normalize(text, tmp)


def run_spank(build, name, facts, tmp):
    path = os.path.join(tmp, "facts.json")
    json.dump(facts, open(path, "w"))
    p = subprocess.run([os.path.join(build, "tests", "step_env"), path], cwd=ROOT, capture_output=True, text=True,
                       timeout=TIMEOUT, env=base_env())
    if p.returncode != 0:
        raise SystemExit(f"{name}: step_env failed ({p.returncode}):\n{p.stderr}")
    return normalize(json.dumps(json.loads(p.stdout), indent=2, sort_keys=True) + "\n", tmp)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    global BUILD
    build, regen = os.path.abspath(sys.argv[1]), "--regen" in sys.argv[2:]
    BUILD = build
    results = {}
    for name, case in CASES.items():
        with tempfile.TemporaryDirectory(prefix="dlaunch-golden-") as tmp:
            results[name] = run_case(name, case(build), tmp)
    for name, facts in SPANK_CASES.items():
        with tempfile.TemporaryDirectory(prefix="dlaunch-golden-") as tmp:
            results[name] = run_spank(build, name, facts, tmp)
    return 1 if compare_or_regen(results, GOLDEN, regen) else 0


if __name__ == "__main__":
    sys.exit(main())
