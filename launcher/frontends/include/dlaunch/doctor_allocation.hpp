// `dlaunch doctor` on every node of a Slurm step (srun --ntasks-per-node=1 dlaunch doctor, several nodes):
// node 0 listens on the step's group port (derived as the agents' is), the other nodes send it their report
// over the group channel (MUNGE: the job's user), and node 0 judges what only the nodes together can say
// (doctor::allocation_report): every node ready, the clocks, one log directory.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dlaunch/doctor.hpp"
#include "dlaunch/env_map.hpp"
#include "dlaunch/result.hpp"
#include "dlaunch/scheduler.hpp"

namespace dlaunch {

struct AllocationPlace {
    int node = 0;                    // this node's index in the step (SLURM_NODEID)
    std::vector<std::string> hosts;  // the step's nodes, node 0 first
    std::string leader_addr;         // node 0's address
    int port = 0;
    std::string run_id;  // "doctor-JOB.STEP": what the credentials sign
    std::string marker;  // node 0's file in the log directory that the others look for
};

// The place of this node when the doctor runs as one task per node of a step of several nodes; nullopt
// otherwise (alone, or several tasks per node).
std::optional<AllocationPlace> allocation_of(const EnvMap& env, const PortRange& range, const std::string& log_dir);

// Node 0: listens, gathers the others' reports (waiting at most `wait_seconds`), and returns every node's
// facts with its own first, the log directory's from `log_dir`. The marker is made before and removed after.
Result<doctor::AllocationFacts> gather_reports(const AllocationPlace& place, const doctor::Report& own,
                                               double wait_seconds, const doctor::AllocationFacts& log_dir);
// Every other node: sends its report to node 0 (retrying to reach it for `wait_seconds`).
Status send_report(const AllocationPlace& place, const doctor::Report& own, double wait_seconds);
// Node 0's marker is made before it runs its own checks, so that it is there when the others look.
Status make_marker(const AllocationPlace& place);

}  // namespace dlaunch
