"""A rank for tests/gpu/device_check.py, started by dlaunch or dlaunch-mpi. One mode per check:

  ddp        NCCL: the rank's GPU, CUDA_VISIBLE_DEVICES, the GPU's UUID and the CPU binding checked from inside
             the rank, an all_reduce and one DistributedDataParallel step on the device
  gloo-cuda  gloo on CUDA tensors (ranks may share the one GPU): an all_reduce of rank+1
  cpu        gloo on the CPU (a machine without a GPU): the rendezvous and the environment only
  hang       heartbeats, then one CUDA kernel that runs far longer than --hang-timeout (torch.cuda._sleep)
             and a synchronize that waits for it; HANG_HEARTBEATS=0 sends none

It prints one line "GPU-CHECK <mode> rank R: ok ..." or "GPU-CHECK <mode> rank R: FAILED ..." (exit 1).
Expected values come from the environment: GPU_CHECK_UUID (nvidia-smi's), GPU_CHECK_CPUS (the plan's cpuset).
"""

import os
import sys
import time

import torch
import torch.distributed as dist

MODE = sys.argv[1]
RANK = int(os.environ["RANK"])
LOCAL_RANK = int(os.environ["LOCAL_RANK"])


def say(ok, text):
    print(f"GPU-CHECK {MODE} rank {RANK}: {'ok' if ok else 'FAILED'} {text}", flush=True)
    if not ok:
        sys.exit(1)


def cpu_list(cpus):
    """[0, 1, 2, 5] -> '0-2,5' (the plan's form)."""
    out, cpus = [], sorted(cpus)
    start = prev = cpus[0]
    for c in cpus[1:] + [None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if c is not None:
            start = prev = c
    return ",".join(out)


def uuid_of(device):
    props = torch.cuda.get_device_properties(device)
    uuid = str(getattr(props, "uuid", ""))
    return uuid if uuid.startswith("GPU-") or not uuid else "GPU-" + uuid


def check_binding():
    """What dlaunch promised this rank, seen from inside it."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if not visible:
        say(False, "CUDA_VISIBLE_DEVICES is not set")
    device = LOCAL_RANK % torch.cuda.device_count()
    torch.cuda.set_device(device)
    uuid, expected = uuid_of(device), os.environ.get("GPU_CHECK_UUID", "")
    if expected and uuid != expected:
        say(False, f"cuda:{device} is {uuid}, nvidia-smi's GPU is {expected}")
    cpus = cpu_list(os.sched_getaffinity(0))
    planned = os.environ.get("GPU_CHECK_CPUS", "")
    if planned and cpus != planned:
        say(False, f"runs on CPUs {cpus}, the plan says {planned}")
    return device, f"CUDA_VISIBLE_DEVICES={visible} cuda:{device}={uuid} " \
                   f"({torch.cuda.get_device_name(device)}) cpus={cpus} " \
                   f"CUDA_DEVICE_ORDER={os.environ.get('CUDA_DEVICE_ORDER', '')}"


def ddp():
    device, seen = check_binding()
    dist.init_process_group("nccl")
    t = torch.full((1024,), float(RANK + 1), device=f"cuda:{device}")
    dist.all_reduce(t)
    world = dist.get_world_size()
    if t[0].item() != world * (world + 1) / 2:
        say(False, f"all_reduce gave {t[0].item()}")
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 8).cuda(device), device_ids=[device])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(32, 64, device=f"cuda:{device}")).square().mean()
    loss.backward()
    opt.step()
    torch.cuda.synchronize()
    dist.destroy_process_group()
    say(True, f"{seen} nccl {'.'.join(map(str, torch.cuda.nccl.version()))} all_reduce={t[0].item()} "
              f"ddp-loss={loss.item():.4f} torch {torch.__version__}")


def gloo_cuda():
    device = LOCAL_RANK % torch.cuda.device_count()
    torch.cuda.set_device(device)
    dist.init_process_group("gloo")
    t = torch.full((4,), float(RANK + 1), device=f"cuda:{device}")
    dist.all_reduce(t)
    world = dist.get_world_size()
    ok = t.device.type == "cuda" and t[0].item() == world * (world + 1) / 2
    dist.destroy_process_group()
    say(ok, f"all_reduce on {t.device} gave {t[0].item()} (world {world}, "
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')})")


def cpu():
    dist.init_process_group("gloo")
    t = torch.full((4,), float(RANK + 1))
    dist.all_reduce(t)
    world = dist.get_world_size()
    dist.destroy_process_group()
    say(t[0].item() == world * (world + 1) / 2,
        f"all_reduce gave {t[0].item()} (world {world}, MASTER_ADDR={os.environ.get('MASTER_ADDR')})")


def hang():
    import dlaunch_heartbeat  # on every worker's PYTHONPATH under dlaunch

    device = LOCAL_RANK % torch.cuda.device_count()
    torch.cuda.set_device(device)
    beats = os.environ.get("HANG_HEARTBEATS", "1") != "0"
    for step in range(5):
        torch.cuda.synchronize()
        if beats:
            dlaunch_heartbeat.beat(f"step {step}")
        time.sleep(0.2)
    seconds = float(os.environ.get("HANG_KERNEL_SECONDS", "120"))
    clock_hz = torch.cuda.get_device_properties(device).clock_rate * 1000 if hasattr(
        torch.cuda.get_device_properties(device), "clock_rate") else 2e9
    print(f"GPU-CHECK hang rank {RANK}: a {seconds:.0f} s kernel starts", flush=True)
    torch.cuda._sleep(int(seconds * clock_hz))
    torch.cuda.synchronize()  # waits for the kernel: the rank is stuck here
    say(True, "the kernel ended before dlaunch saw a hang")


{"ddp": ddp, "gloo-cuda": gloo_cuda, "cpu": cpu, "hang": hang}[MODE]()
