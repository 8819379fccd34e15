// `dlaunch topo [--topology-xml FILE]`: what dlaunch sees of a machine. Its own options only: the run's
// options would have no effect here, so they are refused rather than ignored.
#include <CLI/CLI.hpp>

#include "cli_app.hpp"
#include "dlaunch/cli.hpp"
#include "dlaunch/exit_codes.hpp"

namespace dlaunch {

Result<Command> parse_topo_command(const std::vector<std::string>& args, const EnvMap& env) {
    Command cmd;
    cmd.mode = Command::Mode::Topo;
    CLI::App app{
        "dlaunch topo: print what dlaunch sees of this machine (or of an hwloc XML export): CPUs, NUMA "
        "nodes, GPUs, RDMA NICs and network interfaces, and which NIC is closest to each GPU.",
        "dlaunch topo"};
    app.footer("Exit codes: 0 printed; " + std::to_string(exit_code::kUsage) + " usage error or an unreadable " +
               "--topology-xml; " + std::to_string(exit_code::kLaunchFailure) + " this machine could not be read.");
    std::string xml;
    auto* xml_opt = app.add_option("--topology-xml", xml,
                                   "An hwloc XML export (lstopo --of xml) instead of this "
                                   "machine (also DLAUNCH_TOPOLOGY_XML)")
                        ->type_name("FILE");
    std::string format = "text";
    app.add_option("--format", format, "text (default) or svg (a picture: NUMA nodes, cores, GPUs, NICs)")
        ->type_name("FORMAT")
        ->check(CLI::IsMember({"text", "svg"}));
    int verbose = 0, quiet = 0;
    app.add_flag("-v,--verbose", verbose, "More messages from dlaunch");
    app.add_flag("-q,--quiet", quiet, "Warnings and errors only");
    app.allow_extras();  // refused below, by name
    auto answered = cli_app::parse(app, args, "usage: dlaunch topo [--topology-xml FILE] [--format text|svg]", cmd);
    if (!answered) return answered.error();
    if (*answered) return cmd;
    if (!app.remaining().empty())
        return cli_app::usage_error(
            "topo: '" + app.remaining().front() + "' is not an option of dlaunch topo",
            "usage: dlaunch topo [--topology-xml FILE] [--format text|svg]; see dlaunch topo --help");
    if (xml_opt->count() > 0)
        cmd.request.topology_xml = xml;
    else if (const std::string from_env = str_var(env, "DLAUNCH_TOPOLOGY_XML"); !from_env.empty())
        cmd.request.topology_xml = from_env;
    cmd.request.verbosity = verbose - quiet;
    cmd.plan_format = format;
    return cmd;
}

}  // namespace dlaunch
