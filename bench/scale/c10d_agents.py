#!/usr/bin/env python3
"""N dlaunch agents on this machine in torchrun's c10d form, one worker each: what grows with N.

    bench/scale/c10d_agents.py DLAUNCH [--agents 4,16,64,256] [--settle-s 4] [--timeout-s 300] [--keep]
                               [--dynamic-worker | --worker PATH] [--agent-arg ARG ...] [--no-hold]
                               [--callgrind I] [--perf FILE]

Agent i runs `DLAUNCH --nnodes N --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:PORT
--local-addr 127.0.X.Y --max-restarts 1 --restart-backoff 0 --no-python restart_worker` (a distinct
loopback address per agent; agent 0 has 127.0.0.1 and so hosts the rendezvous and leads the group). The
worker is bench/restart_worker.cpp, linked statically (g++ -static): no Python in the measured path, and
no dynamic loading either (a dynamically linked C++ worker costs ~1.7 ms of CPU per exec on the 2-core VM
against ~0.8 ms static: ~1 CPU-second of 1,024 workers' starts that is not the launcher's; --dynamic-worker
builds it as before 2026-11-28, for comparisons with older figures; --worker takes one built elsewhere, for a
machine without g++). DLAUNCH `floor` builds bench/scale/floor_agent.cpp (g++ -O2) and runs it instead: the
least N agents can do on this machine, on the same command line, measured the same way (plot.py --floor);
`floor --agent-arg --floor-beats`: the same with dlaunch's heartbeat duty (beats both ways once a second).
Each --agent-arg ARG is added to every agent's options (e.g. --no-health-check). The last rank fails once
every rank runs and --settle-s passed; on the next attempt every rank runs until every rank runs (a FIFO this
script holds open until then, $BENCH_HOLD), then exits 0: the ranks that started first do not end, and their
agents with them, while the last ones still start (as training would not). --no-hold: they exit at once, as
before 2026-11-28 (evening), for comparisons with older figures. Measured, per N:
  rendezvous  the last agent's start (its fork by this script) -> every worker of attempt 0 running
  restart     the failure -> every worker of attempt 1 running
  leader      agent 0's CPU (utime+stime) per second over the settle time, with N-1 members heartbeating;
              its RSS and open descriptors then
  member      one member's RSS (agent 1)
  restart CPU the leader's CPU, and the mean member's, from the failure until every worker of attempt 1
              runs, less what each spent at the steady rate measured just before (/proc/PID/schedstat);
              and how often the mean member ran on a CPU then (schedstat's timeslices, less the steady rate),
              and its minor page faults then (stat's minflt, less the steady rate). The steady rate is taken
              off the restart's window too: the heartbeats go on during a restart. (Until 2026-11-29, noon,
              it was not: the beats during the restart, N a second for a window that grows with N, counted
              as the restart's, ~13 ms of the leader's 42 ms at 1,024 agents.)
  start CPU   every agent's CPU, and minor page faults, from its start until every worker of attempt 0 runs
              (seen by this script, which looks every 50 ms), per agent: one agent's share of the rendezvous
  agents CPU  every agent's CPU per second over the settle time (the leader's and the members' steady rates):
              the background a restart shares this machine with (heartbeats: one node each on a cluster)
  restart on free CPU  the restart scaled to the CPU that background leaves: restart x (CPUs - agents CPU) /
              CPUs, with this machine's CPUs (sched_getaffinity). On two cores N agents' heartbeats take a
              share of the machine that grows with N, during a restart that grows with N: a bend that a cluster,
              where each agent has its own node, does not have
--callgrind I runs agent I (a member when I > 0) under `valgrind --tool=callgrind`, its profile written to
callgrind.nN.out in the current directory: the instructions one agent spends, from start to end, at each N
(callgrind_annotate; its times in the table are then not comparable). --perf FILE records the whole machine
(`perf record -a -g`, to FILE.nN) from a moment before the failure until every worker of attempt 1 runs: where
the restart's CPU goes, the kernel's included (`perf report --sort comm,dso -i FILE.nN`); the CPU columns are
then not comparable. Agents run with DLAUNCH_RDZV_SECRET set
and --log-dir under a temporary directory; --keep keeps it (the agents' output, agent<i>.log, and the workers'
bench.log), whose path is printed. CLOCK_MONOTONIC is one clock for every process here, so the workers'
timestamps and this script's subtract. SIGTERM and SIGHUP end it as Ctrl-C does, killing the agents it
started.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

if "-h" in sys.argv or "--help" in sys.argv:
    sys.exit(print(__doc__.strip()))
if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
    sys.exit("usage: c10d_agents.py DLAUNCH|floor [options]: DLAUNCH first (--help says more)")
here = os.path.dirname(os.path.abspath(__file__))
dlaunch = sys.argv[1] if sys.argv[1] == "floor" else os.path.abspath(sys.argv[1])
# SIGTERM or SIGHUP ends it as Ctrl-C does: through one()'s `finally`, which kills the agents it started (until
# 2026-11-30 they were left running, one holding its rendezvous port for the next run).
for number in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(number, signal.default_int_handler)


def option(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


counts = [int(n) for n in option("--agents", "4,16,64,256").split(",")]
settle = float(option("--settle-s", "4"))
limit = float(option("--timeout-s", "300"))
keep = "--keep" in sys.argv
hold = "--no-hold" not in sys.argv
agent_args = [sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--agent-arg"]
profiled = int(option("--callgrind", "-1"))
perf_out = option("--perf", None)
cpus = len(os.sched_getaffinity(0))


def address(i):
    return "127.0.0.1" if i == 0 else f"127.0.{1 + i // 250}.{1 + i % 250}"


def cpu_s(pid):
    """Time on a CPU, to the nanosecond (schedstat; stat's utime and stime count clock ticks, 10 ms)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


def members_cpu_s(agents, first=1):
    """The members' CPU (every agent but the leader; first=0: every agent), how often they ran (schedstat's
    timeslices), and their minor page faults (stat's minflt: the agents' own, not their workers')."""
    total, slices, faults = 0.0, 0, 0
    for a in agents[first:]:
        try:
            with open(f"/proc/{a.pid}/schedstat") as f:
                fields = f.read().split()
            with open(f"/proc/{a.pid}/stat") as f:
                minflt = int(f.read().rsplit(")", 1)[1].split()[7])
            total, slices, faults = total + int(fields[0]) / 1e9, slices + int(fields[2]), faults + minflt
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total, slices, faults


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^VmRSS:\s+(\d+)", f.read(), re.M).group(1)) / 1024


def starts(text, attempt):
    return [int(t) for t in re.findall(rf"^start (\d+) {attempt} ", text, re.M)]


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def wait(what, predicate, agents):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        if all(a.poll() is not None for a in agents):
            break
        time.sleep(0.05)
    raise RuntimeError(f"{what}: not within {limit:.0f} s (or every agent ended)")


def one(n, work, worker, port):
    log = f"{work}/bench.log"
    env = dict(os.environ, DLAUNCH_RDZV_SECRET="scale-bench-secret", BENCH_LOG=log, BENCH_NPROC=str(n),
               BENCH_FAIL_RANK=str(n - 1), BENCH_SETTLE_MS=str(int(settle * 1000)))
    held = None
    if hold:  # the workers of attempt 1 read it until this script closes it (restart_worker.cpp)
        os.mkfifo(f"{work}/hold", 0o600)
        held = os.open(f"{work}/hold", os.O_RDWR | os.O_CLOEXEC)
        env["BENCH_HOLD"] = f"{work}/hold"
    agents = []
    try:
        for i in range(n):
            cmd = [dlaunch, "--nnodes", str(n), "--nproc-per-node", "1", "--rdzv-backend", "c10d",
                   "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", f"scale{n}", "--local-addr", address(i),
                   "--max-restarts", "1", "--restart-backoff", "0", "--log-dir", f"{work}/logs", *agent_args,
                   "--no-python", worker]
            if i == profiled:
                cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={os.getcwd()}/callgrind.n{n}.out"] + cmd
            agents.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                           stderr=open(f"{work}/agent{i}.log", "w")))
        t_last = time.monotonic_ns()
        text = wait("every worker of attempt 0", lambda: len(starts(read(log), 0)) >= n and read(log), agents)
        rendezvous = (max(starts(text, 0)) - t_last) / 1e6
        start_cpu, _, start_faults = members_cpu_s(agents, first=0)
        leader, member = agents[0].pid, agents[1].pid
        (c0, (m0, s0, f0), t0) = cpu_s(leader), members_cpu_s(agents), time.monotonic()
        time.sleep(max(settle - 1.5, 0.5))
        (c1, (m1, s1, f1), t1) = cpu_s(leader), members_cpu_s(agents), time.monotonic()
        cpu, members_idle, slices_idle = (c1 - c0) / (t1 - t0), (m1 - m0) / (t1 - t0), (s1 - s0) / (t1 - t0)
        faults_idle = (f1 - f0) / (t1 - t0)
        fds = len(os.listdir(f"/proc/{leader}/fd"))
        lead_rss, member_rss = rss_mb(leader), rss_mb(member)
        if perf_out:  # before the failure (it comes --settle-s after the workers started, >= 1.5 s from here)
            perf = subprocess.Popen(["perf", "record", "-a", "-g", "-q", "-o", f"{perf_out}.n{n}"])
        text = wait("every worker of attempt 1",
                    lambda: (t := read(log)) and re.search(r"^fail ", t, re.M) and len(starts(t, 1)) >= n and t,
                    agents)
        if perf_out:
            perf.send_signal(signal.SIGINT)
            perf.wait()
        fail = int(re.search(r"^fail (\d+)", text, re.M).group(1))
        restart = (max(starts(text, 1)) - fail) / 1e6
        (c2, (m2, s2, f2), t2) = cpu_s(leader), members_cpu_s(agents), time.monotonic()  # the workers are held
        steady = t2 - t1  # the restart's window too: the beats go on
        lead_restart = (c2 - c1 - cpu * steady) * 1e3
        member_restart = (m2 - m1 - members_idle * steady) * 1e3 / (n - 1)
        member_slices = (s2 - s1 - slices_idle * steady) / (n - 1)
        member_faults = (f2 - f1 - faults_idle * steady) / (n - 1)
        if held is not None:
            os.close(held)
            held = None
        codes = [a.wait(timeout=limit) for a in agents]
        return dict(n=n, rendezvous_ms=rendezvous, restart_ms=restart, leader_cpu_per_s=cpu, leader_rss_mb=lead_rss,
                    leader_fds=fds, member_rss_mb=member_rss, exits=sorted(set(codes)),
                    leader_restart_cpu_ms=lead_restart, member_restart_cpu_ms=member_restart,
                    member_restart_runs=member_slices, member_restart_faults=member_faults,
                    agents_cpu_per_s=cpu + members_idle,
                    start_cpu_ms=start_cpu * 1e3 / n, start_faults=start_faults / n,
                    restart_free_ms=restart * (cpus - cpu - members_idle) / cpus)
    finally:
        if held is not None:
            os.close(held)
        for a in agents:
            if a.poll() is None:
                a.kill()
        for a in agents:
            a.wait()


def main():
    top = tempfile.mkdtemp(prefix="dlaunch-scale-")
    worker = option("--worker", None)
    if worker is None:
        worker = f"{top}/restart_worker"
        link = [] if "--dynamic-worker" in sys.argv else ["-static"]
        subprocess.run(["g++", "-O2", *link, "-o", worker, os.path.join(here, "..", "restart_worker.cpp")], check=True)
    global dlaunch
    if dlaunch == "floor":
        dlaunch = f"{top}/floor_agent"
        subprocess.run(["g++", "-O2", "-o", dlaunch, os.path.join(here, "floor_agent.cpp")], check=True)
    print("agents  rendezvous_ms  restart_ms  leader_cpu_s/s  leader_rss_MB  leader_fds  member_rss_MB  "
          "leader_restart_cpu_ms  member_restart_cpu_ms  member_restart_runs  member_restart_faults  agents_cpu_s/s  "
          "restart_free_ms  start_cpu_ms  start_faults  exits",
          flush=True)
    failed = False
    for k, n in enumerate(counts):
        work = f"{top}/n{n}"
        os.makedirs(work)
        try:
            r = one(n, work, worker, 29600 + k)
            print(f"{r['n']:6d}  {r['rendezvous_ms']:13.0f}  {r['restart_ms']:10.0f}  {r['leader_cpu_per_s']:14.3f}  "
                  f"{r['leader_rss_mb']:13.1f}  {r['leader_fds']:10d}  {r['member_rss_mb']:13.1f}  "
                  f"{r['leader_restart_cpu_ms']:21.1f}  {r['member_restart_cpu_ms']:21.2f}  {r['member_restart_runs']:19.1f}  "
                  f"{r['member_restart_faults']:21.1f}  {r['agents_cpu_per_s']:14.3f}  {r['restart_free_ms']:15.0f}  {r['start_cpu_ms']:12.2f}  {r['start_faults']:12.0f}  "
                  f"{r['exits']}",
                  flush=True)
            if not keep:
                shutil.rmtree(work, ignore_errors=True)
        except RuntimeError as e:
            failed = True
            print(f"{n:6d}  FAILED: {e}; agents' logs kept in {work}", flush=True)
    if keep:
        print(f"kept: {top}", flush=True)
    elif not failed:
        shutil.rmtree(top, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
