#!/usr/bin/env python3
"""Every dlaunch binary and the SPANK plugin is hardened: full RELRO (GNU_RELRO + BIND_NOW), a stack
protector, position-independent executables, and (in optimised builds) fortified libc calls.

    check_hardening.py FILE...        exits 1 naming each file and what it lacks
"""
import subprocess
import sys


def readelf(*args):
    return subprocess.run(["readelf", *args], capture_output=True, text=True, check=True).stdout


def missing(path):
    dynamic, segments, symbols = readelf("-d", path), readelf("-lW", path), readelf("-sW", path)
    lacks = []
    if "GNU_RELRO" not in segments:
        lacks.append("RELRO (-Wl,-z,relro)")
    if "BIND_NOW" not in dynamic:
        lacks.append("BIND_NOW (-Wl,-z,now)")
    if "__stack_chk_fail" not in symbols:
        lacks.append("stack protector (-fstack-protector-strong)")
    if not path.endswith(".so") and "PIE" not in dynamic:
        lacks.append("PIE (-fPIE -pie)")
    if "--fortify" in sys.argv and path.endswith(("dlaunch", "dlaunch-mpi", ".so")) and "_chk@" not in symbols:
        lacks.append("_FORTIFY_SOURCE=2")
    return lacks


def main():
    files = [a for a in sys.argv[1:] if not a.startswith("--")]
    bad = 0
    for path in files:
        lacks = missing(path)
        print(f"{'FAIL' if lacks else 'ok  '} {path}" + (": lacks " + ", ".join(lacks) if lacks else ""))
        bad += bool(lacks)
    print(f"{len(files) - bad} passed, {bad} failed")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
