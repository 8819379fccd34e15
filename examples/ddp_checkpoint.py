"""A checkpointing data-parallel job, CPU only (gloo): the example for Slurm requeue and preemption
becoming elastic restarts. Runs under dlaunch or torchrun (or world size 1, by hand).

    dlaunch --nproc-per-node 2 --max-restarts 3 examples/ddp_checkpoint.py --checkpoint /tmp/ckpt.pt
    torchrun --standalone --nproc-per-node 2 examples/ddp_checkpoint.py --checkpoint /tmp/ckpt.pt

Each step trains a float64 nn.Linear on a fixed global batch of synthetic samples, split across
ranks by index. Every rank fills in the per-sample gradients of its own samples (zeros elsewhere),
one all_reduce(SUM) gathers them all, and every rank adds the rows up in a fixed order: the weights
are bit for bit the same whatever the world size and wherever the run was interrupted and resumed.

Rank 0 saves {step, model, optimizer} to --checkpoint (atomically) every --save-every steps and,
when the --checkpoint-signal or SIGTERM (Slurm ending the job: scontrol requeue, preemption, KillWait
before SIGKILL) arrives on any rank, at the next step boundary; then every rank exits with
--exit-after-checkpoint. On start every rank resumes from the checkpoint if there is one.
--crash-at-step/--crash-rank/--crash-on-attempt/--crash-code make one rank fail, for tests.
Output: "start: ..." per rank; from rank 0 "checkpoint: saved step K (periodic|signal)",
"result: <sum of final weights, 10 significant digits>" and "done: steps N".
"""

import argparse
import os
import signal
import sys
import time

FEATURES, SAMPLES = 8, 96  # the fixed synthetic dataset


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", required=True, help="checkpoint file (rank 0 writes, all read)")
    p.add_argument("--steps", type=int, default=40, help="total training steps")
    p.add_argument("--step-seconds", type=float, default=0.1, help="sleep per step")
    p.add_argument("--global-batch", type=int, default=12, help="samples per step, all ranks")
    p.add_argument("--save-every", type=int, default=10, help="periodic checkpoint interval")
    p.add_argument("--checkpoint-signal", default="USR1", help="signal that asks for checkpoint+exit")
    p.add_argument("--exit-after-checkpoint", type=int, default=0, help="exit code after it")
    p.add_argument("--crash-at-step", type=int, default=None, help="crash when reaching this step")
    p.add_argument("--crash-rank", type=int, default=0, help="which rank crashes")
    p.add_argument("--crash-on-attempt", type=int, default=0, help="on which restart count (-1: every one)")
    p.add_argument("--crash-code", type=int, default=3, help="exit code of the crash")
    return p.parse_args()


def save_checkpoint(path, step, model, optimizer):
    import torch

    tmp = path + ".tmp"  # write aside, then rename: a reader never sees half a file
    torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, tmp)
    os.replace(tmp, path)


def main():
    args = parse_args()
    name = args.checkpoint_signal.upper()
    signum = int(name) if name.isdigit() else getattr(signal, name if name.startswith("SIG") else "SIG" + name)
    requested = [False]  # set by the handler, acted on at the next step boundary
    # SIGTERM too: Slurm sends it to every process of the step when it ends the job, and leaves KillWait
    # seconds before SIGKILL (dlaunch --requeue then sends the checkpoint signal as well).
    signums = {signum, signal.SIGTERM}
    for s in signums:
        signal.signal(s, lambda *_: requested.__setitem__(0, True))
    # Imported only now (it takes a second): a signal that comes during the import is not lost.
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    attempt = int(os.environ.get("DLAUNCH_RESTART_COUNT", os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")))
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none")
    # The store's connect fails ("Interrupted system call") if the signal lands during the
    # rendezvous: hold it back until the group is up; it is delivered then, not lost. Threads
    # started meanwhile (gloo's, the store's) keep it blocked, so only this thread ever takes it.
    signal.pthread_sigmask(signal.SIG_BLOCK, signums)
    dist.init_process_group(backend="gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signums)
    rank, world = dist.get_rank(), dist.get_world_size()

    # Same data, initial weights and optimizer on every rank, whatever the world size.
    gen = torch.Generator().manual_seed(1234)
    data = torch.randn(SAMPLES, FEATURES, generator=gen, dtype=torch.float64)
    target = data @ torch.linspace(-1.0, 1.0, FEATURES, dtype=torch.float64) + 0.5
    torch.manual_seed(0)
    model = nn.Linear(FEATURES, 1).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    params = list(model.parameters())
    nparams = sum(p.numel() for p in params)

    start = 0
    if os.path.exists(args.checkpoint):  # resume, possibly with another world size
        ckpt = torch.load(args.checkpoint, map_location="cpu")
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        start = ckpt["step"]
    print(f"start: rank {rank} of {world} attempt {attempt} run {run_id} resume_step {start}", flush=True)

    B = args.global_batch
    for step in range(start, args.steps):
        if (args.crash_at_step == step and rank == args.crash_rank
                and args.crash_on_attempt in (attempt, -1)):
            print(f"crash: rank {rank} at step {step} on attempt {attempt}", file=sys.stderr, flush=True)
            sys.stdout.flush()
            os._exit(args.crash_code)  # abrupt, like a real failure

        # Per-sample gradients of this rank's share of the global batch (sample j goes to rank j % world).
        grads = torch.zeros(B, nparams, dtype=torch.float64)
        for j in range(rank, B, world):
            i = (step * B + j) % SAMPLES
            model.zero_grad()
            loss = (model(data[i]) - target[i]).pow(2).sum()
            loss.backward()
            grads[j] = torch.cat([p.grad.flatten() for p in params])
        dist.all_reduce(grads, op=dist.ReduceOp.SUM)  # each row has one non-zero contributor: exact
        total = grads[0].clone()
        for row in grads[1:]:  # fixed summation order: identical on every rank and world size
            total += row
        total /= B
        offset = 0
        for p in params:
            p.grad = total[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        optimizer.step()
        time.sleep(args.step_seconds)
        done = step + 1

        # Step boundary: did any rank get the checkpoint signal?
        flag = torch.tensor([1.0 if requested[0] else 0.0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        stop = flag.item() > 0
        if stop or done % args.save_every == 0:
            if rank == 0:
                save_checkpoint(args.checkpoint, done, model, optimizer)
                print(f"checkpoint: saved step {done} ({'signal' if stop else 'periodic'})", flush=True)
            dist.barrier()  # nobody moves on (or crashes, or exits) before the file is complete
        if stop:
            dist.destroy_process_group()
            return args.exit_after_checkpoint

    if rank == 0:
        checksum = sum(p.detach().sum().item() for p in params)
        print(f"result: {checksum:.10g}", flush=True)
        print(f"done: steps {args.steps}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
