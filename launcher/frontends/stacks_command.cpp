#include "dlaunch/stacks_command.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>

#include "dlaunch/exit_codes.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/stack_capture.hpp"

namespace dlaunch {
namespace {

Result<StacksTarget> resolve_target(const std::string& text) {
    StacksTarget t;
    if (text.starts_with("slurm:") && text.size() > 6) {
        t.kind = StacksTarget::Kind::SlurmJob;
        t.job_id = text.substr(6);
        if (const char* node = std::getenv("SLURMD_NODENAME")) t.node = node;
        return t;
    }
    if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
        t.kind = StacksTarget::Kind::Agent;
        auto pid = parse_integer("pid", text, 1, std::numeric_limits<pid_t>::max());
        if (!pid) return Error{"stacks: pid " + text + " is out of range", "give the pid of a running dlaunch agent"};
        t.agent = static_cast<pid_t>(*pid);
        if (!std::filesystem::exists("/proc/" + text))
            return Error{"stacks: no process " + text + " on this host", "give the pid of a running dlaunch agent"};
        return t;
    }
    std::error_code ec;
    auto dir = std::filesystem::canonical(text, ec);
    if (ec || !std::filesystem::is_directory(dir))
        return Error{"stacks: '" + text + "' is neither a pid, a directory nor slurm:JOBID",
                     "give the agent's pid, the run's log directory, or slurm:JOBID"};
    t.kind = StacksTarget::Kind::Directory;
    t.directory = dir.string();
    return t;
}

}  // namespace

int run_stacks_command(const Command& cmd) {
    auto target = resolve_target(cmd.stacks_target);
    if (!target) {
        spdlog::error("{}", target.error().describe());
        return exit_code::kUsage;
    }
    auto ranks = find_rank_processes(*target);
    if (ranks.empty()) {
        spdlog::error(
            "stacks: no rank of a dlaunch job found for {} on this host (ranks are processes started by "
            "the dlaunch agent, with DLAUNCH_STACKS_FILE in their environment)",
            cmd.stacks_target);
        return exit_code::kLaunchFailure;
    }
    const StackTools tools = cmd.stacks_native ? find_stack_tools(host::environment()) : StackTools{};
    auto captured = capture_stacks(ranks, tools, std::chrono::milliseconds(2000), std::chrono::milliseconds(10000));
    int missing = 0;
    for (size_t i = 0; i < ranks.size(); ++i) {
        std::cout << "==> rank " << ranks[i].rank << " (pid " << ranks[i].pid << ") <==\n";
        if (captured[i].python.empty()) {
            ++missing;
            std::cout << (captured[i].listened ? "(no answer within 2 s)\n"
                                               : "(no Python stacks: not a Python process, or run with -S/-I)\n");
        } else {
            std::cout << captured[i].python;
        }
        std::cout << captured[i].native;
        std::cout << "\n";
    }
    std::cout.flush();
    if (missing > 0) spdlog::warn("stacks: {} of {} ranks gave no Python stacks", missing, ranks.size());
    return missing > 0 ? exit_code::kLaunchFailure : exit_code::kSuccess;
}

}  // namespace dlaunch
