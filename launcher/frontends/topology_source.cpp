// Split from frontend.cpp so that the SPANK plugin, which needs this but not logging, links no spdlog.
#include "dlaunch/frontend.hpp"
#include "dlaunch/host.hpp"

namespace dlaunch::frontend {

Result<topology::Topology> load_topology(const LaunchRequest& req, const EnvMap& env,
                                         const std::optional<std::string>& job_id, topology::Scope scope) {
    if (req.topology_xml) return topology::load_xml(*req.topology_xml);
    // Discovered once per boot of a node, by the first launch of any job: later launches read the export
    // instead of walking sysfs and PCI config space, which takes several times longer.
    // What is process-specific (the cgroup's CPUs, this process's binding) is read live each time.
    // "whole": since exports include CPUs the discoverer's cgroup hid (an older export without them must
    // never be read).
    std::optional<std::string> key;
    if (auto boot = host::boot_id())
        key = "machine-whole-" + *boot;
    else if (job_id && !job_id->empty())
        key = "job-whole-" + *job_id;
    else if (env.contains("SLURM_JOB_ID"))
        key = "job-whole-" + env.at("SLURM_JOB_ID");
    if (key) return topology::discover_cached(host::topology_cache_dir(), *key, scope);
    return topology::discover(scope);
}

}  // namespace dlaunch::frontend
