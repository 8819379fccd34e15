// The health gate: before every attempt (the first, each restart, after a requeue) each agent checks the
// fast subset of `dlaunch doctor` on its node (GPUs usable, RDMA ports up, room in the log directory) and
// the site's own check (--health-check CMD). A node that fails it is left out of the attempt, or the job is
// requeued without it (elastic/group.hpp's decide_gate; one agent: attempt_end.hpp). Pure: facts in, what
// failed out; probe.cpp gathers the facts.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "dlaunch/doctor.hpp"
#include "dlaunch/topology/topology.hpp"

namespace dlaunch::health {

// A site check that runs longer than this fails.
inline constexpr int kSiteCheckSeconds = 60;

// --health-check CMD: how it ended.
struct SiteCheckFacts {
    std::string command;
    int exit_code = 0;  // -1: could not run or killed
    bool timed_out = false;
    std::string output;  // stdout and stderr, as printed
};

struct Facts {
    std::optional<doctor::GpuFacts> gpus;  // the built-in checks (absent: --no-health-check)
    std::optional<doctor::PortFacts> ports;
    std::optional<doctor::LogDirFacts> log_dir;
    std::optional<SiteCheckFacts> site;
};

// What failed, "" when the node passed: "gpus: GPU 1 ...: 3 uncorrected ECC errors; site check `x`: exit
// code 1: no scratch". Checks of hardware that is not there pass; a warning (a down port beside active ones)
// passes.
std::string judge(const Facts& facts);

// What a node that passed was checked for, one item per check: "gpus ok (1 GPU usable, ...); ib-ports not
// present (...); log-dir ok (...); site check `x` passed". Says that it checked nothing when it did not.
std::string passed_note(const Facts& facts);

// The gate's answer for one node: what failed ("" when it passed) and, when it passed, passed_note().
struct Answer {
    std::string failed;
    std::string passed;
};

struct Settings {
    bool builtin = true;  // false: --no-health-check
    std::string command;  // --health-check CMD ("": none)
    std::string log_dir;  // the run's (or the job's) log directory
    // This machine's, for the GPUs and NICs it has (null: unknown). Owned: a group runs the check on a thread
    // that may outlive the agent's own objects when a signal ends the agent meanwhile.
    std::shared_ptr<const topology::Topology> topology;
};

// True when the check may take long: it runs a site command, or asks a driver (NVML for the node's NVIDIA GPUs,
// libibverbs for its RDMA NICs; a lost GPU can hold NVML for seconds). False when it only tries the log
// directory (a file made and removed there): no longer than the attempt's own logs that follow.
bool may_take_long(const Settings& settings);

// Runs the gate's checks on this node before `attempt` (the site check sees DLAUNCH_ATTEMPT and
// DLAUNCH_LOG_DIR) and judges them. It logs nothing: a group's agent runs one that may take long on a thread
// of its own while it keeps talking to the group, and a quick one inline (a log directory that hangs, on a
// lost NFS server, would hang the attempt's own logs next just the same).
Answer check_this_node(const Settings& settings, int attempt);

}  // namespace dlaunch::health
