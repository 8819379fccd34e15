// The seam under the executor: starting one worker process. The executor owns everything around it
// (pipes, logs, the event loop, signals, reaping); a Spawner only turns a rank's plan into a running
// process. fork_exec_spawner() is the real one; tests give the executor their own (for example one that
// runs a small shell command per rank and attempt) to drive failures, restarts and hangs without Python.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlaunch/job_context.hpp"
#include "dlaunch/plan.hpp"
#include "dlaunch/result.hpp"
#include "dlaunch/topology/binder.hpp"

namespace dlaunch {

// The worker's standard streams (the executor keeps the other ends).
struct SpawnIo {
    int stdin_fd = -1;
    int stdout_fd = -1;
    int stderr_fd = -1;
};

// An environment rendered once as "NAME=value" strings in name order: the agent's, which every worker
// inherits under its own variables (rendering it again for each rank was most of a rank's start in perf).
class RenderedEnv {
public:
    explicit RenderedEnv(const EnvMap& env);
    size_t size() const { return entries_.size(); }
    std::string_view name(size_t i) const { return {entries_[i].data(), name_sizes_[i]}; }
    char* entry(size_t i) const { return const_cast<char*>(entries_[i].c_str()); }  // execve does not write

private:
    std::vector<std::string> entries_;
    std::vector<size_t> name_sizes_;
};

// What execvpe() takes, built before any fork (between fork and exec only async-signal-safe calls run):
// `argv`, and `inherited` overlaid by `overlay`. The arrays point into this object, `argv` and `inherited`:
// both must outlive it.
class ExecImage {
public:
    ExecImage(const std::vector<std::string>& argv, const RenderedEnv& inherited, const EnvMap& overlay);
    ExecImage(std::vector<std::string>&&, const RenderedEnv&, const EnvMap&) = delete;  // it would point into
    ExecImage(const std::vector<std::string>&, RenderedEnv&&, const EnvMap&) = delete;  // a temporary
    ExecImage(const ExecImage&) = delete;
    ExecImage& operator=(const ExecImage&) = delete;
    char** argv() { return argv_.data(); }
    char** envp() { return envp_.data(); }

private:
    std::vector<std::string> overlay_strings_;
    std::vector<char*> argv_, envp_;
};

class Spawner {
public:
    virtual ~Spawner() = default;
    // Starts `rank` (attempt `attempt`) as a process that leads its own process group and dies with the
    // agent. Returns its pid; an Error when no process was started.
    virtual Result<pid_t> spawn(const RankPlan& rank, int attempt, const SpawnIo& io) = 0;
};

// fork (vfork when nothing but system calls run before exec) + execvpe of rank.argv with `inherited`
// overlaid by rank.env, bound to the rank's cpuset/mems by `binder` (null: no binding). A failed exec
// exits 127 (not found) or 126, after one line on the worker's stderr.
std::unique_ptr<Spawner> fork_exec_spawner(const EnvMap& inherited, const topology::Binder* binder);

}  // namespace dlaunch
