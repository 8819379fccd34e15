#include "dlaunch/summary.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "dlaunch/exit_codes.hpp"
#include "dlaunch/plan.hpp"
#include "dlaunch/signals.hpp"

namespace dlaunch {

std::pair<std::optional<std::string>, std::optional<std::string>> parse_error_file(const std::string& content) {
    if (content.empty()) return {};
    auto j = nlohmann::json::parse(content, nullptr, false);
    if (j.is_discarded()) return {content, std::nullopt};
    std::optional<std::string> message, traceback;
    if (j.contains("message")) {
        auto& m = j["message"];
        if (m.is_string())
            message = m.get<std::string>();
        else if (m.is_object()) {
            if (m.contains("message") && m["message"].is_string()) message = m["message"].get<std::string>();
            if (m.contains("extraInfo") && m["extraInfo"].is_object() && m["extraInfo"].contains("py_callstack") &&
                m["extraInfo"]["py_callstack"].is_string())
                traceback = m["extraInfo"]["py_callstack"].get<std::string>();
        }
    }
    if (!message && !traceback) message = j.dump();
    return {message, traceback};
}

std::string format_utc(double t) {
    using namespace std::chrono;
    const sys_time<milliseconds> at{milliseconds(std::llround(t * 1000))};  // 33.9996 s is 34.000, not 33.000
    const auto day = floor<days>(at);
    const year_month_day date{day};
    const hh_mm_ss time{at - day};
    // By calendar arithmetic, not gmtime_r() or strftime(): glibc reads /etc/localtime for those (once per process
    // for gmtime_r, at every call for strftime), for a time in UTC, at the attempt's end where every agent of a
    // group is busy.
    char out[80];
    std::snprintf(out, sizeof out, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", static_cast<int>(date.year()),
                  static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                  static_cast<int>(time.hours().count()), static_cast<int>(time.minutes().count()),
                  static_cast<int>(time.seconds().count()), static_cast<int>(time.subseconds().count()));
    return out;
}

namespace {

std::string who(const FailureRecord& r) {
    return (r.role.empty() ? std::string("rank ") : r.role + " ") + std::to_string(r.rank) + " (local rank " +
           std::to_string(r.failure.exit.local_rank) + ", node " + std::to_string(r.node_rank) + ", host " + r.host +
           ", pid " + std::to_string(r.failure.exit.pid) + ")";
}

void indent(std::ostringstream& out, const std::string& text, const char* prefix) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out << prefix << line << "\n";
}

// The root cause rank: who, its status, its stderr and error file.
void render_root(std::ostringstream& out, const FailureRecord& r, const RunOutcome& o) {
    const FailureRecord* root = &r;
    out << "root cause: " << who(*root) << "\n";
    out << "  status:   " << root->failure.describe() << " at " << format_utc(root->failure.exit.time) << " (attempt "
        << root->failure.attempt << "; restarts used " << o.restarts << " of " << o.max_restarts << ")\n";
    // Without a log file the stderr went to the console only; dlaunch still kept its last lines in memory.
    out << "  stderr:   " << (root->stderr_log.empty() ? "on the console only (no log file)" : root->stderr_log)
        << "\n";
    if (!root->stderr_tail.empty()) {
        out << "  last stderr lines:\n";
        for (auto& l : root->stderr_tail) out << "    | " << l << "\n";
    }
    if (!root->culprit.empty()) out << "  culprit:  " << root->culprit << "\n";
    for (auto& e : root->hang_evidence) out << "    - " << e << "\n";
    if (!root->stacks_files.empty()) out << "  stacks:   " << root->stacks_files << "\n";
    for (auto& n : root->notes) out << "  note:     " << n << "\n";
    if (root->error_message) {
        out << "  error file message:\n";
        indent(out, *root->error_message, "    | ");
    }
    if (root->traceback) {
        out << "  traceback (from TORCHELASTIC_ERROR_FILE):\n";
        indent(out, *root->traceback, "    | ");
    }
}

// Every failure but the root cause's, in time order.
void render_others(std::ostringstream& out, const RunOutcome& o, const FailureRecord* root) {
    bool header = false;
    for (auto& r : o.failures) {
        if (&r == root) continue;
        if (!header) out << "other failures:\n";
        header = true;
        out << "  attempt " << r.failure.attempt << ": rank " << r.rank << " (local " << r.failure.exit.local_rank
            << "): " << r.failure.describe() << " at " << format_utc(r.failure.exit.time)
            << (r.host.empty() ? "" : " on " + r.host)
            << (r.failure.root_cause             ? " [root cause of that attempt]"
                : r.failure.stopped_by_us        ? " [while dlaunch was stopping the group]"
                : r.failure.exit.before_the_stop ? " [failed on its own, after the root cause]"
                                                 : "")
            << "\n";
        // A failure of its own is shown with its stderr, as the root cause is (effects of the stop are not).
        if (!r.failure.exit.before_the_stop || r.failure.stopped_by_us) continue;
        if (!r.stderr_log.empty()) out << "    stderr: " << r.stderr_log << "\n";
        for (auto& l : r.stderr_tail) out << "    | " << l << "\n";
    }
}

}  // namespace

std::string render_failure_summary(const RunOutcome& o) {
    if (!o.failed) return "";
    const FailureRecord* root = nullptr;
    for (auto& r : o.failures)
        if (r.failure.root_cause) root = &r;
    if (!root && o.end_cause.empty()) return "";
    std::ostringstream out;
    out << "dlaunch: ==================== run " << o.run_id << " failed ====================\n";
    if (!o.end_cause.empty()) {
        out << "root cause: " << o.end_cause << " (restarts used " << o.restarts << " of " << o.max_restarts << ")\n";
        root = nullptr;  // the workers' failures are earlier attempts'
    } else {
        render_root(out, *root, o);
    }
    render_others(out, o, root);
    for (const std::string& line : left_out_lines(o)) out << line << "\n";
    out << "exit code: " << o.exit_code << "\n";
    return out.str();
}

nlohmann::json failure_record_json(const FailureRecord& r) {
    return {{"attempt", r.failure.attempt},
            {"rank", r.rank},
            {"local_rank", r.failure.exit.local_rank},
            {"node_rank", r.node_rank},
            {"role", r.role_name},
            {"ps_role", r.role},
            {"host", r.host},
            {"pid", r.failure.exit.pid},
            {"exit_code", r.failure.exit.status.signaled ? nullptr : nlohmann::json(r.failure.exit.status.code)},
            {"signal", r.failure.exit.status.signaled ? nlohmann::json(r.failure.exit.status.code) : nullptr},
            {"status", r.failure.describe()},
            {"time", format_utc(r.failure.exit.time)},
            {"epoch", r.failure.exit.time},
            {"root_cause", r.failure.root_cause},
            {"stopped_by_dlaunch", r.failure.stopped_by_us},
            {"stderr_log", r.stderr_log},
            {"stderr_tail", r.stderr_tail},
            {"error_message", r.error_message ? nlohmann::json(*r.error_message) : nullptr},
            {"traceback", r.traceback ? nlohmann::json(*r.traceback) : nullptr},
            {"error_file", r.error_file},
            {"hung_after_seconds", r.failure.hung_after ? nlohmann::json(*r.failure.hung_after) : nullptr},
            {"stacks_files", r.stacks_files},
            {"culprit", r.culprit},
            {"hang_evidence", r.hang_evidence},
            {"notes", r.notes}};
}

std::optional<FailureRecord> failure_record_from_json(const nlohmann::json& j) {
    try {
        FailureRecord r;
        r.failure.attempt = j.at("attempt").get<int>();
        r.rank = j.at("rank").get<int>();
        r.failure.exit.local_rank = j.at("local_rank").get<int>();
        r.node_rank = j.at("node_rank").get<int>();
        r.role_name = j.value("role", "");
        r.role = j.value("ps_role", "");
        r.host = j.at("host").get<std::string>();
        r.failure.exit.pid = j.at("pid").get<int>();
        r.failure.exit.status.signaled = !j.at("signal").is_null();
        r.failure.exit.status.code =
            r.failure.exit.status.signaled ? j.at("signal").get<int>() : j.at("exit_code").get<int>();
        r.failure.exit.time = j.at("epoch").get<double>();
        r.failure.root_cause = j.at("root_cause").get<bool>();
        r.failure.stopped_by_us = j.at("stopped_by_dlaunch").get<bool>();
        r.stderr_log = j.at("stderr_log").get<std::string>();
        r.stderr_tail = j.at("stderr_tail").get<std::vector<std::string>>();
        if (j.at("error_message").is_string()) r.error_message = j["error_message"].get<std::string>();
        if (j.at("traceback").is_string()) r.traceback = j["traceback"].get<std::string>();
        // Absent in records written before hangs were found: read with defaults.
        if (j.contains("hung_after_seconds") && j["hung_after_seconds"].is_number())
            r.failure.hung_after = j["hung_after_seconds"].get<double>();
        r.error_file = j.value("error_file", "");
        r.stacks_files = j.value("stacks_files", "");
        r.culprit = j.value("culprit", "");
        r.hang_evidence = j.value("hang_evidence", std::vector<std::string>{});
        r.notes = j.value("notes", std::vector<std::string>{});
        return r;
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

namespace {

nlohmann::json left_out_json(const RunOutcome& o) {
    nlohmann::json out = nlohmann::json::array();
    for (const LeftOut& l : o.left_out) out.push_back({{"attempt", l.attempt}, {"host", l.host}, {"why", l.why}});
    return out;
}

}  // namespace

nlohmann::json failure_summary_json(const RunOutcome& o) {
    nlohmann::json j{{"run_id", o.run_id},     {"exit_code", o.exit_code},
                     {"restarts", o.restarts}, {"max_restarts", o.max_restarts},
                     {"root_cause", nullptr},  {"failures", nlohmann::json::array()}};
    for (auto& r : o.failures) j["failures"].push_back(failure_record_json(r));
    for (auto& f : j["failures"])
        if (f["root_cause"].get<bool>()) j["root_cause"] = f;  // the last attempt's root cause wins
    if (!o.end_cause.empty()) {
        j["root_cause"] = nullptr;
        j["end_cause"] = o.end_cause;
    }
    if (!o.left_out.empty()) j["left_out"] = left_out_json(o);
    return j;
}

std::string run_end_word(const RunOutcome& o) {
    if (o.stop_signal != 0 && !o.checkpointed) return "stopped by " + signal_name(o.stop_signal);
    if (o.checkpointed) return "checkpointed";
    if (o.stopped_by_group) return "ended by the group";
    if (!o.not_ready.empty()) return "not ready";
    if (o.exit_code == exit_code::kSuccess) return "succeeded";
    for (auto& f : o.failures)
        if (f.failure.root_cause && f.failure.attempt == o.restarts && f.failure.hung_after) return "hung";
    return "failed";
}

namespace {

// The root cause of `attempt`, as "rank 1, exit code 1"; "" when none.
std::string cause_of_attempt(const RunOutcome& o, int attempt) {
    for (auto& f : o.failures)
        if (f.failure.root_cause && f.failure.attempt == attempt)
            return "rank " + std::to_string(f.rank) + ", " + f.failure.describe();
    return "";
}

}  // namespace

int exit_code_after_logs(int code, const RunOutcome& outcome, bool ignore_log_errors) {
    return code == exit_code::kSuccess && !outcome.log_errors.empty() && !ignore_log_errors ? exit_code::kLogFailure
                                                                                            : code;
}

nlohmann::json run_record_json(const RunOutcome& o, const std::string& run_dir) {
    nlohmann::json j{{"run_id", o.run_id},
                     {"outcome", run_end_word(o)},
                     {"exit_code", o.exit_code},
                     {"restarts", o.restarts},
                     {"max_restarts", o.max_restarts},
                     {"run_dir", run_dir},
                     {"attempts", nlohmann::json::array()},
                     {"failures", nlohmann::json::array()}};
    for (auto& a : o.attempts) {
        const std::string cause = cause_of_attempt(o, a.attempt);
        j["attempts"].push_back({{"attempt", a.attempt},
                                 {"start", format_utc(a.start)},
                                 {"end", a.end > 0 ? nlohmann::json(format_utc(a.end)) : nlohmann::json()},
                                 {"start_epoch", a.start},
                                 {"end_epoch", a.end > 0 ? nlohmann::json(a.end) : nlohmann::json()},
                                 {"duration_s", a.end > 0 ? a.end - a.start : 0.0},
                                 {"logs", run_dir + "/attempt_" + std::to_string(a.attempt)},
                                 {"ended_by", cause.empty() ? nlohmann::json() : nlohmann::json(cause)}});
    }
    if (!o.attempts.empty() && o.attempts.back().end > 0)
        j["duration_s"] = o.attempts.back().end - o.attempts.front().start;
    for (auto& r : o.failures) j["failures"].push_back(failure_record_json(r));
    if (!o.end_cause.empty()) j["end_cause"] = o.end_cause;
    if (o.led_group) j["led_group"] = *o.led_group;
    if (!o.log_errors.empty()) j["log_errors"] = o.log_errors;
    j["left_out"] = left_out_json(o);
    j["running_at_stop"] = nlohmann::json::array();
    for (auto& s : o.running_at_stop)
        j["running_at_stop"].push_back(
            {{"rank", s.rank},
             {"pid", s.pid},
             {"host", s.host},
             {"running_s", s.running_seconds},
             {"where", s.where.empty() ? nlohmann::json() : nlohmann::json(s.where)},
             {"stacks_file", s.stacks_file.empty() ? nlohmann::json() : nlohmann::json(s.stacks_file)}});
    return j;
}

namespace {

// "2 (pid 123, host node1, running 40 s)", with where it was when known.
std::string straggler_text(const Straggler& s) {
    char running[32];
    std::snprintf(running, sizeof running, "%.0f", s.running_seconds);
    return std::to_string(s.rank) + " (pid " + std::to_string(s.pid) + ", host " + s.host + ", running " + running +
           " s" + (s.where.empty() ? "" : (s.where == kNoPythonStack ? ", " : ", at ") + s.where) + ")";
}

}  // namespace

std::vector<std::string> left_out_lines(const RunOutcome& o) {
    std::vector<std::string> out;
    for (const LeftOut& l : o.left_out)
        out.push_back("attempt " + std::to_string(l.attempt) + ": " + l.host + " left out (health check: " + l.why +
                      ")");
    return out;
}

std::string waiting_line(int finished, int total, const std::vector<Straggler>& waiting) {
    std::string out = std::to_string(finished) + " of " + std::to_string(total) + " ranks finished; waiting for " +
                      (waiting.size() == 1 ? "rank " : "ranks ");
    for (size_t i = 0; i < waiting.size() && i < 4; ++i) out += (i ? ", " : "") + straggler_text(waiting[i]);
    if (waiting.size() > 4) out += " and " + std::to_string(waiting.size() - 4) + " more";
    return out;
}

std::string still_running_line(const std::vector<Straggler>& running) {
    std::string out = running.size() == 1 ? "rank still running: " : "ranks still running: ";
    for (size_t i = 0; i < running.size(); ++i) out += (i ? ", " : "") + straggler_text(running[i]);
    return out;
}

double waiting_note_after(int said) {
    double after = 10, total = 10;
    for (int i = 0; i < said; ++i) {
        after = std::min(after * 2, 300.0);
        total += after;
    }
    return total;
}

std::string restarts_line(const RunOutcome& o) {
    if (o.restarts == 0 || o.exit_code != exit_code::kSuccess || o.stop_signal != 0) return "";
    std::string causes;
    for (int a = 0; a < o.restarts; ++a) {
        const std::string cause = cause_of_attempt(o, a);
        if (!cause.empty()) causes += (causes.empty() ? "" : "; ") + ("attempt " + std::to_string(a) + ": " + cause);
    }
    return "succeeded after " + std::to_string(o.restarts) + (o.restarts == 1 ? " restart" : " restarts") +
           (causes.empty() ? "" : " (" + causes + ")");
}

}  // namespace dlaunch
