#include "dlaunch/health.hpp"

#include <string_view>

namespace dlaunch::health {
namespace {

// The log directory's room: logs and stacks of one attempt (the doctor asks for more, for a whole run).
constexpr unsigned long long kMinLogSpace = 64ULL << 20;

// The last non-empty line of a program's output, at most 200 characters.
std::string last_line(std::string_view text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
    const size_t nl = text.rfind('\n');
    std::string line(nl == std::string_view::npos ? text : text.substr(nl + 1));
    return line.size() > 200 ? line.substr(0, 200) + "..." : line;
}

std::string judge_site(const SiteCheckFacts& s) {
    const std::string name = "site check `" + s.command + "`";
    if (s.timed_out) return name + ": did not finish within " + std::to_string(kSiteCheckSeconds) + " s";
    if (s.exit_code == 0) return "";
    const std::string said = last_line(s.output);
    const std::string how =
        s.exit_code < 0 ? "could not run or was killed" : "exit code " + std::to_string(s.exit_code);
    return name + ": " + how + (said.empty() ? "" : ": " + said);
}

}  // namespace

std::string judge(const Facts& f) {
    std::string out;
    auto add = [&out](const std::string& problem) {
        if (!problem.empty()) out += (out.empty() ? "" : "; ") + problem;
    };
    auto failed = [](const doctor::Check& c) {
        return c.verdict == doctor::Verdict::Fail ? c.name + ": " + c.detail : std::string();
    };
    if (f.gpus) add(failed(doctor::check_gpus(*f.gpus)));
    if (f.ports) add(failed(doctor::check_ib_ports(*f.ports)));
    if (f.log_dir) add(failed(doctor::check_log_dir(*f.log_dir, kMinLogSpace)));
    if (f.site) add(judge_site(*f.site));
    return out;
}

std::string passed_note(const Facts& f) {
    std::string out;
    auto add = [&out](const std::string& item) { out += (out.empty() ? "" : "; ") + item; };
    auto said = [](const doctor::Check& c) {
        return c.name + " " + doctor::verdict_name(c.verdict) + " (" + c.detail + ")";
    };
    if (f.gpus) add(said(doctor::check_gpus(*f.gpus)));
    if (f.ports) add(said(doctor::check_ib_ports(*f.ports)));
    if (f.log_dir) add(said(doctor::check_log_dir(*f.log_dir, kMinLogSpace)));
    if (f.site) add(judge_site(*f.site).empty() ? "site check `" + f.site->command + "` passed" : judge_site(*f.site));
    return out.empty() ? "nothing checked" : out;
}

}  // namespace dlaunch::health
