// The seam under the executor: starting one worker process. The executor owns everything around it
// (pipes, logs, the event loop, signals, reaping); a Spawner only turns a rank's plan into a running
// process. fork_exec_spawner() is the real one; tests give the executor their own (for example one that
// runs a small shell command per rank and attempt) to drive failures, restarts and hangs without Python.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
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

// What execvpe() takes, built before any fork (between fork and exec only async-signal-safe calls run):
// `argv`, and `inherited` overlaid by `overlay` as "NAME=value" strings. The arrays point into this object.
class ExecImage {
public:
    ExecImage(const std::vector<std::string>& argv, const EnvMap& inherited, const EnvMap& overlay);
    ExecImage(const ExecImage&) = delete;
    ExecImage& operator=(const ExecImage&) = delete;
    char** argv() { return argv_.data(); }
    char** envp() { return envp_.data(); }

private:
    std::vector<std::string> argv_strings_, env_strings_;
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
