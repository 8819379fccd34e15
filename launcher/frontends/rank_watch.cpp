#include "dlaunch/rank_watch.hpp"

#include <unistd.h>

#include <csignal>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "dlaunch/env_contract.hpp"
#include "dlaunch/executor.hpp"
#include "dlaunch/exit_codes.hpp"
#include "dlaunch/frontend.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/request.hpp"
#include "dlaunch/signals.hpp"
#include "dlaunch/summary.hpp"

namespace dlaunch {

namespace {

bool ended_hung(const RunOutcome& outcome) {
    for (auto& f : outcome.failures)
        if (f.failure.root_cause && f.failure.hung_after) return true;
    return false;
}

// The stacks files only this watcher uses (in $TMPDIR, when the plan keeps none: watched_rank_plan): a file
// a killed watcher with the same pid left must not be shown as this rank's.
std::vector<std::string> temporary_stacks(const LaunchPlan& plan) {
    if (!plan.stacks_files.empty()) return {};
    const RankPlan& rank = plan.ranks.front();
    return {rank.stacks_file, rank.native_stacks_file};
}

// After a hang, onto stderr (the step's output keeps them); then removed. Each file in one write: mpirun
// passes on every rank's stderr as it reads it, so a line written in pieces came out cut by other ranks'
// output ("dlaunch: rank Traceback ...").
void show_and_remove(const std::vector<std::string>& files, const RankPlan& rank, bool hung) {
    for (const std::string& path : files) {
        std::ifstream in(path);
        if (hung && in && in.peek() != std::ifstream::traits_type::eof()) {
            std::ostringstream text;
            text << "dlaunch: rank " << rank.rank << ": stacks (" << path << "):\n" << in.rdbuf();
            std::cerr << text.str();
        }
        ::unlink(path.c_str());
    }
}

}  // namespace

bool rank_watch_wanted(const std::optional<double>& hang_timeout, const EnvMap& env) {
    return hang_timeout.has_value() || watchdog_asked(env);
}

Result<WatchPlaces> watch_places_of_this_process() {
    auto dir = host::own_private_dir();
    if (!dir) return dir.error();
    const std::string stacks = *dir + "/stacks.txt";
    return WatchPlaces{std::to_string(::getpid()),
                       host::python_hook_dir(),
                       host::watchdog_fifo_in(*dir),
                       host::heartbeat_fifo_in(*dir),
                       stacks,
                       native_stacks_file_for(stacks)};
}

LaunchPlan watched_rank_plan(const LaunchPlan& base, RankPlan rank, const EnvMap& env, const WatchPlaces& places) {
    LaunchPlan plan = base;
    plan.prefix_console = false;
    plan.watched_alone = true;
    plan.max_restarts = 0;
    if (watchdog_asked(env)) {
        const std::string named = watchdog_file_named(env);
        plan.timer_file = named.empty() ? places.timer_fifo : named + "." + std::to_string(rank.rank);
    }
    plan.heartbeat_file = places.heartbeat_fifo;
    if (rank.stacks_file.empty()) {
        rank.stacks_file = places.temp_stacks;
        rank.native_stacks_file = places.temp_native_stacks;
    }
    plan.stacks_files = rank.stacks_file == places.temp_stacks ? "" : rank.stacks_file;  // $TMPDIR: shown, then gone
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

WatchedEnd watched_end(const RunOutcome& outcome) {
    if (ended_hung(outcome)) return {exit_code::kHang, 0};
    if (!outcome.last_exit) return {outcome.exit_code, 0};
    const ExitStatus& rank = *outcome.last_exit;
    return {rank.as_exit_code(), rank.signaled ? rank.code : 0};
}

int watch_rank(const LaunchPlan& plan, const EnvMap& inherited, const WatchOptions& watch) {
    const std::vector<std::string> temporary = temporary_stacks(plan);
    for (auto& path : temporary) ::unlink(path.c_str());
    ExecutorOptions options;
    options.forward_signals = default_forward_signals();
    options.workers_get_signals_too = watch.signals_reach_the_rank;
    options.workers_read_stdin = true;
    RunOutcome outcome = run_workers([&plan](int) -> Result<LaunchPlan> { return plan; }, inherited, options);
    const bool hung = ended_hung(outcome);
    if (hung) std::cerr << render_failure_summary(outcome);
    show_and_remove(temporary, plan.ranks.front(), hung);
    const WatchedEnd end = watched_end(outcome);
    return frontend::end_as(end.exit_code, end.signal);
}

}  // namespace dlaunch
