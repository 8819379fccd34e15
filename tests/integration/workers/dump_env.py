"""Worker for the env-contract tests: writes what this rank sees as OUTDIR/rank<RANK>.json.

usage: dump_env.py OUTDIR [ARGS...]   (ARGS are recorded in "argv")
"""
import json
import os
import sys

out = os.path.join(sys.argv[1], f"rank{os.environ['RANK']}.json")
record = {
    "environ": dict(os.environ),
    "argv": sys.argv,
    "orig_argv": getattr(sys, "orig_argv", None),  # the interpreter's own command line (-u, -m, -c)
    "executable": sys.executable,
    "name": __name__,
    "unbuffered": not sys.stdout.line_buffering and getattr(sys.stdout, "write_through", False),
    "pid": os.getpid(),
}
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(record, f)
os.replace(tmp, out)  # atomic: a reader never sees half a file
print(f"dumped rank {os.environ['RANK']}")
