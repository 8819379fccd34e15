// Gathering what a parallel launcher says (PMIx, Slurm, Open MPI) and agreeing on MASTER_ADDR/PORT,
// for the front-ends that run under one: `dlaunch` agents (one per node) and `dlaunch-mpi` (one per rank).
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "dlaunch/job_context.hpp"
#include "dlaunch/node_rendezvous.hpp"
#include "dlaunch/pmix/job_source.hpp"
#include "dlaunch/request.hpp"
#include "dlaunch/scheduler.hpp"

namespace dlaunch {

struct ScheduledJob {
    SchedulerInfo info;
    std::unique_ptr<pmix::Exchange> session;  // PMIx; null when the facts came from environment variables
    bool node_local = false;  // every rank is on this node: agree through agree_on_this_node(), not PMIx
    // The facts are read once for all of this node's ranks (the SPANK plugin in slurmstepd), not by each
    // rank's own process: Slurm placed them, and there is no process per rank to count on the node.
    bool whole_node = false;
};

// Which sources a front-end may take a job from.
enum class RankSources {
    PmixFirst,  // the agent: PMIx, else Slurm's variables, else Open MPI's
    // dlaunch-mpi, first found wins (docs/mpi-launchers.md has the same table):
    //   1. Open MPI's variables, when they say every rank runs on this node (agreed by agree_on_this_node())
    //   2. PMIx (PMIX_NAMESPACE or PMIX_RANK): mpirun, srun --mpi=pmix
    //   3. PMI (PMI_FD, or PMI_PORT with PMI_ID): Hydra's mpiexec, srun --mpi=pmi2, flux run
    //   4. the launcher's own variables: OMPI_COMM_WORLD_*, PALS_*, MV2_COMM_WORLD_*
    //   5. SLURM_*, only in a task of an srun step: below the others because every process started inside
    //      a job inherits them (Hydra's ranks get their proxy's, a batch script's children the script's)
    EveryLauncher,
};

// For dlaunch-mpi: see RankSources; an Error naming the ways to start when none is there, and an Error
// naming the source when it cannot be this process's (a batch script's SLURM_PROCID).
Result<ScheduledJob> detect_job_for_rank(const EnvMap& env, RankSources sources = RankSources::PmixFirst);

// For the dlaunch agent: the launcher that started it, if any (PMIx, or an srun step); nullopt when it
// runs on its own (a shell, an sbatch script).
Result<std::optional<ScheduledJob>> detect_job_for_agent(const EnvMap& env);

// MASTER_ADDR/MASTER_PORT the same on every task. With PMIx or PMI: task 0 picks its host name (or
// --master-addr) and a free port (or --master-port), publishes them, every task publishes its host and
// local rank, and all fence; then each task checks the ranks the launcher placed on its node
// (check_node_peers).
// Without: the job's first node (its address from Slurm when the name does not resolve) and a port derived
// from the job and step ids inside --port-range, once count_this_nodes_ranks() found this node's ranks
// distinct (unless the job is read for the `whole_node`).
Result<AgreedMaster> agree_master(ScheduledJob& job, const LaunchRequest& request);

// What a rank of this node published ("HOST LOCAL_RANK"), by rank.
struct PeerClaim {
    int rank = 0;
    std::string host;
    int local_rank = 0;
};
// Whether the ranks `info` places on this node say they run on `host` with their local ranks in order;
// an Error naming the source and the first rank that does not (one world, or every rank stops).
Status check_node_peers(const SchedulerInfo& info, const std::string& host, const std::vector<PeerClaim>& claims);

// The master a task that hosts it chooses: --master-addr, else this host's name; --master-port, else a
// free port reserved here.
Result<AgreedMaster> master_on_this_host(const LaunchRequest& request);

// The node-local fence (node_fence_io.cpp): the first task to bind an abstract Unix socket named after the
// job gathers the others' ranks, reserves a free port (or --master-port) on this host (or --master-addr)
// and answers everybody; a task that does not arrive within --fence-timeout is named in the error.
Result<AgreedMaster> agree_on_this_node(const SchedulerInfo& info, const LaunchRequest& request);

// What claim_on_this_node() claims: this process's rank in the job, or its local rank on this node.
enum class Claim { Rank, LocalRank };

// Holds a name for this process on the node (an abstract socket named after the job, step and number) for
// as long as it lives, and with `keep_across_exec` for as long as the program it execs lives too; an Error
// naming the source when another process of this user holds it already ("two processes on this node say
// they are rank 3 (SLURM_PROCID)").
Status claim_on_this_node(const SchedulerInfo& info, Claim what, bool keep_across_exec);

// For a job read from variables alone (SLURM_*, PALS_*): this rank claims its name on the node (a second
// process with the same rank finds it taken), then, with several ranks here, the same fence among this
// node's ranks only: every one arrives with its rank and local rank, each distinct, within --fence-timeout.
// An Error naming the source ("two processes on this node say they are rank 3 (SLURM_PROCID)") when not.
// The master is agreed without it.
Status count_this_nodes_ranks(const SchedulerInfo& info, const LaunchRequest& request);

// dlaunch's node rendezvous (node_rendezvous.hpp) for a request that needs_node_rendezvous() or is
// static_form_across_nodes(): hosts it (calling `announce` with the HOST:PORT to give the other nodes) or
// joins it, and waits for the nodes until --join-timeout. `own` is what this node brings (its workers and
// role). A node of the run that cannot join it (other worker options, a rank taken) ends the rendezvous at
// once on every node. When keeps_door_open(), node 0's Met holds its door and the others' say where it is.
Result<Met> node_rendezvous(const LaunchRequest& request, const std::vector<std::string>& local_addrs,
                            const NodeShare& own, const MeetingTerms& terms,
                            const std::function<void(const std::string& master)>& announce);

// Every node's IPv4 address in node-rank order, from the launcher's node names (resolved, else Slurm's
// NodeAddr); {} when the names are not known. For Paddle's endpoint lists.
std::vector<std::string> scheduled_node_addresses(const SchedulerInfo& info);

// TORCHELASTIC_RUN_ID under a launcher: --rdzv-id when given, else "<job>.<step>" (or the job id).
std::string scheduled_run_id(const SchedulerInfo& info, const LaunchRequest& request);

}  // namespace dlaunch
