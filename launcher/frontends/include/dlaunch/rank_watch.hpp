// One rank watched by a dlaunch parent, for the front-ends with no agent (srun --dist-launch through
// dlaunch-watch, dlaunch-mpi): only when asked for (a hang timeout, or torchrun's watchdog with
// TORCHELASTIC_ENABLE_FILE_TIMER=1) the rank runs as a child of the executor, whose hang monitor watches it
// alone; otherwise the front-end execs the rank and nothing of dlaunch remains (docs/hangs.md).
#pragma once

#include <optional>
#include <string>

#include "dlaunch/env_map.hpp"
#include "dlaunch/plan.hpp"

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
WatchPlaces watch_places_of_this_process();

// `base` with `rank` as its only rank, watched: the hang timeout, the watchdog FIFO (the user's
// TORCHELASTIC_TIMER_FILE gets ".<rank>" appended: each rank has its own watcher), the heartbeat FIFO,
// the stacks files, the rank's supervision variables; output unprefixed (srun -l, mpirun --tag-output).
LaunchPlan watched_rank_plan(const LaunchPlan& base, RankPlan rank, const EnvMap& env, const WatchPlaces& places);

// Runs the watched rank to its end and returns the exit code: the rank's own (128+S for a signal), or
// exit_code::kHang. After a hang the failure summary is printed, and stacks kept only in $TMPDIR are
// copied to stderr (then removed).
int watch_rank(const LaunchPlan& plan, const EnvMap& inherited);

}  // namespace dlaunch
