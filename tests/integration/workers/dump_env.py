"""Worker for the env-contract tests: writes what this rank sees as OUTDIR/rank<RANK>.json.

usage: dump_env.py [--local_rank=N] OUTDIR [ARGS...]   (ARGS are recorded in "argv")
"""
import json
import os
import sys

# torch.distributed.launch's legacy contract puts --local-rank=N / --local_rank=N before the arguments.
outdir = next(a for a in sys.argv[1:] if not a.startswith(("--local-rank=", "--local_rank=")))
out = os.path.join(outdir, f"rank{os.environ['RANK']}.json")
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
