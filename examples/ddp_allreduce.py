"""A minimal PyTorch DistributedDataParallel job, CPU only (gloo), for dlaunch or torchrun.

    dlaunch --nproc-per-node 4 examples/ddp_allreduce.py

Every worker reads its place in the job from the environment the launcher sets (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT), trains a tiny model for a few steps with DDP, then checks a
collective by hand: an all_reduce of (rank + 1) over all ranks must give 1 + 2 + ... + world =
world * (world + 1) / 2. Rank 0 prints "OK world=<N> sum=<S>"; any mismatch exits non-zero, which
dlaunch reports as the run's failure.
"""

import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def let_go(*tensors, timeout=2.0):
    """Wait until torch's gloo threads hold none of these tensors (what a finished collective leaves them for a
    moment), at most `timeout` seconds. With torch 2.6 on Python 3.13 (Debian 13), a tensor that a gloo thread
    lets go of last, after Python did, is freed in that thread; once the interpreter shuts down, that aborts the
    process ("terminate called without an active exception", exit status 134) after the work is done. DDP
    keeps the process group, so destroy_process_group() does not end those threads first. Older torch has no
    Tensor._use_count() (and was not seen to abort): nothing to wait for there."""
    deadline = time.monotonic() + timeout
    while (any(getattr(t, "_use_count", lambda: 1)() > 1 for t in tensors)
           and time.monotonic() < deadline):
        time.sleep(0.001)


def main():
    # "env://" (the default): rank, world size and the rank-0 store address come from the environment.
    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])

    # A few DDP training steps: gradients are averaged across ranks during backward(), so every rank
    # ends with the same weights although each one saw different data.
    torch.manual_seed(0)  # same initial weights everywhere (DDP also broadcasts rank 0's)
    model = DDP(nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.randn(16, 8, generator=torch.Generator().manual_seed(rank))  # this rank's shard
    target = data.sum(dim=1, keepdim=True)
    for _ in range(3):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(data), target)
        loss.backward()
        optimizer.step()

    # The weights must agree on every rank: compare each rank's with the average over all ranks.
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    mean = weights.clone()
    dist.all_reduce(mean)
    mean /= world
    in_sync = torch.allclose(weights, mean, atol=1e-6)

    # The collective check: sum of (rank + 1) over all ranks.
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    expected = world * (world + 1) / 2

    ok = in_sync and value.item() == expected
    if not ok:
        print(f"FAILED rank={rank} world={world} sum={value.item()} expected={expected} "
              f"weights_in_sync={in_sync}", file=sys.stderr)
    elif rank == 0:
        print(f"OK world={world} sum={value.item()}")

    let_go(mean, value)
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
