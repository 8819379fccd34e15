"""Every GPU path of dlaunch, checked on the machine it runs on, from a bundle (tests/gpu/bundle.sh).
Run by tests/gpu/device-check.sh; see tests/gpu/README.md. One verdict line per check:

  ok | FAIL | info   NAME   what was seen

--expect gpu: the machine has an NVIDIA GPU and every GPU path must work on it.
--expect none: it has none (CI); every GPU check must say "not present" the way a user would see it, and
the bundle's programs must still run. Every check's output goes to OUT/<check>.txt (and .json).
Exit 0 when no check failed.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKER = HERE / "workers" / "gpu_rank.py"
HANG_EXIT, NOT_READY, USAGE = 124, 78, 64


class Check:
    def __init__(self, args, bundle, out, python):
        self.expect_gpu = args.expect == "gpu"
        self.bundle, self.out, self.python = bundle, out, python
        self.results = []
        self.env = dict(os.environ, PYTHON_EXEC=python, PYTHONUNBUFFERED="1",
                        PATH=f"{bundle}/bin:{os.environ.get('PATH', '/usr/bin:/bin')}")
        self.env.pop("CUDA_VISIBLE_DEVICES", None)
        self.uuid = ""

    def run(self, name, argv, timeout=180, env=None):
        """Runs argv, keeps what it printed in OUT/<name>.txt, returns the CompletedProcess."""
        start = time.monotonic()
        try:
            proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout,
                                  env=dict(self.env, **(env or {})), stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            proc = subprocess.CompletedProcess(argv, -1, e.stdout or "", (e.stderr or "") + f"\n(timed out after {timeout} s)")
            if isinstance(proc.stdout, bytes):
                proc.stdout, proc.stderr = proc.stdout.decode(errors="replace"), proc.stderr
        took = time.monotonic() - start
        with open(self.out / f"{name}.txt", "a") as f:
            f.write(f"$ {' '.join(map(str, argv))}\n# exit {proc.returncode} after {took:.1f} s\n"
                    f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}\n")
        return proc

    def verdict(self, name, ok, detail, info=False):
        word = "info" if info else ("ok" if ok else "FAIL")
        self.results.append((name, word, detail))
        print(f"  {word:<6} {name:<22} {detail}", flush=True)


def tail(text, n=3):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-n:])


def check_bundle(c):
    """The bundle's programs run here, their libraries resolved through their RPATH."""
    unresolved = []
    for f in sorted(glob.glob(f"{c.bundle}/**/*", recursive=True)):
        if os.path.isfile(f) and open(f, "rb").read(4) == b"\x7fELF":
            ldd = subprocess.run(["ldd", f], capture_output=True, text=True, env=c.env)
            unresolved += [f"{os.path.relpath(f, c.bundle)}: {line.split()[0]}" for line in ldd.stdout.splitlines()
                           if "not found" in line and not re.match(r"\s*lib(nccl|cuda|nvidia-ml)\.so", line)]
    version = c.run("bundle", [f"{c.bundle}/bin/dlaunch", "--version"])
    glibc = subprocess.run(["ldd", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    c.verdict("bundle", not unresolved and version.returncode == 0,
              f"{version.stdout.strip()}; target {glibc.strip()}; python {c.python}" +
              (f"; unresolved: {', '.join(unresolved)}" if unresolved else "; every library resolved"))


def check_nvidia_smi(c):
    smi = shutil.which("nvidia-smi")
    if not smi:
        c.verdict("nvidia-smi", not c.expect_gpu, "not present (no nvidia-smi on PATH)")
        return
    listing = c.run("nvidia-smi", [smi, "--query-gpu=index,name,uuid,memory.total,driver_version,pci.bus_id",
                                   "--format=csv,noheader"])
    for extra in (["-q"], ["topo", "-m"], []):
        c.run("nvidia-smi", [smi, *extra])
    gpus = [line for line in listing.stdout.splitlines() if line.strip()]
    if gpus:
        c.uuid = gpus[0].split(",")[2].strip()
    c.verdict("nvidia-smi", bool(gpus) == c.expect_gpu, "; ".join(gpus) or "no GPU listed")


def check_doctor(c):
    proc = c.run("doctor", ["dlaunch", "doctor", "--format", "json"])
    c.run("doctor", ["dlaunch", "doctor"])
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        c.verdict("doctor-gpus", False, f"no JSON (exit {proc.returncode}): {tail(proc.stderr)}")
        return
    (c.out / "doctor.json").write_text(json.dumps(report, indent=2) + "\n")
    gpus = next(x for x in report["checks"] if x["name"] == "gpus")
    if c.expect_gpu:
        ok = gpus["verdict"] == "ok" and (not c.uuid or c.uuid in gpus["detail"]) and "driver" in gpus["detail"]
    else:
        ok = gpus["verdict"] == "not present"
    others = ", ".join(f"{x['name']} {x['verdict']}" for x in report["checks"] if x["name"] != "gpus")
    c.verdict("doctor-gpus", ok, f"{gpus['verdict']}: {gpus['detail']} (others: {others})")


def check_topo_and_plan(c):
    c.run("lstopo", ["lstopo-no-graphics", "--whole-io", "-v"])
    topo = c.run("topo", ["dlaunch", "topo"])
    c.run("topo", ["dlaunch", "topo", "--format", "svg"])
    section = topo.stdout.split("gpus:\n", 1)[1] if "gpus:\n" in topo.stdout else ""
    gpu_lines = [line.strip() for line in section.splitlines() if line.startswith("  ") and ": " in line][:8]
    gpu_lines = [line for line in gpu_lines if re.match(r"\d+: ", line)]
    c.verdict("topo", topo.returncode == 0 and bool(gpu_lines) == c.expect_gpu,
              f"exit {topo.returncode}: " + ("; ".join(gpu_lines[:3]) or "no GPU line: " + tail(topo.stdout, 2)))
    plan = c.run("plan", ["dlaunch", "plan", "--nproc-per-node", "gpu", "--format", "json", WORKER, "ddp"])
    if not c.expect_gpu:
        c.verdict("plan-gpu", plan.returncode == USAGE and "GPU" in plan.stderr,
                  f"exit {plan.returncode}: {tail(plan.stderr, 1)}")
        return None
    try:
        ranks = json.loads(plan.stdout)["ranks"]
    except (ValueError, KeyError):
        c.verdict("plan-gpu", False, f"exit {plan.returncode}: {tail(plan.stderr)}")
        return None
    (c.out / "plan.json").write_text(plan.stdout)
    r0 = ranks[0]
    c.verdict("plan-gpu", len(ranks) >= 1 and r0.get("gpu") is not None,
              f"{len(ranks)} rank(s); rank 0: gpu {r0.get('gpu')}, cpuset {r0.get('cpuset')}, "
              f"CUDA_VISIBLE_DEVICES={r0.get('env', {}).get('CUDA_VISIBLE_DEVICES')}")
    return r0.get("cpuset")


def ok_lines(proc, mode):
    """The ranks' ok lines, without dlaunch's "[rank]:" prefix."""
    lines = [re.sub(r"^\[\d+\]:", "", line) for line in proc.stdout.splitlines()]
    return [line for line in lines if line.startswith(f"GPU-CHECK {mode} ") and ": ok " in line]


def torch_warnings(proc):
    """What torch warns about dlaunch's environment (a variable it no longer reads, say)."""
    return [line.strip() for line in proc.stderr.splitlines() if "is deprecated" in line and "Environment variable" in line]


def check_ddp(c, cpuset):
    if not c.expect_gpu:
        c.verdict("ddp-nccl", True, "not present: no GPU (plan-gpu shows what --nproc-per-node gpu says)")
        return
    env = {"GPU_CHECK_UUID": c.uuid, "GPU_CHECK_CPUS": cpuset or ""}
    proc = c.run("ddp-nccl", ["dlaunch", "--nproc-per-node", "gpu", "--log-dir", c.out / "logs-ddp", WORKER, "ddp"],
                 env=env)
    lines, warned = ok_lines(proc, "ddp"), torch_warnings(proc)
    c.verdict("ddp-nccl", proc.returncode == 0 and len(lines) == 1 and not warned,
              f"exit {proc.returncode}: " + (lines[0].split(": ok ", 1)[1] if lines else tail(proc.stdout + proc.stderr)) +
              (f"; torch warned: {warned[0][:200]}" if warned else ""))


def check_mpi(c, cpuset):
    """dlaunch-mpi as the one rank of an Open MPI job on one node: the node-local fence with one task."""
    ompi = {"OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "1", "OMPI_COMM_WORLD_NODE_RANK": "0", "OMPI_MCA_orte_ess_num_procs": "1",
            "OMPI_MCA_ess_base_jobid": str(os.getpid()), "GPU_CHECK_UUID": c.uuid, "GPU_CHECK_CPUS": cpuset or ""}
    mode = "ddp" if c.expect_gpu else "cpu"
    proc = c.run("mpi", ["dlaunch-mpi", WORKER, mode], env=ompi)
    lines = ok_lines(proc, mode)
    c.verdict("dlaunch-mpi-" + ("nccl" if c.expect_gpu else "cpu"), proc.returncode == 0 and len(lines) == 1,
              f"exit {proc.returncode}: " + (lines[0].split(": ok ", 1)[1] if lines else tail(proc.stdout + proc.stderr)))


def check_nccl_example(c, nccl_dir):
    example = c.bundle / "share" / "dlaunch" / "examples" / "nccl_allreduce"
    env = {"LD_LIBRARY_PATH": ":".join(filter(None, [nccl_dir, os.environ.get("LD_LIBRARY_PATH", "")]))}
    if c.expect_gpu:
        proc = c.run("nccl-example", ["dlaunch", "--nproc-per-node", "gpu", "--no-python", example, 1 << 28, 10], env=env)
        ok = proc.returncode == 0 and "[rank 0] OK sum=1 over 1 ranks" in proc.stdout
        sizes = [line.split() for line in proc.stdout.splitlines() if re.match(r"^\[0\]:\s+\d+\s", line)]
        last = f"; {sizes[-1][1]} B in {sizes[-1][2]} us" if sizes else ""
        c.verdict("nccl-example", ok, f"exit {proc.returncode}: {tail(proc.stdout, 1)}{last} (libnccl from {nccl_dir})")
    else:
        proc = c.run("nccl-example", ["dlaunch", "--nproc-per-node", 1, "--no-python", example], env=env)
        said = [line for line in (proc.stdout + proc.stderr).splitlines() if "no CUDA device" in line]
        c.verdict("nccl-example", proc.returncode == 1 and bool(said),
                  f"not present: exit {proc.returncode}: {said[0].strip() if said else tail(proc.stderr, 2)}")


def check_health(c):
    nproc = "gpu" if c.expect_gpu else 1
    mode = "gloo-cuda" if c.expect_gpu else "cpu"
    proc = c.run("health-pass", ["dlaunch", "-v", "--nproc-per-node", nproc, "--log-dir", c.out / "logs-health",
                                 WORKER, mode])
    said = [line for line in proc.stderr.splitlines() if "passed before attempt 0" in line]
    gpus = "gpus ok (" if c.expect_gpu else "gpus not present ("
    c.verdict("health-pass", proc.returncode == 0 and bool(said) and gpus in said[0],
              f"exit {proc.returncode}: " + (said[0].split("health: ", 1)[-1] if said else tail(proc.stderr)))
    site = "echo no /scratch on this node; exit 1"
    proc = c.run("health-fail", ["dlaunch", "--nproc-per-node", nproc, "--health-check", site, "--log-dir",
                                 c.out / "logs-health-fail", WORKER, mode])
    summary = [line for line in proc.stderr.splitlines() if "root cause" in line]
    c.verdict("health-fail", proc.returncode == NOT_READY and "no /scratch on this node" in proc.stderr
              and not ok_lines(proc, mode), f"exit {proc.returncode}: {summary[0].strip() if summary else tail(proc.stderr, 2)}")


def check_hang(c):
    if not c.expect_gpu:
        c.verdict("hang-cuda-kernel", True, "not present: no GPU (tests/integration/test_hangs.py covers CPU ranks)")
        return
    logs = c.out / "logs-hang"
    proc = c.run("hang-cuda-kernel", ["dlaunch", "--nproc-per-node", 1, "--hang-timeout", 8, "--grace", 5,
                                      "--log-dir", logs, WORKER, "hang"], env={"HANG_KERNEL_SECONDS": "40"},
                 timeout=150)
    stacks = sorted(glob.glob(f"{logs}/*/attempt_0/0/stacks.txt"))
    native = sorted(glob.glob(f"{logs}/*/attempt_0/0/native-stacks.txt"))
    text = Path(stacks[0]).read_text() if stacks else ""
    native_text = Path(native[0]).read_text() if native else ""
    for f in stacks + native:
        shutil.copy(f, c.out / f"hang-{Path(f).name}")
    where = [line.strip() for line in text.splitlines() if "gpu_rank.py" in line][:2]
    tools = [t for t in ("eu-stack", "gdb", "py-spy") if shutil.which(t)]
    tool = next((line for line in native_text.splitlines() if line.startswith("# dlaunch")),
                "no native-stacks file (" + (", ".join(tools) or "no eu-stack, gdb or py-spy here") + ")")
    hung = [line for line in proc.stderr.splitlines() if "hang: no " in line]
    c.verdict("hang-cuda-kernel", proc.returncode == HANG_EXIT and bool(where),
              f"exit {proc.returncode}: {hung[0].split('hang: ', 1)[-1][:160] if hung else tail(proc.stderr, 2)}; "
              f"python stack: {' / '.join(where) or 'none'}; native: {tool[:120]}")
    # Without heartbeats a rank waiting for the GPU is judged by its CPU time: CUDA's default wait spins.
    proc = c.run("hang-cuda-kernel-no-heartbeat", ["dlaunch", "--nproc-per-node", 1, "--hang-timeout", 6, "--grace",
                                                   3, "--log-dir", c.out / "logs-hang-nb", WORKER, "hang"],
                 env={"HANG_HEARTBEATS": "0", "HANG_KERNEL_SECONDS": "25"}, timeout=90)
    seen = "found hung" if proc.returncode == HANG_EXIT else "not found hung (the waiting thread used CPU time)"
    c.verdict("hang-no-heartbeat", True, f"exit {proc.returncode}: {seen}", info=True)


def check_gloo_cuda(c):
    if not c.expect_gpu:
        c.verdict("gloo-cuda-2-ranks", True, "not present: no GPU")
        return
    proc = c.run("gloo-cuda", ["dlaunch", "--nproc-per-node", 2, "--log-dir", c.out / "logs-gloo", WORKER, "gloo-cuda"])
    lines = ok_lines(proc, "gloo-cuda")
    shared = [line for line in proc.stderr.splitlines() if "share" in line]
    c.verdict("gloo-cuda-2-ranks", proc.returncode == 0 and len(lines) == 2,
              f"exit {proc.returncode}: {len(lines)} of 2 ranks ok" +
              (f"; {lines[0].split(': ok ', 1)[1]}" if lines else "; " + tail(proc.stderr)) +
              (f"; dlaunch said: {shared[0].strip()[:140]}" if shared else ""))


def find_nccl(python):
    """The target's libnccl.so.2 (torch's nvidia-nccl wheel), else the loader's, else CUDA's directory."""
    code = ("import glob, os, site, sys\n"
            "roots = site.getsitepackages() + [site.getusersitepackages()] + sys.path\n"
            "hits = [h for r in roots for h in glob.glob(os.path.join(r, 'nvidia', '**', 'libnccl.so.2'), recursive=True)]\n"
            "print(os.path.dirname(hits[0]) if hits else '')\n")
    found = subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip()
    if found:
        return found
    for d in ("/usr/local/cuda/lib", "/usr/local/cuda/lib64"):
        if os.path.exists(f"{d}/libnccl.so.2"):
            return d
    return ""


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bundle", type=Path)
    p.add_argument("--expect", choices=["gpu", "none", "auto"], default="auto")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "gpu-check-out"))
    p.add_argument("--python", default=os.environ.get("PYTHON_EXEC") or shutil.which("python3"))
    args = p.parse_args()
    if args.expect == "auto":
        smi = shutil.which("nvidia-smi")
        listed = smi and subprocess.run([smi, "-L"], capture_output=True, text=True).stdout.strip()
        args.expect = "gpu" if listed else "none"
    args.out.mkdir(parents=True, exist_ok=True)
    c = Check(args, args.bundle.resolve(), args.out.resolve(), args.python)
    nccl_dir = find_nccl(args.python)
    print(f"dlaunch GPU check: expect {args.expect}; bundle {c.bundle}; outputs in {c.out}", flush=True)
    start = time.monotonic()
    check_bundle(c)
    check_nvidia_smi(c)
    check_doctor(c)
    cpuset = check_topo_and_plan(c)
    check_ddp(c, cpuset)
    check_mpi(c, cpuset)
    check_nccl_example(c, nccl_dir)
    check_health(c)
    check_gloo_cuda(c)
    check_hang(c)
    failed = [r for r in c.results if r[1] == "FAIL"]
    passed = [r for r in c.results if r[1] == "ok"]
    (c.out / "verdicts.json").write_text(json.dumps(
        {"expect": args.expect, "seconds": round(time.monotonic() - start, 1),
         "checks": [{"name": n, "verdict": v, "detail": d} for n, v, d in c.results]}, indent=2) + "\n")
    print(f"gpu-check: {len(passed)} passed, {len(failed)} failed in {time.monotonic() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
