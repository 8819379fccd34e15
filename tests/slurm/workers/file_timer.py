"""torchrun's watchdog from a script's side (torch.distributed.elastic.timer.FileTimerClient): a quick step inside
its timer, then a slow one whose 2 s timer expires; the launcher kills the rank. For tests/slurm/test_hangs.py and
tests/integration/test_mpirun.py."""
import os
import time

import torch.distributed.elastic.timer as timer

timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
with timer.expires(after=1, scope="quick step"):
    pass
print(f"rank {os.environ.get('RANK')}: entering the slow step", flush=True)
with timer.expires(after=2, scope="slow step"):
    time.sleep(600)
