"""A DDP job (gloo) whose rank 2 sleeps before an all_reduce in the first attempt: every other rank waits for it
in that all_reduce. For tests/slurm/test_hangs.py."""
import os
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
t = torch.ones(1)
print(f"rank {rank} ready", flush=True)
if rank == 2 and os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0":
    time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 3600)
dist.all_reduce(t)
print(f"rank {rank}: all_reduce gave {t.item()}", flush=True)
dist.destroy_process_group()
