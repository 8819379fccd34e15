// `srun --dist-launch[=OPTS]` settings: site defaults from plugstack.conf arguments, then the user's OPTS.
// Pure, so the SPANK plugin stays glue. Values are treated as hostile (the plugin runs in slurmstepd):
// bounded lengths, a small alphabet, absolute paths without "..", no shell anywhere.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dlaunch/request.hpp"
#include "dlaunch/result.hpp"

namespace dlaunch {

struct DistLaunchSettings {
    std::optional<topology::BindMode> bind;   // bind=closest|numa|socket|none
    std::optional<std::vector<int>> devices;  // devices=0:1:3 (':' because OPTS is a comma list)
    std::optional<int> port;                  // port=N: a fixed MASTER_PORT
    PortRange port_range;                     // port=LOW-HIGH or site port_range=LOW-HIGH
    std::optional<std::string> python;        // python=/abs/path/python3
    std::string env = "torch";                // env=torch|paddle|all: the worker contract (docs/env-contract.md)
    int verbosity = 0;                        // verbose, verbose=N, or site log=quiet|info|verbose|debug
    std::string pyexec;                       // site only: path of the dlaunch-python helper
    // requeue: the batch job's attempts are the restarts (docs/requeue.md, "srun --dist-launch"): a failed
    // task requeues the job while failed attempts <= max-restarts; a task exiting with checkpoint-exit
    // checkpointed (after Slurm's warning signal) and requeues the job without using the budget.
    bool requeue = false;
    int max_restarts = 0;                // max-restarts=N, with requeue
    std::optional<int> checkpoint_exit;  // checkpoint-exit=N, with requeue
    // hang-timeout=S: each task runs under dlaunch-watch, which finds a rank silent for S seconds (docs/hangs.md)
    std::optional<double> hang_timeout;
    bool operator==(const DistLaunchSettings&) const = default;
};

inline constexpr size_t kMaxOptsLength = 1024;

// plugstack.conf arguments (`optional spank_dlaunch.so port_range=21000-28999 bind=none ...`).
// Unknown keys are errors: a typo in the site config must not go unnoticed.
Result<DistLaunchSettings> parse_site_arguments(const std::vector<std::string>& args);

// The user's OPTS on top of `site` ("" for a bare --dist-launch). Unknown keys are errors.
Result<DistLaunchSettings> parse_dist_launch_opts(const std::string& opts, DistLaunchSettings site);

// requeue only makes sense in a batch job: srun checks before anything starts. `environment` is Slurm's
// ENVIRONMENT variable (BATCH inside an sbatch job; unset under salloc or a bare srun).
Status requeue_allowed(const std::optional<std::string>& job_id, const std::optional<std::string>& environment);

// The launch request these settings describe, for a task running `argv0`.
LaunchRequest dist_launch_request(const DistLaunchSettings& settings, const std::string& argv0);

// Whether the plugin runs `argv0` under Python: a .py file, executable or not.
bool is_python_script(const std::string& argv0);

}  // namespace dlaunch
