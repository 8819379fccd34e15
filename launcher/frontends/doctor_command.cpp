#include "dlaunch/doctor_command.hpp"

#include <algorithm>
#include <iostream>

#include "dlaunch/doctor_allocation.hpp"
#include "dlaunch/doctor_probes.hpp"
#include "dlaunch/exit_codes.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/plan.hpp"

namespace dlaunch {
namespace {

// Logs and stacks of a run need room: less than this fails the log-dir check.
constexpr unsigned long long kMinLogSpace = 1ULL << 30;

// How long nodes wait for each other: the slowest check (Python importing torch) may take a minute.
constexpr double kAllocationWaitSeconds = 90;

doctor::Report node_report(const Command& cmd, const EnvMap& env, const std::string& log_dir) {
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
        check_mpi_launchers(probe_mpi_launchers(env)),
        check_library(probe_nccl(), false),
        check_ports(probe_ports(env, req.port_range, req.master_port.value_or(kDefaultMasterPort))),
        check_log_dir(probe_log_dir(log_dir), kMinLogSpace),
        check_python(probe_python(env)),
    };
    return report;
}

void print(const Command& cmd, const doctor::Report& own, const std::optional<doctor::Report>& every_node) {
    if (cmd.plan_format == "json") {
        auto j = doctor::to_json(own);
        if (every_node) j["every_node"] = doctor::to_json(*every_node);
        std::cout << j.dump(2) << "\n";
        return;
    }
    std::cout << doctor::to_text(own);
    if (every_node) std::cout << "\n" << doctor::to_text(*every_node);
}

// Node 0 of a step of several nodes: the others' reports, and the verdict for them all.
int lead_allocation(const Command& cmd, const AllocationPlace& place, const doctor::Report& own,
                    const doctor::AllocationFacts& log_dir) {
    if (cmd.plan_format != "json") std::cout << doctor::to_text(own) << std::flush;
    auto facts = gather_reports(place, own, kAllocationWaitSeconds, log_dir);
    if (!facts) std::cerr << "dlaunch: " << facts.error().describe() << "\n";
    std::optional<doctor::Report> every_node;
    if (facts) every_node = doctor::allocation_report(*facts);
    if (cmd.plan_format == "json")
        print(cmd, own, every_node);
    else if (every_node)
        std::cout << "\n" << doctor::to_text(*every_node);
    const int all = every_node ? doctor::exit_code(*every_node) : exit_code::kNotReady;
    return std::max(doctor::exit_code(own), all);
}

}  // namespace

int run_doctor_command(const Command& cmd, const EnvMap& env) {
    const std::string log_dir = cmd.request.log_dir.value_or(host::tmpdir());
    const auto place = allocation_of(env, cmd.request.port_range, log_dir);
    doctor::AllocationFacts dir;  // the log directory, as node 0 leaves its marker in it
    dir.log_dir = log_dir;
    dir.log_dir_given = cmd.request.log_dir.has_value();
    if (place && place->node == 0)
        if (auto s = make_marker(*place); !s) dir.marker_error = s.error().what;
    const doctor::Report own = node_report(cmd, env, log_dir);
    if (place && place->node == 0) return lead_allocation(cmd, *place, own, dir);
    print(cmd, own, std::nullopt);
    if (place) {
        std::cout << std::flush;
        if (auto s = send_report(*place, own, kAllocationWaitSeconds); !s)
            std::cerr << "dlaunch: doctor: this node's report did not reach node 0 (" << place->hosts.front()
                      << "): " << s.error().describe() << "\n";
    }
    return doctor::exit_code(own);
}

}  // namespace dlaunch
