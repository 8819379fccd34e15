// Signal names, both ways (the CLI, the executor's messages, the failure summary share them).
#pragma once

#include <optional>
#include <string>

namespace dlaunch {

// "SIGTERM" for 15; "signal 99" for unknown numbers.
std::string signal_name(int signo);

// 15 for "TERM" (upper case, without "SIG"); nullopt for a name that is not a signal's.
std::optional<int> signal_number(const std::string& name);

// The signal on which a rank's Python dumps its stacks (dlaunch's sitecustomize.py registers it with
// faulthandler): SIGRTMIN+6, a real-time signal nothing else in a training job uses.
int stack_signal();

}  // namespace dlaunch
