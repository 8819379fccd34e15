#include "dlaunch/frontend.hpp"

#include <iostream>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "dlaunch/host.hpp"

namespace dlaunch::frontend {

void setup_logging(const std::string& name, int verbosity, const EnvMap& env) {
    auto logger = spdlog::stderr_logger_st(name);
    logger->set_pattern("%n: %v");
    spdlog::level::level_enum level = spdlog::level::info;
    if (auto it = env.find("DLAUNCH_LOG"); it != env.end() && verbosity == 0)
        level = spdlog::level::from_str(it->second);
    else if (verbosity < 0) level = spdlog::level::warn;
    else if (verbosity == 1) level = spdlog::level::debug;
    else if (verbosity > 1) level = spdlog::level::trace;
    logger->set_level(level);
    spdlog::set_default_logger(logger);
}

int fail(const Error& e, int code) {
    std::cerr << e.message() << "\n";
    return code;
}

Result<topology::Topology> load_topology(const LaunchRequest& req, const EnvMap& env,
                                         const std::optional<std::string>& job_id, topology::Scope scope) {
    if (req.topology_xml) return topology::load_xml(*req.topology_xml);
    std::optional<std::string> key = job_id;
    if (!key && env.contains("SLURM_JOB_ID")) key = env.at("SLURM_JOB_ID");
    if (key && !key->empty()) return topology::discover_cached(host::topology_cache_dir(), *key, scope);
    return topology::discover(scope);
}

}  // namespace dlaunch::frontend
