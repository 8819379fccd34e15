// dlaunch::nccl — an NCCL communicator for the calling rank without MPI or TCP bootstrap code of your own.
//
//   auto comm = dlaunch::nccl::init();          // collective: every rank of the job calls it
//   if (!comm) { std::cerr << comm.error().message() << "\n"; return 1; }
//   ncclAllReduce(..., comm->get(), stream);
//
// Works under every dlaunch launch mode: `dlaunch --nproc-per-node N`, `mpirun -np N dlaunch-mpi`,
// `srun --dist-launch`, `srun --mpi=pmix dlaunch-mpi` (and a plain `mpirun`). The calling rank and job size
// come from dlaunch's worker environment (RANK, WORLD_SIZE, LOCAL_RANK) or PMIx. The GPU is the one
// dlaunch's binding chose: CUDA device LOCAL_RANK within CUDA_VISIBLE_DEVICES (dlaunch lists local rank
// i's GPU at position i), modulo the visible device count (NCCL refuses two ranks on one GPU).
//
// Bootstrap: rank 0 (and, above kDefaultRanksPerRoot ranks, ceil(ranks / kDefaultRanksPerRoot) evenly spread roots)
// calls ncclGetUniqueId and keeps the bootstrap listener alive in its own process; the ids reach every
// rank through PMIx, or through rank 0 on MASTER_ADDR:MASTER_PORT when the rank has no PMIx (see
// dlaunch/bootstrap.hpp); then every rank calls ncclCommInitRank, or ncclCommInitRankScalable with
// several ids.
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

#include "dlaunch/bootstrap.hpp"
#include "dlaunch/result.hpp"

namespace dlaunch::nccl {

struct Options {
    int device = -1;             // CUDA device to use; -1: the one dlaunch's binding chose (see above)
    double timeout_seconds = 0;  // for the id exchange (ranks that start late); 0: $DLAUNCH_BOOTSTRAP_TIMEOUT,
                                 // else bootstrap::kDefaultTimeoutSeconds
    int ranks_per_root = 0;      // 0: $DLAUNCH_NCCL_RANKS_PER_ROOT, else bootstrap::kDefaultRanksPerRoot
};

// An initialised communicator; destroys it when it goes out of scope.
class Communicator {
public:
    Communicator(ncclComm_t comm, int rank, int size, int device, int roots)
        : comm_(comm), rank_(rank), size_(size), device_(device), roots_(roots) {}
    ~Communicator();
    Communicator(Communicator&& other) noexcept;
    Communicator& operator=(Communicator&&) = delete;
    Communicator(const Communicator&) = delete;

    ncclComm_t get() const { return comm_; }
    int rank() const { return rank_; }
    int size() const { return size_; }
    int device() const { return device_; }
    int roots() const { return roots_; }  // unique ids used: 1, or more with ncclCommInitRankScalable

private:
    ncclComm_t comm_;
    int rank_, size_, device_, roots_;
};

// The communicator of every rank of the job. Errors say which rank and which step failed.
Result<Communicator> init(const Options& options = {});

// The bootstrap alone, without a GPU: the unique ids every rank of the job will pass to NCCL (created by
// the root ranks with ncclGetUniqueId, exchanged as described above). Collective.
Result<std::vector<ncclUniqueId>> unique_ids(const bootstrap::Peer& peer, const Options& options = {});

}  // namespace dlaunch::nccl
