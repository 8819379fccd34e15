// Runs a short helper program and returns what it printed: `python -c ...` (where torch is, whether it
// imports), `srun --mpi=list`. Not for workers (they go through the Spawner).
#pragma once

#include <string>
#include <vector>

namespace dlaunch::host {

struct Output {
    std::string text;        // stdout (and stderr when asked), as printed
    int exit_code = -1;      // -1: it could not run, was killed, or took too long
    bool timed_out = false;  // killed after `timeout_ms`
};

// argv[0] is looked up on PATH. Its stdin is /dev/null.
Output run_output(const std::vector<std::string>& argv, int timeout_ms, bool with_stderr = false);

}  // namespace dlaunch::host
