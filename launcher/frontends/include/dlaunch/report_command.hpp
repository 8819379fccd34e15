// `dlaunch report [--format text|svg] [--exit-code] RUN_DIR|LOG_DIR`: reads the run records (run.json) and prints them
// as timelines (core/include/dlaunch/run_report.hpp renders them).
#pragma once

#include "dlaunch/cli.hpp"

namespace dlaunch {

// Exit codes: 0 printed; exit_code::kUsage no run record at PATH, an unreadable one, or svg asked of
// several runs.
int run_report_command(const Command& cmd);

}  // namespace dlaunch
