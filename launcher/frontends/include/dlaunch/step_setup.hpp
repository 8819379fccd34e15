// Planning one node's tasks of a Slurm step for the SPANK plugin (srun --dist-launch): done once per node
// in slurmstepd, before the tasks are forked, so every task inherits the plan and the topology is
// discovered once per node per step. The plugin itself only gathers the SPANK items and applies the result.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/attempt_io.hpp"
#include "dlaunch/dist_launch.hpp"
#include "dlaunch/plan.hpp"
#include "dlaunch/scheduler.hpp"
#include "dlaunch/topology/binder.hpp"

namespace dlaunch {

struct StepFacts {
    std::string job_id, step_id;
    int nnodes = 1, node_id = 0;
    int total_tasks = 1;
    std::vector<int> local_global_ids;  // global task id of each local task
    EnvMap env;                         // the step's environment (S_JOB_ENV)
    std::string argv0;                  // the program the tasks run
    std::string hostname;               // this node's Slurm name
    // With requeue: whether the job is a batch job, when the caller asked slurmctld already (the SPANK plugin
    // must, before slurmstepd drops privileges; on nodes other than 0 it takes the environment's word, see
    // slurm::started_from_batch_script); else plan_step_node asks.
    std::optional<Result<bool>> batch_job;
};

struct StepNodePlan {
    LaunchPlan plan;  // plan.ranks[i] is local task i
    std::optional<topology::Binder> binder;
    std::vector<std::shared_ptr<const topology::Binder::Prepared>> bindings;  // per local task (may be null)
    std::string python;                                                       // interpreter for a .py program
    bool run_under_python = false;
    std::optional<RequeueJob> requeue;  // --dist-launch=requeue: the job's ledger (directory made, as the user)
    // Each task runs under dlaunch-watch (rank_watch.hpp): a hang timeout (hang-timeout=S or
    // DLAUNCH_HANG_TIMEOUT) or torchrun's watchdog (TORCHELASTIC_ENABLE_FILE_TIMER=1) was asked for.
    bool watched = false;
};

// Errors say what failed ("dlaunch: ..."), for the step's stderr.
Result<StepNodePlan> plan_step_node(const StepFacts& facts, const DistLaunchSettings& settings);

// The helpers the plugin can exec in place of a task's program.
struct TaskHelpers {
    std::string pyexec;  // dlaunch-python's path
    std::string watch;   // dlaunch-watch's path
};

// What the plugin applies to local task `local` just before exec: the variables to set (the plan's, and
// for a program run through a helper, DLAUNCH_SCRIPT, DLAUNCH_PYTHON and DLAUNCH_HANG_TIMEOUT) and the
// program to exec in place of argv[0] ("" to leave argv alone): dlaunch-watch for a watched step,
// dlaunch-python for a .py program.
struct StepTaskSetup {
    EnvMap env;
    std::string exec_argv0;
};
StepTaskSetup step_task_setup(const StepNodePlan& node, size_t local, const std::string& argv0,
                              const TaskHelpers& helpers);

// The directory of the helpers next to `pyexec` (dlaunch-python and dlaunch-watch are installed together).
std::string watch_helper_next_to(const std::string& pyexec);

// Whether the helpers a step's tasks will exec are there: dlaunch-python for a .py program, dlaunch-watch
// for a watched step. Checked by srun when the
// plugin loads and once per node, so that a missing helper is one message naming the plugin's pyexec=
// argument instead of an execve() error of every task.
Status check_step_helpers(bool python_program, bool watched, const TaskHelpers& helpers,
                          const std::function<bool(const std::string& path)>& executable);

}  // namespace dlaunch
