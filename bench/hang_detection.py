#!/usr/bin/env python3
"""Hang detection (issue "Hangs"): how long after the configured timeout dlaunch finds a silent rank, how
long the stacks take, and what watching costs the agent.

    bench/hang_detection.py [--dlaunch build/launcher/dlaunch] [--reps 5]

1. Detection latency: 4 ranks print one line and fall silent (`sleep`), --hang-timeout T for T in 2, 5, 10.
   Reported: detection time (failure.json's root-cause epoch, taken when the hang is found, before the stacks)
   minus each rank's last output minus T, for the rank found; and detection -> dlaunch's exit (native stacks of
   4 processes by eu-stack, SIGTERM, reap).
2. The same with 4 Python ranks (faulthandler dumps + eu-stack of each): detection -> exit.
3. Agent CPU: 8 ranks that print a line every 0.5 s for 20 s (progress: nobody hangs), the agent's own CPU time
   (/proc/<pid>/schedstat) from 1 s to 19 s, per rank per second of watching, for: no option (the heartbeat FIFO, a 1 s tick), --hang-timeout 10 (CPU sampled every
   1 s), --hang-timeout 1 (every 0.1 s), TORCHELASTIC_ENABLE_FILE_TIMER=1 (0.1 s tick, the watchdog FIFO).
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("--dlaunch", default=os.path.join(os.path.dirname(__file__), "..", "build", "launcher", "dlaunch"))
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--only", choices=["detection", "cpu"], help="run one part")
args = ap.parse_args()
DLAUNCH = os.path.abspath(args.dlaunch)


def hang_run(timeout, python, tmp):
    logs = os.path.join(tmp, "logs")
    if python:
        script = os.path.join(tmp, "silent.py")
        with open(script, "w") as f:
            f.write("import time\nprint(time.time(), flush=True)\ntime.sleep(600)\n")
        cmd = [DLAUNCH, "--nproc-per-node", "4", "--hang-timeout", str(timeout), "--log-dir", logs, script]
    else:
        cmd = [DLAUNCH, "--nproc-per-node", "4", "--hang-timeout", str(timeout), "--log-dir", logs, "--no-python",
               "bash", "-c", "date +%s.%N; exec sleep 600"]
    env = dict(os.environ, PYTHON_EXEC="/usr/bin/python3", TMPDIR=tmp)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    end = time.time()
    assert proc.returncode == 124, proc.stderr
    run_dir = glob.glob(os.path.join(logs, "*"))[0]
    root = json.load(open(os.path.join(run_dir, "failure.json")))["root_cause"]
    last = {}
    for line in proc.stdout.splitlines():
        rank, _, value = line.partition(":")
        last[int(rank.strip("[]"))] = float(value)
    found = root["epoch"]
    return found - last[root["rank"]] - timeout, end - found


def detection(python):
    for timeout in ([2, 5, 10] if not python else [5]):
        late, tail = [], []
        for _ in range(args.reps):
            with tempfile.TemporaryDirectory() as tmp:
                a, b = hang_run(timeout, python, tmp)
            late.append(a)
            tail.append(b)
        print(f"{'python' if python else 'sleep '} ranks, --hang-timeout {timeout:>2}: found after timeout + "
              f"median {statistics.median(late) * 1000:.0f} ms (max {max(late) * 1000:.0f}); found -> exit "
              f"median {statistics.median(tail) * 1000:.0f} ms (max {max(tail) * 1000:.0f})")


def agent_cpu(options, env_extra, ranks=8, seconds=20):
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TMPDIR=tmp, **env_extra)
        ticking = f"for i in $(seq {seconds * 2}); do echo tick; sleep 0.5; done"
        proc = subprocess.Popen([DLAUNCH, "--nproc-per-node", str(ranks), *options, "--no-python", "bash", "-c",
                                 ticking], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
        start = cpu_of(proc.pid)
        time.sleep(seconds - 2)
        used = cpu_of(proc.pid) - start
        proc.wait(timeout=60)
    return used / ranks / (seconds - 2)


def cpu_of(pid):
    """The agent's own CPU time in seconds, to the nanosecond (/proc/PID/schedstat; /proc/PID/stat counts ticks
    of 10 ms, too coarse here). Only the agent's own thread: its workers are not in it."""
    return int(open(f"/proc/{pid}/schedstat").read().split()[0]) / 1e9


if args.only != "cpu":
    detection(python=False)
    detection(python=True)
for name, options, env in [("no option (heartbeat FIFO, 1 s tick)", [], {}),
                           ("--hang-timeout 10 (1 s samples)", ["--hang-timeout", "10"], {}),
                           ("--hang-timeout 1 (0.1 s samples)", ["--hang-timeout", "1"], {}),
                           ("TORCHELASTIC_ENABLE_FILE_TIMER=1 (0.1 s)", [], {"TORCHELASTIC_ENABLE_FILE_TIMER": "1"})]:
    if args.only == "detection":
        break
    values = [agent_cpu(options, env) for _ in range(3)]
    print(f"agent CPU, {name:<42}: {statistics.median(values) * 1e6:.1f} us per rank per second "
          f"(runs: {', '.join(f'{v * 1e6:.1f}' for v in values)})")
