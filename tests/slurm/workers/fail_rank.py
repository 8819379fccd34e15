"""RANK == argv[1] exits with argv[2] at once; the others wait (as in a collective) until stopped."""
import os
import sys
import time

if os.environ["RANK"] == sys.argv[1]:
    print(f"rank {sys.argv[1]} gives up", file=sys.stderr, flush=True)
    sys.exit(int(sys.argv[2]))
time.sleep(60)
