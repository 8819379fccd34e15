// Small pieces both front-ends (dlaunch, dlaunch-mpi) share: logging set-up, error exits, topology loading.
#pragma once

#include <optional>
#include <string>

#include "dlaunch/job_context.hpp"
#include "dlaunch/request.hpp"
#include "dlaunch/result.hpp"
#include "dlaunch/topology/topology.hpp"

namespace dlaunch::frontend {

// spdlog logger `name` on stderr ("name: message"); level from -v/-q, else DLAUNCH_LOG, else info.
void setup_logging(const std::string& name, int verbosity, const EnvMap& env);

// A program's main(): runs `run`, and turns an escaped exception into one "internal error" line and
// exit_code::kInternal.
int guarded_main(const char* program, int (*run)(int, char**), int argc, char** argv);

// Ends this process: returns `code`, or when `signo` is not 0 dies of that signal (default action, no
// core file): how a process that was stopped by a signal, or stands for one that died of it, must end so
// that its parent (a shell, srun, mpirun) sees a signal and not an exit code. Output is flushed first.
int end_as(int code, int signo);

// Prints e.message() on stderr and returns `code`.
int fail(const Error& e, int code);

// The machine to plan for: --topology-xml when given; else this one, discovered once per boot of the node
// (keyed by `job_id` only when the boot id is unreadable). `scope`: see topology::Scope.
Result<topology::Topology> load_topology(const LaunchRequest& req, const EnvMap& env,
                                         const std::optional<std::string>& job_id, topology::Scope scope);

}  // namespace dlaunch::frontend
