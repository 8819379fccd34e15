// The CLI11 steps that dlaunch's command lines (cli.cpp) and dlaunch-paddle's (cli_paddle.cpp) share.
// Internal to launcher/cli: the public interface is dlaunch/cli.hpp.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "dlaunch/cli.hpp"

namespace dlaunch::cli_app {

// A usage error: "cli: <what>" with `hint`.
Error usage_error(const std::string& what, const std::string& hint);

// Sets what every dlaunch command line has: the help layout, SCRIPT and its ARGS left unparsed, the last
// of a repeated option winning, and --version. Call before adding options.
void configure(CLI::App& app);

// Sections of an app for options added one after another (CLI11 option groups), a new one every kPerSection.
// CLI11 compares each option added with every option its App holds, copying their names to do so: dlaunch's
// ~60 options in one App were 1.9 M of the 3.2 M instructions of `dlaunch --version` (callgrind). In sections
// only options of the same section are compared. --help lists the options of the app and of its sections as
// one list, in the order they were added (configure's formatter), and parsing looks into every section.
class Sections {
public:
    static constexpr int kPerSection = 8;
    explicit Sections(CLI::App& app) : app_(app) {}
    // The section for the next option.
    CLI::App& next();

private:
    CLI::App& app_;
    CLI::App* now_ = nullptr;
    int added_ = 0;
};

// Where `--format` of a `plan` command lands.
struct PlanFormat {
    std::string text;
    CLI::Option* option = nullptr;
};

// Adds `--format table|json` when `mode` is Plan; otherwise adds nothing.
void add_plan_format_option(CLI::App& app, Command::Mode mode, PlanFormat& format);

// A command line's words, and where its options end: at SCRIPT or "--" (an unknown option is taken for one
// without a value, so that --help after it is still seen, as argparse does).
struct Words {
    std::vector<std::string> words;
    size_t options_end = 0;
};

// `args` with each abbreviated long option before SCRIPT written out ("--nproc=2" -> "--nproc-per-node=2"),
// as Python's argparse takes any unique prefix; an Error naming the candidates when a prefix is ambiguous.
Result<Words> expand_abbreviations(const CLI::App& app, const std::vector<std::string>& args);

// Parses `args` into `app` (abbreviations expanded). Returns true when `cmd` is complete (--help or --version answered,
// with its text), false when the options are to be read; a CLI11 error is a usage error with `hint`. With
// `script`, the words from where the options end on are not parsed but put there, for take_script: CLI11
// would take an empty SCRIPT ("") for the name of a section (a nameless option group) and read the ARGS
// after it as that section's options.
Result<bool> parse(CLI::App& app, const std::vector<std::string>& args, const std::string& hint, Command& cmd,
                   std::vector<std::string>* script = nullptr);

// Takes SCRIPT and its ARGS from what `app` left (unknown short options) and `script` (parse's), after an
// optional "--". Fails when there is no SCRIPT (the usage line names `program`) or when it looks like an
// option `app` does not know.
Status take_script(const CLI::App& app, const std::vector<std::string>& script, const std::string& program,
                   const std::string& hint, LaunchRequest& req);

}  // namespace dlaunch::cli_app
