// `dlaunch report [--format text|svg] [--exit-code] RUN_DIR|LOG_DIR`: see core/include/dlaunch/run_report.hpp.
#include <CLI/CLI.hpp>

#include "cli_app.hpp"
#include "dlaunch/cli.hpp"
#include "dlaunch/exit_codes.hpp"

namespace dlaunch {

Result<Command> parse_report_command(const std::vector<std::string>& args) {
    Command cmd;
    cmd.mode = Command::Mode::Report;
    cmd.plan_format = "text";
    CLI::App app{
        "dlaunch report: a run's record (its run directory's run.json) as a timeline: each attempt's start, "
        "length and what ended it, the waits between attempts, every failure, and the ranks running at a stop. "
        "Given a --log-dir holding several runs, the text covers each. A job run with --requeue "
        "(LOG_DIR/JOB_ID, its attempts.jsonl) is told as its attempts' ends (text only).",
        "dlaunch report"};
    app.footer("Exit codes: 0 printed; " + std::to_string(exit_code::kUsage) +
               " usage error, or no run record there, or (--exit-code) no one run whose code it is (said on stderr).");
    app.add_option("--format", cmd.plan_format, "text (default) or svg (a picture of the timeline, one run)")
        ->type_name("FORMAT")
        ->check(CLI::IsMember({"text", "svg"}));
    app.add_flag("--exit-code", cmd.report_exit_code,
                 "Print only the run's exit code: the one run's at PATH, else, in a group job's --log-dir (one run "
                 "per node), that of the agent that led the group at its end. For batch scripts: from Slurm 23.02 "
                 "on, srun --no-kill exits 1 once a node failed, even when the group went on without it and "
                 "succeeded (examples/sbatch/group.sbatch)");
    app.add_option("PATH", cmd.report_path,
                   "A run directory (holds run.json), a --requeue job's directory (attempts.jsonl), or a --log-dir")
        ->required();
    auto answered =
        cli_app::parse(app, args, "usage: dlaunch report [--format text|svg] [--exit-code] RUN_DIR|LOG_DIR", cmd);
    if (!answered) return answered.error();
    return cmd;
}

}  // namespace dlaunch
