// `dlaunch doctor`: gathers this node's facts (doctor_probes.hpp), judges them (doctor.hpp) and prints the
// report, as text or JSON.
#pragma once

#include "dlaunch/cli.hpp"
#include "dlaunch/env_map.hpp"

namespace dlaunch {

// Exit codes: 0 ready; exit_code::kNotReady a check failed.
int run_doctor_command(const Command& cmd, const EnvMap& env);

}  // namespace dlaunch
