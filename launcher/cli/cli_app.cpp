#include "cli_app.hpp"

namespace dlaunch::cli_app {
namespace {

// CLI11's own "Usage:" line would hide SCRIPT [ARGS...]; the description carries the real usage.
class Formatter : public CLI::Formatter {
public:
    std::string make_usage(const CLI::App*, std::string) const override { return ""; }
};

}  // namespace

Error usage_error(const std::string& what, const std::string& hint) {
    return Error{"cli: " + what, hint};
}

void configure(CLI::App& app) {
    app.formatter(std::make_shared<Formatter>());
    app.prefix_command();
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.set_version_flag("--version", std::string(DLAUNCH_VERSION));
}

void add_plan_format_option(CLI::App& app, Command::Mode mode, PlanFormat& format) {
    if (mode == Command::Mode::Plan)
        format.option = app.add_option("--format", format.text,
                                       "table (default), json, or svg (a picture of the node: each rank's cores, "
                                       "GPU and NIC in its colour)")
                            ->type_name("FORMAT")
                            ->check(CLI::IsMember({"table", "json", "svg"}));
}

Result<bool> parse(CLI::App& app, const std::vector<std::string>& args, const std::string& hint, Command& cmd) {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    try {
        app.parse(reversed);
    } catch (const CLI::CallForHelp&) {
        cmd.mode = Command::Mode::Help;
        cmd.help_text = app.help();
        return true;
    } catch (const CLI::CallForVersion&) {
        cmd.mode = Command::Mode::Version;
        cmd.help_text = std::string("dlaunch ") + DLAUNCH_VERSION + "\n";
        return true;
    } catch (const CLI::ParseError& e) {
        return usage_error(e.what(), hint);
    }
    return false;
}

Status take_script(const CLI::App& app, const std::string& program, const std::string& hint, LaunchRequest& req) {
    auto rest = app.remaining();
    // "--" ends the options, as in torchrun and every POSIX tool: what follows is SCRIPT, dash or not.
    const bool options_ended = !rest.empty() && rest.front() == "--";
    if (options_ended) rest.erase(rest.begin());
    if (rest.empty())
        return usage_error("no SCRIPT given", "usage: " + program + " [OPTIONS] SCRIPT [ARGS...]; " + hint);
    if (!options_ended && rest.front().size() > 1 && rest.front()[0] == '-')
        return usage_error("unknown option '" + rest.front() + "'", hint);
    req.script = rest.front();
    req.script_args.assign(rest.begin() + 1, rest.end());
    return Ok{};
}

}  // namespace dlaunch::cli_app
