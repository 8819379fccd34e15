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

// Which checks run on this node: the one place check_this_node() and may_take_long() read it from.
struct Probes {
    bool gpus = false, ports = false, log_dir = false, site = false;
};

Probes probes_for(const Settings& s) {
    const topology::Topology* t = s.topology.get();
    return {s.builtin && has_nvidia_gpu(t), s.builtin && has_rdma_nic(t), s.builtin, !s.command.empty()};
}

}  // namespace

bool may_take_long(const Settings& s) {
    const Probes p = probes_for(s);
    return p.gpus || p.ports || p.site;  // the log directory's is no longer than the attempt's own logs that follow
}

Answer check_this_node(const Settings& s, int attempt) {
    Facts f;
    const Probes p = probes_for(s);
    const topology::Topology* t = s.topology.get();
    if (s.builtin) {
        f.gpus = p.gpus ? doctor::probe_gpus(t) : doctor::GpuFacts{};
        f.ports = p.ports ? doctor::probe_ib_ports(t) : doctor::PortFacts{};
    }
    if (p.log_dir) f.log_dir = doctor::probe_log_dir(s.log_dir);
    if (p.site) {
        const host::Output out = host::run_output({"env", "DLAUNCH_ATTEMPT=" + std::to_string(attempt),
                                                   "DLAUNCH_LOG_DIR=" + s.log_dir, "/bin/sh", "-c", s.command},
                                                  kSiteCheckSeconds * 1000, true);
        f.site = SiteCheckFacts{s.command, out.exit_code, out.timed_out, out.text};
    }
    std::string failed = judge(f);
    return {failed, failed.empty() ? passed_note(f) : ""};
}

}  // namespace dlaunch::health
