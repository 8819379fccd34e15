// `dlaunch stacks TARGET`: prints the stacks of every rank of a running job on this node (docs/hangs.md).
#pragma once

#include "dlaunch/cli.hpp"

namespace dlaunch {

// Exit codes: 0 every rank found answered; exit_code::kUsage a TARGET that names nothing;
// exit_code::kLaunchFailure no rank found, or some did not answer.
int run_stacks_command(const Command& cmd);

}  // namespace dlaunch
