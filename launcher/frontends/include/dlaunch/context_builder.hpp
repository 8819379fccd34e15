// The one job-context builder: every front-end (the agent, dlaunch-mpi, the SPANK plugin) hands it the
// facts it gathered (environment, the launcher's job, the requeue attempt, a node-rendezvous assignment,
// a reserved port, the run directory) and gets the JobContext that make_plan() takes. The rules that
// were written per front-end live here once: the node's name, the run id, the restart count, the
// interpreter, MASTER_ADDR/PORT agreement, the node addresses and the interface that reaches the master.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dlaunch/attempt_io.hpp"
#include "dlaunch/job_context.hpp"
#include "dlaunch/job_setup.hpp"
#include "dlaunch/request.hpp"
#include "dlaunch/result.hpp"

namespace dlaunch {

struct ContextFacts {
    EnvMap env;                                // what the workers inherit
    std::optional<std::string> hostname;       // this node's name when the front-end knows it (SPANK)
    ScheduledJob* job = nullptr;               // the launcher's job: agents under srun/PMIx, dlaunch-mpi, SPANK
    const RequeueJob* requeue = nullptr;       // the Slurm job's attempts are the restarts
    std::optional<std::string> python;         // an interpreter the front-end chose (SPANK's python=)
    std::optional<NodeAssignment> assignment;  // from dlaunch's node rendezvous
    std::optional<int> free_port;              // a port reserved for this launch
    std::vector<std::string> local_addrs;      // this host's addresses (--ips, PS lists, rendezvous)
    std::string run_dir;                       // where logs go ("" for none)
    std::optional<std::string> random_run_id;  // --standalone: the run id drawn for it
    std::string python_hook_dir;               // dlaunch's sitecustomize.py directory ("" when not found)
    // Where the front-end would serve torchrun's watchdog FIFO (the agent does); used when the environment
    // turns it on (TORCHELASTIC_ENABLE_FILE_TIMER=1) without naming one (TORCHELASTIC_TIMER_FILE).
    std::optional<std::string> watchdog_fifo;
    std::string heartbeat_fifo;  // where the front-end reads heartbeats ("" : it does not)
};

// Builds the context; with a job, agrees on MASTER_ADDR/PORT with its other tasks first (a PMIx fence,
// the node-local fence, or the job's first node). Errors are launch failures (nothing was started).
Result<JobContext> build_job_context(const LaunchRequest& request, ContextFacts facts);

}  // namespace dlaunch
