// `dlaunch clean [--dry-run]`: see frontends/include/dlaunch/clean_command.hpp.
#include <CLI/CLI.hpp>

#include "cli_app.hpp"
#include "dlaunch/cli.hpp"
#include "dlaunch/exit_codes.hpp"

namespace dlaunch {

Result<Command> parse_clean_command(const std::vector<std::string>& args) {
    Command cmd;
    cmd.mode = Command::Mode::Clean;
    CLI::App app{
        "dlaunch clean: remove from $TMPDIR what dlaunch runs of this user left there and nothing uses "
        "any more: run directories of runs without --log-dir that ended (kept after a failure or a "
        "stop, or holding output kept off the console) or whose agent is gone, and the FIFOs and "
        "stacks files of agents and watchers that were killed. Runs still going are left alone.",
        "dlaunch clean"};
    app.footer("Exit codes: 0 done; " + std::to_string(exit_code::kUsage) + " usage error; " +
               std::to_string(exit_code::kLaunchFailure) + " something could not be removed (said on stderr).");
    app.add_flag("--dry-run", cmd.clean_dry_run, "Print what would be removed, remove nothing");
    auto answered = cli_app::parse(app, args, "usage: dlaunch clean [--dry-run]", cmd);
    if (!answered) return answered.error();
    return cmd;
}

}  // namespace dlaunch
