// Runs a short helper program and returns what it printed: `python -c ...` (where torch is, whether it
// imports), `srun --mpi=list`. Not for workers (they go through the Spawner).
#pragma once

#include <string>
#include <vector>

namespace dlaunch::host {

struct Output {
    std::string text;        // stdout (and stderr when asked), as printed
    int exit_code = -1;      // -1: it could not run, was killed, or took too long
    bool timed_out = false;  // not ended within `timeout_ms`: its process group was killed
};

// argv[0] is looked up on PATH. Its stdin is /dev/null; it runs in a process group of its own, with no
// blocked signal and default dispositions. It is judged by its exit: a child that closes its output and
// goes on counts as running, one whose own children keep the output open after it exited as ended.
Output run_output(const std::vector<std::string>& argv, int timeout_ms, bool with_stderr = false);

}  // namespace dlaunch::host
