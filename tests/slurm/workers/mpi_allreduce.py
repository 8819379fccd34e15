"""An MPI program (mpi4py) started through dlaunch-mpi: MPI_Init must work as usual after the exec."""
import os

from mpi4py import MPI

comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank() + 1)
size = comm.Get_size()
assert comm.Get_rank() == int(os.environ["RANK"]) and size == int(os.environ["WORLD_SIZE"])
assert total == size * (size + 1) // 2
if comm.Get_rank() == 0:
    print(f"MPI OK size={size} sum={total}", flush=True)
