// Bootstrap exchange for libraries that need a few bytes from some ranks on every rank (NCCL's unique
// ids): who this rank is, from dlaunch's worker environment, and an all-gather of the root ranks' blobs.
//
// Two transports, chosen per job, never mixed:
// - TCP through rank 0 for every rank a dlaunch front-end started (agent, dlaunch-mpi, srun
//   --dist-launch): rank 0 listens on MASTER_ADDR:MASTER_PORT, the port the launcher reserved for rank 0,
//   collects the roots' blobs and hands the list to every rank, then closes the port again.
// - PMIx for programs started without dlaunch (a plain mpirun, srun --mpi=pmix): roots put, everyone
//   fences, everyone gets. (After dlaunch-mpi's own PMIx connection, an application's fences were not
//   reliable under load; see identify().)
#pragma once

#include <string>
#include <vector>

#include "dlaunch/job_context.hpp"
#include "dlaunch/result.hpp"

namespace dlaunch::bootstrap {

enum class Via { Pmix, Tcp };

// The calling rank as the launcher described it.
struct Peer {
    int rank = 0;
    int size = 1;
    int local_rank = 0;
    Via via = Via::Tcp;
    std::string master_addr;  // TCP only
    int master_port = 0;      // TCP only
};

// From the env contract (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and the PMIx variables.
// With PMIx and no RANK/WORLD_SIZE (a plain mpirun), rank and size are left open (size 0) for
// this_rank() to read from PMIx. Pure.
Result<Peer> identify(const EnvMap& env);

// identify() on this process's environment, with what it left open read from PMIx.
Result<Peer> this_rank();

// The ranks that create a blob: `size` ranks split into ceil(size / ranks_per_root) contiguous blocks,
// the first rank of each block. One root (rank 0) while size <= ranks_per_root. Pure.
std::vector<int> roots(int size, int ranks_per_root);

// Ranks per root: DLAUNCH_NCCL_RANKS_PER_ROOT when set (a positive integer), else kDefaultRanksPerRoot.
constexpr int kDefaultRanksPerRoot = 1024;
Result<int> ranks_per_root(const EnvMap& env);

// Seconds an exchange waits for late ranks: DLAUNCH_BOOTSTRAP_TIMEOUT when set (a positive number), else
// kDefaultTimeoutSeconds.
constexpr double kDefaultTimeoutSeconds = 300;
Result<double> timeout_seconds(const EnvMap& env);

// Every rank receives the blobs of `roots`, in that order; `mine` is this rank's blob (used when it is
// a root). Collective: every rank of the job must call it with the same roots, in the same order as its
// other exchanges. Errors name the rank and the step that failed.
Result<std::vector<std::string>> exchange(const Peer& peer, const std::vector<int>& roots, const std::string& mine,
                                          double timeout_seconds);

std::string to_string(Via via);

}  // namespace dlaunch::bootstrap
