// One rank watched by a dlaunch parent, for the front-ends with no agent (srun --dist-launch through
// dlaunch-watch, dlaunch-mpi): only when asked for (a hang timeout, or torchrun's watchdog with
// TORCHELASTIC_ENABLE_FILE_TIMER=1) the rank runs as a child of the executor, whose hang monitor watches it
// alone; otherwise the front-end execs the rank and nothing of dlaunch remains (docs/hangs.md).
#pragma once

#include <optional>
#include <string>

#include "dlaunch/env_map.hpp"
#include "dlaunch/plan.hpp"
#include "dlaunch/result.hpp"
#include "dlaunch/summary.hpp"

namespace dlaunch {

// Whether a rank needs a watcher: a hang timeout, or TORCHELASTIC_ENABLE_FILE_TIMER=1 in `env`.
bool rank_watch_wanted(const std::optional<double>& hang_timeout, const EnvMap& env);

// What the watcher of one rank serves, from its own process (`pid` names its FIFOs in $TMPDIR).
struct WatchPlaces {
    std::string pid;
    std::string python_hook_dir;  // sitecustomize.py's directory ("" : Python stacks only through py-spy)
    std::string timer_fifo;       // torchrun's watchdog FIFO when the user names none
    std::string heartbeat_fifo;
    std::string temp_stacks;  // where the stacks go when the rank has no log directory (shown on stderr)
    std::string temp_native_stacks;
};
// In this process's private directory (host::own_private_dir); fails when it cannot be made.
Result<WatchPlaces> watch_places_of_this_process();

// `base` with `rank` as its only rank, watched: the hang timeout, the watchdog FIFO (the user's
// TORCHELASTIC_TIMER_FILE gets ".<rank>" appended: each rank has its own watcher), the heartbeat FIFO,
// the stacks files, the rank's supervision variables; output unprefixed (srun -l, mpirun --tag-output).
LaunchPlan watched_rank_plan(const LaunchPlan& base, RankPlan rank, const EnvMap& env, const WatchPlaces& places);

// How a watcher ends: as its rank did (its exit code, or killed by the same signal, re-raised), or with
// exit_code::kHang when the rank hung. Pure.
struct WatchedEnd {
    int exit_code = 0;
    int signal = 0;  // non-zero: re-raise it (exit_code is then 128 + signal)
};
WatchedEnd watched_end(const RunOutcome& outcome);

// `signals_reach_the_rank`: the launcher signals the rank itself (Slurm signals every process of the
// step, under proctrack/cgroup), so a signal received is acted on but not sent again; else it is forwarded
// (dlaunch-mpi: mpirun signals dlaunch-mpi only).
struct WatchOptions {
    bool signals_reach_the_rank = false;
};

// Runs the watched rank to its end and ends as watched_end() says: returns the exit code, or re-raises the
// rank's signal. After a hang the failure summary is printed, and stacks kept only in $TMPDIR are copied
// to stderr; those files are removed either way.
int watch_rank(const LaunchPlan& plan, const EnvMap& inherited, const WatchOptions& options);

}  // namespace dlaunch
