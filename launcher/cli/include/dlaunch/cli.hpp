// The dlaunch command line: torchrun's options in both spellings (--nproc-per-node, --nproc_per_node)
// with PET_<NAME> environment fallbacks, plus dlaunch's own. Syntax only: facts about the machine
// (does the port bind, does the script exist) are checked by the front-end, the rest by make_plan().
#pragma once

#include <string>
#include <vector>

#include "dlaunch/job_context.hpp"
#include "dlaunch/request.hpp"
#include "dlaunch/result.hpp"
#include "dlaunch/signals.hpp"

namespace dlaunch {

struct Command {
    enum class Mode { Run, Plan, Topo, Stacks, Clean, Report, Doctor, Help, Version };
    Mode mode = Mode::Run;
    // `dlaunch stacks TARGET`: an agent's pid, a run (or log) directory, or a Slurm job id ("slurm:ID"), and
    // whether native stacks are printed too.
    std::string stacks_target;
    bool stacks_native = false;
    bool clean_dry_run = false;     // `dlaunch clean --dry-run`: say what would go
    std::string report_path;        // `dlaunch report PATH`: a run directory or a log directory
    bool report_exit_code = false;  // `dlaunch report --exit-code`: print the run's exit code instead
    // `dlaunch plan --format table|json|svg`, `topo --format text|svg`, `report --format text|svg`,
    // `doctor --format text|json`
    std::string plan_format = "table";
    LaunchRequest request;
    std::string help_text;  // filled for Mode::Help
};

// Which program's command line: the `dlaunch` agent, `dlaunch-launch` (the agent with
// torch.distributed.launch's legacy --local-rank argument on by default), `dlaunch-mpi` (one process
// per rank, started by mpirun or srun: no options about node counts, restarts, logs or signals), or
// `dlaunch-paddle` (the agent with paddle.distributed.launch's command line and contract).
enum class Program { Agent, LegacyLaunch, Mpi, Paddle };

// The program a front-end binary was started as, from argv[0]'s base name ("dlaunch-launch" selects
// LegacyLaunch, "dlaunch-paddle" Paddle; anything else the binary's own program).
Program program_from_argv0(const std::string& argv0, Program own);

// Parses argv (without argv[0]) with `env` as the PET_* fallback source. Errors are usage errors.
Result<Command> parse_command_line(const std::vector<std::string>& args, const EnvMap& env,
                                   Program program = Program::Agent);

// `dlaunch stacks [--native] TARGET` (cli_stacks.cpp).
Result<Command> parse_stacks_command(const std::vector<std::string>& args);

// `dlaunch clean [--dry-run]`.
Result<Command> parse_clean_command(const std::vector<std::string>& args);

// `dlaunch doctor [--format text|json] [--log-dir DIR] [--master-port P] [--port-range LOW-HIGH]`.
Result<Command> parse_doctor_command(const std::vector<std::string>& args, const EnvMap& env);

// `dlaunch report [--format text|svg] [--exit-code] PATH`.
Result<Command> parse_report_command(const std::vector<std::string>& args);

// `dlaunch topo ARGS`: --topology-xml (or DLAUNCH_TOPOLOGY_XML), -v, -q; anything else is refused.
Result<Command> parse_topo_command(const std::vector<std::string>& args, const EnvMap& env);

// paddle.distributed.launch's command line (cli_paddle.cpp), for Program::Paddle.
Result<Command> parse_paddle_command_line(const std::vector<std::string>& args, const EnvMap& env);

Result<PortRange> parse_port_range(const std::string& option, const std::string& text);

// Parsers for single values, shared with other front-ends; errors name `option`.
Result<long long> parse_integer(const std::string& option, const std::string& text, long long min, long long max);
Result<double> parse_seconds(const std::string& option, const std::string& text, bool allow_zero);
// A hang timeout: seconds, at least kMinHangTimeoutSeconds.
Result<double> parse_hang_timeout(const std::string& option, const std::string& text);
// DLAUNCH_HANG_TIMEOUT in `env`: nullopt when unset or empty; an error when not a number of seconds > 0.
Result<std::optional<double>> hang_timeout_from_env(const EnvMap& env);

// --restart-backoff S[:MAX] (MAX: 30 s by default, or S when S is more).
Result<RestartBackoff> parse_restart_backoff(const std::string& text);
Result<std::vector<int>> parse_device_list(const std::string& option, const std::string& text);
Result<EnvContract> parse_env_contract(const std::string& option, const std::string& text);
// "HOST:PORT" of a node rendezvous, checked (etcd:// and other URLs are refused).
Result<std::string> parse_rendezvous_master(const std::string& option, const std::string& text);
Result<NodeRange> parse_nnodes(const std::string& option, const std::string& text);
Result<NprocSpec> parse_nproc_per_node(const std::string& option, const std::string& text);
Result<StdSelection> parse_std_selection(const std::string& option, const std::string& text);
Result<std::set<int>> parse_rank_list(const std::string& option, const std::string& text);
Result<std::vector<int>> parse_signal_list(const std::string& option, const std::string& text);

}  // namespace dlaunch
