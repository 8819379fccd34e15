#include "dlaunch/doctor_command.hpp"

#include <iostream>

#include "dlaunch/doctor_probes.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/plan.hpp"

namespace dlaunch {

namespace {

// Logs and stacks of a run need room: less than this fails the log-dir check.
constexpr unsigned long long kMinLogSpace = 1ULL << 30;

}  // namespace

int run_doctor_command(const Command& cmd, const EnvMap& env) {
    using namespace doctor;
    const LaunchRequest& req = cmd.request;
    const Result<topology::Topology> topo = topology::discover(topology::Scope::Cgroup);
    const topology::Topology* machine = topo ? &*topo : nullptr;
    const PluginFacts plugin = probe_plugin(env);
    Report report;
    report.host = host::node_name(env);
    report.checks = {
        check_topology(topology_facts(topo)),
        check_cpuset(probe_cpuset(env)),
        check_gpus(probe_gpus(machine)),
        check_ib_ports(probe_ib_ports(machine)),
        check_helpers(probe_helpers()),
        check_plugin(plugin),
        check_library(probe_pmix(), true),
        check_srun_mpi(probe_srun(plugin.slurm)),
        check_library(probe_nccl(), false),
        check_ports(probe_ports(env, req.port_range, req.master_port.value_or(kDefaultMasterPort))),
        check_log_dir(probe_log_dir(req.log_dir.value_or(host::tmpdir())), kMinLogSpace),
        check_python(probe_python(env)),
    };
    if (cmd.plan_format == "json")
        std::cout << to_json(report).dump(2) << "\n";
    else
        std::cout << to_text(report);
    return exit_code(report);
}

}  // namespace dlaunch
