"""Writes this rank's environment, host node and CPU affinity as JSON to OUTDIR/rank<RANK>.json."""
import json
import os
import sys

out = sys.argv[1]
rank = os.environ.get("RANK", os.environ.get("PADDLE_TRAINER_ID"))
with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
    json.dump({"env": dict(os.environ), "node": os.environ.get("SLURMD_NODENAME"),
               "cpus": sorted(os.sched_getaffinity(0)), "argv": sys.argv}, f)
