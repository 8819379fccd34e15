// `dlaunch doctor [--format text|json] [--log-dir DIR] [--master-port P] [--port-range LOW-HIGH]`:
// see doctor/include/dlaunch/doctor.hpp.
#include <CLI/CLI.hpp>

#include "cli_app.hpp"
#include "dlaunch/cli.hpp"
#include "dlaunch/exit_codes.hpp"
#include "dlaunch/plan.hpp"

namespace dlaunch {

Result<Command> parse_doctor_command(const std::vector<std::string>& args, const EnvMap& env) {
    Command cmd;
    cmd.mode = Command::Mode::Doctor;
    cmd.plan_format = "text";
    std::string log_dir, port_range;
    int master_port = kDefaultMasterPort;
    CLI::App app{
        "dlaunch doctor: is this node ready to run dlaunch jobs? One line per check (topology, GPUs "
        "(NVML), RDMA ports (libibverbs), cpuset and Slurm binding, the SPANK plugin, dlaunch's helpers, "
        "PMIx, srun's --mpi plugins, NCCL, the ports a job will use, the log directory, Python with "
        "torch), each with its verdict and the fix. Hardware that is not there (GPUs, RDMA NICs) and "
        "optional software (Slurm, NCCL) is \"not present\", not ok; PMIx and Python with torch are required. "
        "On every node of a job: srun --ntasks-per-node=1 dlaunch doctor; node 0 then also says whether "
        "every node is ready, their clocks agree (within 1 s) and the log directory is one directory on all.",
        "dlaunch doctor"};
    app.footer("Exit codes: 0 ready (no check failed; warnings allowed); " + std::to_string(exit_code::kNotReady) +
               " a check failed (its line says the fix); " + std::to_string(exit_code::kUsage) + " usage error.");
    app.add_option("--format", cmd.plan_format, "text (default) or json")
        ->type_name("FORMAT")
        ->check(CLI::IsMember({"text", "json"}));
    app.add_option("--log-dir", log_dir, "The directory runs will log to (default: $TMPDIR, else /tmp)")
        ->type_name("DIR");
    app.add_option("--master-port", master_port, "Outside a Slurm job: the master port to check (default 29500)")
        ->type_name("PORT")
        ->check(CLI::Range(1024, 65535));
    app.add_option("--port-range", port_range,
                   "Under a Slurm job: the range its steps derive ports from "
                   "(default 21000-28999, or DLAUNCH_PORT_RANGE)")
        ->type_name("LOW-HIGH");
    auto answered = cli_app::parse(
        app, args,
        "usage: dlaunch doctor [--format text|json] [--log-dir DIR] [--master-port PORT] [--port-range LOW-HIGH]", cmd);
    if (!answered) return answered.error();
    if (port_range.empty() && env.contains("DLAUNCH_PORT_RANGE")) port_range = env.at("DLAUNCH_PORT_RANGE");
    if (!port_range.empty()) {
        auto r = parse_port_range(app.get_option("--port-range")->count() ? "--port-range" : "DLAUNCH_PORT_RANGE",
                                  port_range);
        if (!r) return r.error();
        cmd.request.port_range = *r;
    }
    cmd.request.master_port = master_port;
    if (!log_dir.empty()) cmd.request.log_dir = log_dir;
    return cmd;
}

}  // namespace dlaunch
