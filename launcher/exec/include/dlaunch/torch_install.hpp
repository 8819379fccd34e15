// What the installed torch does that dlaunch must match, read from torch's own files (torch is never
// imported: that takes seconds).
#pragma once

#include <optional>
#include <string>

namespace dlaunch::host {

// The argument the installed `python -m torch.distributed.launch` passes each worker: "--local-rank"
// (torch >= 2.0) or "--local_rank" (torch < 2.0), read from torch/distributed/run.py of `python`'s torch;
// nullopt when `python` has no torch or the file says neither. `python` is asked where torch is once, then
// the answer is cached in $TMPDIR/dlaunch-topology-<uid>/ until run.py changes.
std::optional<std::string> torch_launch_local_rank_arg(const std::string& python);

// The spelling written in a torch/distributed/run.py (exposed for tests).
std::optional<std::string> local_rank_arg_in_run_py(const std::string& source);

}  // namespace dlaunch::host
