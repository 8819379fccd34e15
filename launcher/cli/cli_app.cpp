#include "cli_app.hpp"

#include <set>

namespace dlaunch::cli_app {
namespace {

// The app's options, then its sections', in the order they were added.
std::vector<const CLI::Option*> all_options(const CLI::App& app) {
    std::vector<const CLI::Option*> options = app.get_options();
    for (const CLI::App* section : app.get_subcommands({})) {
        const auto more = section->get_options();
        options.insert(options.end(), more.begin(), more.end());
    }
    return options;
}

// CLI11's layout. Its "Usage:" line would hide SCRIPT [ARGS...]; the description carries the real usage.
// CLI11 lists the app's own options (-h,--help, --version) under "Options:" and then its subcommands: here
// the sections' options instead, so that all are one list.
class Formatter : public CLI::Formatter {
public:
    std::string make_usage(const CLI::App*, std::string) const override { return ""; }
    std::string make_subcommands(const CLI::App* app, CLI::AppFormatMode) const override {
        std::string out;
        for (const CLI::App* section : app->get_subcommands({}))
            for (const CLI::Option* opt : section->get_options())
                if (!opt->get_group().empty()) out += make_option(opt, false);  // group "": hidden
        return out;
    }
};

// The options' long names, each with its option: every spelling of one option leads to the same entry.
std::vector<std::pair<std::string, const CLI::Option*>> long_names(const CLI::App& app) {
    std::vector<std::pair<std::string, const CLI::Option*>> names;
    for (const CLI::Option* opt : all_options(app))
        for (const std::string& name : opt->get_lnames()) names.emplace_back("--" + name, opt);
    return names;
}

// The option `word` ("--name" or "--name=value") names: by its whole name, or by a prefix of the names of
// one option only (Python's argparse, which torchrun and Paddle's launcher use, takes any unique prefix).
// nullptr when no option matches; an Error naming the candidates when several options do.
Result<const CLI::Option*> find_long_option(const std::vector<std::pair<std::string, const CLI::Option*>>& names,
                                            const std::string& word, std::string& full_name) {
    const std::string name = word.substr(0, word.find('='));
    for (auto& [long_name, opt] : names)
        if (long_name == name) return full_name = long_name, opt;
    std::set<const CLI::Option*> options;
    std::string candidates;
    for (auto& [long_name, opt] : names) {
        if (long_name.rfind(name, 0) != 0) continue;
        if (options.empty()) full_name = long_name;
        options.insert(opt);
        candidates += (candidates.empty() ? "" : ", ") + long_name;
    }
    if (options.size() > 1)
        return Error{"cli: ambiguous option '" + name + "': it could be " + candidates,
                     "write more of the option's name"};
    return options.empty() ? nullptr : *options.begin();
}

}  // namespace

Result<Words> expand_abbreviations(const CLI::App& app, const std::vector<std::string>& args) {
    const auto names = long_names(app);
    Words out{args, args.size()};
    for (size_t i = 0; i < out.words.size(); ++i) {
        std::string& word = out.words[i];
        if (word == "--" || word.size() < 2 || word[0] != '-') {  // SCRIPT, or the end of the options
            out.options_end = i;
            break;
        }
        if (word[1] != '-') {  // a short option: its value follows unless attached
            auto opt = app.get_option_no_throw(word.substr(0, 2));
            if (opt && word.size() == 2 && opt->get_expected_min() > 0) ++i;
            continue;
        }
        std::string full_name;
        auto opt = find_long_option(names, word, full_name);
        if (!opt) return opt.error();
        if (!*opt) continue;  // unknown: take_script says so (a value it may have ends the options here)
        const auto eq = word.find('=');
        if (eq == std::string::npos && (*opt)->get_expected_min() > 0) ++i;
        word = full_name + (eq == std::string::npos ? "" : word.substr(eq));
    }
    return out;
}

Error usage_error(const std::string& what, const std::string& hint) {
    return Error::in("cli", what, hint);
}

void configure(CLI::App& app) {
    app.formatter(std::make_shared<Formatter>());
    app.prefix_command();
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.set_version_flag("--version", std::string(DLAUNCH_VERSION));
}

CLI::App& Sections::next() {
    if (added_++ % kPerSection == 0) {
        now_ = app_.add_option_group("Options");
        now_->set_help_flag();  // the app's -h,--help is the only one
    }
    return *now_;
}

void add_plan_format_option(CLI::App& app, Command::Mode mode, PlanFormat& format) {
    if (mode == Command::Mode::Plan)
        format.option = app.add_option("--format", format.text,
                                       "table (default), json, or svg (a picture of the node: each rank's cores, "
                                       "GPU and NIC in its colour)")
                            ->type_name("FORMAT")
                            ->check(CLI::IsMember({"table", "json", "svg"}));
}

Result<bool> parse(CLI::App& app, const std::vector<std::string>& args, const std::string& hint, Command& cmd,
                   std::vector<std::string>* script) {
    auto expanded = expand_abbreviations(app, args);
    if (!expanded) return Error{expanded.error().what, expanded.error().hint + "; " + hint};
    std::vector<std::string>& words = expanded->words;
    if (script) {
        script->assign(words.begin() + static_cast<std::ptrdiff_t>(expanded->options_end), words.end());
        words.resize(expanded->options_end);
    }
    std::vector<std::string> reversed(words.rbegin(), words.rend());
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

Status take_script(const CLI::App& app, const std::vector<std::string>& script, const std::string& program,
                   const std::string& hint, LaunchRequest& req) {
    auto rest = app.remaining();  // unknown short options, which CLI11 passed over
    rest.insert(rest.end(), script.begin(), script.end());
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
