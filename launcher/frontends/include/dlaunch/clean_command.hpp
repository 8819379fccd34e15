// `dlaunch clean`: removes what dlaunch runs left in $TMPDIR once nothing uses it any more: the run
// directories of finished runs started without --log-dir (kept after a failure, a stop, or with output kept
// off the console), and the private directories (FIFOs, stacks files) and master-port locks
// (dlaunch-ports-UID/PORT) of agents and watchers that were killed (kill -9).
#pragma once

#include <string>
#include <vector>

#include "dlaunch/cli.hpp"

namespace dlaunch {

// One entry of $TMPDIR that a dlaunch made, as found.
struct TempEntry {
    std::string path;
    enum class Kind { RunDir, PerProcessFile, PortLock } kind = Kind::RunDir;
    bool finished = false;  // RunDir: its run.json or failure.json is written (the run ended)
    int owner_pid = 0;      // RunDir: agent.pid's; PerProcessFile: the pid in its name (0: unknown; -1: another host's)
    bool owner_alive = false;  // that process still runs
    bool held = false;         // PortLock: an agent holds its lock (its run is starting or going)
};

// What to remove, pure: a run directory whose run ended, or whose agent (agent.pid) is gone; a FIFO or
// stacks file of a process that is gone; a port lock nobody holds. A run directory without run.json nor agent.pid
// (dlaunch before run records, or a run starting this instant) is left alone.
std::vector<std::string> entries_to_clean(const std::vector<TempEntry>& found);

// Exit codes: 0 done (or nothing to do); exit_code::kLaunchFailure something could not be removed.
int run_clean_command(const Command& cmd);

}  // namespace dlaunch
