#include "dlaunch/rank_watch.hpp"

#include <unistd.h>

#include <fstream>
#include <iostream>

#include "dlaunch/env_contract.hpp"
#include "dlaunch/executor.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/request.hpp"
#include "dlaunch/signals.hpp"
#include "dlaunch/summary.hpp"

namespace dlaunch {

namespace {

std::string value_of(const EnvMap& env, const std::string& name) {
    auto it = env.find(name);
    return it == env.end() ? "" : it->second;
}

bool ended_hung(const RunOutcome& outcome) {
    for (auto& f : outcome.failures)
        if (f.failure.root_cause && f.failure.hung_after) return true;
    return false;
}

// Stacks that only $TMPDIR held: onto stderr after a hang (the step's output keeps them), then removed.
void show_temporary_stacks(const WatchPlaces& places, const RankPlan& rank, bool hung) {
    for (const std::string& path : {places.temp_stacks, places.temp_native_stacks}) {
        if (path != rank.stacks_file && path != rank.native_stacks_file) continue;
        std::ifstream in(path);
        if (hung && in) std::cerr << "dlaunch: rank " << rank.rank << ": stacks (" << path << "):\n" << in.rdbuf();
        ::unlink(path.c_str());
    }
}

}  // namespace

bool rank_watch_wanted(const std::optional<double>& hang_timeout, const EnvMap& env) {
    return hang_timeout.has_value() || value_of(env, "TORCHELASTIC_ENABLE_FILE_TIMER") == "1";
}

WatchPlaces watch_places_of_this_process() {
    const std::string pid = std::to_string(::getpid());
    return {pid,
            host::python_hook_dir(),
            host::watchdog_fifo_path(pid),
            host::heartbeat_fifo_path(pid),
            host::temp_path("dlaunch-stacks-" + pid + ".txt"),
            host::temp_path("dlaunch-native-stacks-" + pid + ".txt")};
}

LaunchPlan watched_rank_plan(const LaunchPlan& base, RankPlan rank, const EnvMap& env, const WatchPlaces& places) {
    LaunchPlan plan = base;
    plan.prefix_console = false;
    plan.max_restarts = 0;
    if (value_of(env, "TORCHELASTIC_ENABLE_FILE_TIMER") == "1") {
        const std::string named = value_of(env, "TORCHELASTIC_TIMER_FILE");
        plan.timer_file = named.empty() ? places.timer_fifo : named + "." + std::to_string(rank.rank);
    }
    plan.heartbeat_file = places.heartbeat_fifo;
    if (rank.stacks_file.empty()) {
        rank.stacks_file = places.temp_stacks;
        rank.native_stacks_file = places.temp_native_stacks;
    }
    plan.stacks_files = rank.stacks_file;
    rank.console_stdout = rank.console_stderr = true;
    const EnvMap supervision = supervision_env({.stacks_file = rank.stacks_file,
                                                .stack_signal = stack_signal(),
                                                .python_hook_dir = places.python_hook_dir,
                                                .timer_file = plan.timer_file,
                                                .heartbeat_file = plan.heartbeat_file},
                                               env);
    for (auto& [name, value] : supervision) rank.env[name] = value;  // over what the node's plan set
    plan.own_local_rank.reset();
    plan.ranks = {std::move(rank)};
    return plan;
}

int watch_rank(const LaunchPlan& plan, const EnvMap& inherited) {
    ExecutorOptions options;
    options.forward_signals = default_forward_signals();
    RunOutcome outcome = run_workers([&plan](int) -> Result<LaunchPlan> { return plan; }, inherited, options);
    const bool hung = ended_hung(outcome);
    if (hung) std::cerr << render_failure_summary(outcome);
    show_temporary_stacks(watch_places_of_this_process(), plan.ranks.front(), hung);
    return outcome.exit_code;
}

}  // namespace dlaunch
