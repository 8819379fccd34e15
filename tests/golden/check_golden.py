#!/usr/bin/env python3
"""Golden `dlaunch plan` outputs for machines in tests/data/topologies.

Each case runs `dlaunch plan --format json` for a fixture and compares the JSON with the checked-in file
tests/data/golden/<case>.json. A difference fails and is printed as a unified diff.

    check_golden.py DLAUNCH_BIN            compare (CTest runs this)
    check_golden.py DLAUNCH_BIN --regen    rewrite the golden files after an intended change; review the diff
"""
import difflib
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "data", "golden")

# name: (fixture, extra options)
CASES = {
    "jrc0386-4ranks": ("jrc0386.xml", ["--nproc-per-node", "4"]),
    "mel2001-4ranks": ("mel2001.xml", ["--nproc-per-node", "4"]),
    "nvidiaDGX2-4ranks": ("nvidiaDGX2.xml", ["--nproc-per-node", "4"]),
    "g4dnmetal-2ranks": ("g4dnmetal.xml", ["--nproc-per-node", "2"]),
    "cts1-pascal-4ranks-shared-gpus": ("cts1-pascal.xml", ["--nproc-per-node", "4"]),
    "jrc0732-8ranks-cpu-only": ("jrc0732.xml", ["--nproc-per-node", "8", "--bind", "closest"]),
    "coral-lassen-gpu-auto": ("coral-lassen.xml", ["--nproc-per-node", "gpu", "--cpus-per-rank", "4"]),
}


def plan(dlaunch, fixture, options):
    cmd = [dlaunch, "plan", "--format", "json", "--topology-xml", os.path.join("tests", "data", "topologies", fixture),
           "--master-port", "29500", "--rdzv-id", "golden", *options, "--no-python", "/bin/true"]
    # A fixed, minimal environment: the plan must not depend on who runs the test.
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    # dlaunch's sitecustomize directory is in the build tree under test.
    build = os.path.dirname(os.path.dirname(os.path.abspath(dlaunch)))
    text = re.sub(r"dlaunch-private-\d+-[A-Za-z0-9]{6}", "dlaunch-private-<PID>-XXXXXX",
                  out.stdout.replace(build, "<BUILD>"))
    data = json.loads(text)
    data.pop("hostname")
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def compare_or_regen(results, directory, regen):
    """Compares each name -> text in `results` with DIRECTORY/<name>.json (a difference is printed as a
    unified diff), or rewrites those files when `regen`. Returns the number of differences."""
    failed = 0
    for name, got in results.items():
        path = os.path.join(directory, name + ".json")
        if regen:
            with open(path, "w") as f:
                f.write(got)
            print(f"wrote {path}")
            continue
        if not os.path.exists(path):
            print(f"FAIL {name}: {path} is missing; run with --regen")
            failed += 1
            continue
        with open(path) as f:
            want = f.read()
        if got != want:
            failed += 1
            print(f"FAIL {name}: differs from {path}")
            sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), got.splitlines(True), path, "now"))
        else:
            print(f"ok   {name}")
    if not regen:
        print(f"{len(results) - failed} passed, {failed} failed")
    return failed


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    dlaunch, regen = sys.argv[1], "--regen" in sys.argv[2:]
    results = {name: plan(dlaunch, fixture, options) for name, (fixture, options) in CASES.items()}
    return 1 if compare_or_regen(results, GOLDEN, regen) else 0


if __name__ == "__main__":
    sys.exit(main())
