// Capturing the stacks of live ranks (docs/hangs.md): Python's, from faulthandler on the stack signal for
// ranks whose stacks file says they listen (dlaunch's sitecustomize.py), and native ones from eu-stack,
// else gdb, and py-spy when installed. The edge: signals, files and helper processes; reading what was
// captured is hang/stack_report.hpp's.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "dlaunch/env_map.hpp"

namespace dlaunch {

struct CaptureTarget {
    int rank = 0;
    pid_t pid = 0;
    std::string stacks_file;  // where its faulthandler writes ("" : none)
    std::string native_file;  // where the native tools' output goes ("" : none)
};

struct CapturedStacks {
    int rank = 0;
    bool listened = false;    // the process had registered the stack signal
    std::string python;       // what faulthandler wrote this time ("" when nothing came)
    std::string native_tool;  // "eu-stack", "gdb" or "" (none installed, or no file)
    std::string native;       // what the native tools appended to the native file this time
};

// The tools found on PATH ("" when absent).
struct StackTools {
    std::string eu_stack, gdb, py_spy;
};
StackTools find_stack_tools(const EnvMap& env);

// Takes every target's stacks, all at once: Python's first (waiting up to `python_wait` for the dumps to
// be complete), then native ones in parallel, each tool killed after `native_limit`. Blocks meanwhile.
std::vector<CapturedStacks> capture_stacks(const std::vector<CaptureTarget>& targets, const StackTools& tools,
                                           std::chrono::milliseconds python_wait,
                                           std::chrono::milliseconds native_limit);

// The ranks of a running dlaunch job on this node (`dlaunch stacks`): processes started with a
// DLAUNCH_STACKS_FILE that are the agent's children, or whose stacks file is under a directory, or that
// belong to a Slurm job; a rank's own Python children (same stacks file) are left out.
struct StacksTarget {
    enum class Kind { Agent, Directory, SlurmJob };
    Kind kind = Kind::Agent;
    pid_t agent = 0;
    std::string directory;  // absolute, without a trailing '/'
    std::string job_id;
    std::string node;  // SlurmJob: only ranks of this Slurm node (SLURMD_NODENAME), when known
};
std::vector<CaptureTarget> find_rank_processes(const StacksTarget& target);

// Whether `stacks_file` holds the announcement of `pid` (the process listens to the stack signal).
bool listens_for_stacks(const std::string& stacks_file, pid_t pid);

}  // namespace dlaunch
