// `dlaunch stacks`: the stacks of every rank of a running job, on demand (docs/hangs.md).
#include "cli_app.hpp"
#include "dlaunch/cli.hpp"
#include "dlaunch/exit_codes.hpp"

namespace dlaunch {

Result<Command> parse_stacks_command(const std::vector<std::string>& args) {
    Command cmd;
    cmd.mode = Command::Mode::Stacks;
    CLI::App app{
        "dlaunch stacks: print the Python stacks of every rank of a running dlaunch job on this node, the way "
        "`py-spy dump` does for one process; nothing is stopped.",
        "dlaunch stacks"};
    app.footer(
        "TARGET: the agent's pid; a run directory or log directory (ranks whose stacks files are under it); or\n"
        "slurm:JOBID (ranks of that Slurm job on this node; `srun --jobid JOBID --overlap --ntasks-per-node=1\n"
        "dlaunch stacks slurm:JOBID` reaches every node).\n\n"
        "Exit codes: 0 every rank found answered; " +
        std::to_string(exit_code::kUsage) + " usage error; " + std::to_string(exit_code::kLaunchFailure) +
        " no rank found, or some did not answer.");
    app.add_flag("--native", cmd.stacks_native, "Native stacks too (eu-stack, else gdb; py-spy when installed)");
    app.add_option("TARGET", cmd.stacks_target, "Agent pid, run or log directory, or slurm:JOBID")->required();
    auto answered = cli_app::parse(app, args, "usage: dlaunch stacks [--native] PID|RUN_DIR|slurm:JOBID", cmd);
    if (!answered) return answered.error();
    if (!*answered && cmd.stacks_target.empty())
        return cli_app::usage_error("stacks: TARGET is empty", "give the agent's pid, a run directory or slurm:JOBID");
    return cmd;
}

}  // namespace dlaunch
