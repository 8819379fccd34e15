#include <algorithm>

#include "dlaunch/doctor_probes.hpp"
#include "dlaunch/health.hpp"
#include "dlaunch/run_output.hpp"

namespace dlaunch::health {
namespace {

// The job's GPUs and NICs are those the topology shows (the plan binds ranks to them): with none there,
// there is nothing to ask NVML or libibverbs (loading NVML where it is not installed alone costs more than
// the rest of the gate). Unknown topology: ask.
bool has_nvidia_gpu(const topology::Topology* t) {
    return !t || std::any_of(t->gpus.begin(), t->gpus.end(), [](const auto& g) { return g.vendor == "nvidia"; });
}

bool has_rdma_nic(const topology::Topology* t) {
    return !t || !t->nics.empty();
}

}  // namespace

bool may_take_long(const Settings& s) {
    const topology::Topology* t = s.topology.get();
    return !s.command.empty() || (s.builtin && (has_nvidia_gpu(t) || has_rdma_nic(t)));
}

Answer check_this_node(const Settings& s, int attempt) {
    Facts f;
    if (s.builtin) {
        const topology::Topology* t = s.topology.get();
        f.gpus = has_nvidia_gpu(t) ? doctor::probe_gpus(t) : doctor::GpuFacts{};
        f.ports = has_rdma_nic(t) ? doctor::probe_ib_ports(t) : doctor::PortFacts{};
        f.log_dir = doctor::probe_log_dir(s.log_dir);
    }
    if (!s.command.empty()) {
        const host::Output out = host::run_output({"env", "DLAUNCH_ATTEMPT=" + std::to_string(attempt),
                                                   "DLAUNCH_LOG_DIR=" + s.log_dir, "/bin/sh", "-c", s.command},
                                                  kSiteCheckSeconds * 1000, true);
        f.site = SiteCheckFacts{s.command, out.exit_code, out.timed_out, out.text};
    }
    std::string failed = judge(f);
    return {failed, failed.empty() ? passed_note(f) : ""};
}

}  // namespace dlaunch::health
