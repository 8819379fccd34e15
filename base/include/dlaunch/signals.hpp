// Signal names, both ways (the CLI, the executor's messages, the failure summary share them).
#pragma once

#include <optional>
#include <string>

namespace dlaunch {

// "SIGTERM" for 15; "signal 99" for unknown numbers.
std::string signal_name(int signo);

// 15 for "TERM" (upper case, without "SIG"); nullopt for a name that is not a signal's.
std::optional<int> signal_number(const std::string& name);

}  // namespace dlaunch
