#!/usr/bin/env python3
"""What one stranger's long line costs the group's leader (issue "Hostile networks", finding 1): two agents
in torchrun's c10d form on this machine with --max-restarts 1, a client that sends N MiB without a line end
to the group port; the leader's CPU time and resident memory before and after, from /proc.

  bench/hostile_line.py DLAUNCH [MIB]        (default 100 MiB; loopback only; ends by itself)
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def wait_for_group(port, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                if json.loads(s.recv(256).split(b"\n")[0]).get("type") == "welcome":
                    return
        except (OSError, ValueError):
            time.sleep(0.1)
    sys.exit("no group channel")


def main():
    dlaunch, mib = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100
    port = free_port()
    env = dict(os.environ, DLAUNCH_RDZV_SECRET="bench-secret-of-this-run-123")
    args = [dlaunch, "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "bench",
            "--nnodes", "2", "--max-restarts", "1", "--nproc-per-node", "1", "--no-python", "sleep", "20"]
    with tempfile.TemporaryDirectory() as d:
        host = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=open(f"{d}/host.err", "w"))
        time.sleep(0.5)
        member = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for_group(port)
            time.sleep(1)
            cpu0, rss0 = cpu_seconds(host.pid), rss_kib(host.pid)
            sent, chunk, start = 0, b"x" * (1 << 20), time.monotonic()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    while sent < mib << 20:
                        sent += s.send(chunk)
            except OSError as e:
                cut = f"cut off after {sent / (1 << 20):.1f} MiB ({e.strerror})"
            else:
                cut = f"all {mib} MiB taken"
            time.sleep(1)
            cpu1, rss1 = cpu_seconds(host.pid), rss_kib(host.pid)
            print(f"line of {mib} MiB: {cut} in {time.monotonic() - start:.2f} s; leader CPU "
                  f"+{cpu1 - cpu0:.3f} s, RSS {rss0} -> {rss1} KiB (+{rss1 - rss0} KiB); "
                  f"leader and member still running: {host.poll() is None and member.poll() is None}")
        finally:
            for p in (host, member):
                p.kill()
                p.wait()


if __name__ == "__main__":
    main()
