#include "dlaunch/run_report.hpp"

#include <algorithm>
#include <sstream>

#include "dlaunch/summary.hpp"
#include "dlaunch/svg_canvas.hpp"
#include "dlaunch/text.hpp"

namespace dlaunch {
namespace {

ReportAttempt attempt_of(const nlohmann::json& a) {
    ReportAttempt r;
    r.attempt = a.at("attempt").get<int>();
    r.start = a.at("start_epoch").get<double>();
    r.end = a.at("end_epoch").is_null() ? 0 : a.at("end_epoch").get<double>();
    r.ended_by = a.at("ended_by").is_null() ? "" : a.at("ended_by").get<std::string>();
    return r;
}

}  // namespace

std::string report_failure_line(const FailureRecord& f) {
    return "attempt " + std::to_string(f.failure.attempt) + ": rank " + std::to_string(f.rank) +
           (f.host.empty() ? "" : " (host " + f.host + ")") + ": " + f.failure.describe() +
           (f.failure.root_cause      ? " (root cause)"
            : f.failure.stopped_by_us ? " (while dlaunch was stopping the group)"
                                      : "");
}

namespace {

std::string straggler_line(const nlohmann::json& s) {
    const std::string where = s.value("where", nlohmann::json()).is_null() ? "" : s.at("where").get<std::string>();
    return "rank " + std::to_string(s.at("rank").get<int>()) + " (host " + s.at("host").get<std::string>() +
           (where.empty() ? "" : ", " + where) + ")";
}

}  // namespace

Result<RunReport> run_report_from_json(const nlohmann::json& j) {
    try {
        RunReport r;
        r.run_id = j.at("run_id").get<std::string>();
        r.run_dir = j.at("run_dir").get<std::string>();
        r.outcome = j.at("outcome").get<std::string>();
        r.exit_code = j.at("exit_code").get<int>();
        if (j.contains("led_group")) r.led_group = j.at("led_group").get<bool>();
        r.restarts = j.at("restarts").get<int>();
        r.max_restarts = j.at("max_restarts").get<int>();
        for (const auto& a : j.at("attempts")) r.attempts.push_back(attempt_of(a));
        for (const auto& f : j.at("failures")) {
            auto record = failure_record_from_json(f);
            if (!record) return Error{"report: a failure in the run record is malformed", ""};
            r.failures.push_back(report_failure_line(*record));
            if (record->failure.root_cause && record->failure.hung_after)
                for (ReportAttempt& a : r.attempts)
                    if (a.attempt == record->failure.attempt) a.hung = true;
        }
        for (const auto& s : j.value("running_at_stop", nlohmann::json::array()))
            r.running_at_stop.push_back(straggler_line(s));
        r.end_cause = j.value("end_cause", "");
        RunOutcome gate;  // the health gate's, for the one wording of its lines (left_out_lines)
        for (const auto& l : j.value("left_out", nlohmann::json::array()))
            gate.left_out.push_back(
                {l.at("attempt").get<int>(), l.at("host").get<std::string>(), l.at("why").get<std::string>()});
        r.left_out = left_out_lines(gate);
        return r;
    } catch (const nlohmann::json::exception& e) {
        return Error{std::string("report: not a dlaunch run record (run.json): ") + e.what(),
                     "give a run directory that this dlaunch version wrote (older records lack start_epoch)"};
    }
}

std::string run_report_text(const RunReport& r) {
    std::ostringstream out;
    out << "run " << r.run_id << " (" << r.run_dir << "): " << r.outcome << ", exit code " << r.exit_code << ", "
        << r.restarts << " of " << r.max_restarts << " restarts\n";
    const double t0 = r.attempts.empty() ? 0 : r.attempts.front().start;
    double last_end = t0;
    for (const ReportAttempt& a : r.attempts) {
        if (a.start - last_end >= 0.05 && a.attempt > 0)
            out << "  waited " << fixed(a.start - last_end, 1) << " s before attempt " << a.attempt << "\n";
        out << "  attempt " << a.attempt << "  " << format_utc(a.start) << "  +" << fixed(a.start - t0, 1) << " s  ";
        out << (a.end > 0 ? "ran " + fixed(a.end - a.start, 1) + " s" : "did not end");
        out << (a.ended_by.empty() ? "" : (a.hung ? "  hung: " : "  ended by ") + a.ended_by) << "\n";
        if (a.end > 0) last_end = a.end;
    }
    if (!r.end_cause.empty()) out << "ended by " << r.end_cause << "\n";
    if (!r.left_out.empty()) out << "left out by the health gate:\n";
    for (const std::string& l : r.left_out) out << "  " << l << "\n";
    if (!r.failures.empty()) out << "failures:\n";
    for (const std::string& f : r.failures) out << "  " << f << "\n";
    if (!r.running_at_stop.empty()) out << "running at the stop:\n";
    for (const std::string& s : r.running_at_stop) out << "  " << s << "\n";
    return out.str();
}

std::string run_report_svg(const RunReport& r) {
    constexpr int kWidth = 960, kLeft = 110, kRight = 20, kRow = 46;
    const double t0 = r.attempts.empty() ? 0 : r.attempts.front().start;
    double t1 = t0;
    for (const ReportAttempt& a : r.attempts) t1 = std::max(t1, a.end > 0 ? a.end : a.start);
    const double span = std::max(t1 - t0, 0.001);
    auto x = [&](double t) { return kLeft + static_cast<int>((t - t0) / span * (kWidth - kLeft - kRight)); };
    const std::string title = "dlaunch run " + r.run_id + ": " + r.outcome + ", exit code " +
                              std::to_string(r.exit_code) + ", " + std::to_string(r.restarts) + " restart(s), " +
                              fixed(t1 - t0, 1) + " s";
    SvgCanvas c(kWidth);
    c.text(10, 24, title, 14);
    int y = 50;
    for (const ReportAttempt& a : r.attempts) {
        const bool last = &a == &r.attempts.back();
        const char* fill = a.hung                             ? "#f28e2b"
                           : !a.ended_by.empty()              ? "#e15759"
                           : last && r.outcome == "succeeded" ? "#59a14f"
                                                              : "#bab0ac";
        const int x0 = x(a.start), x1 = std::max(x0 + 2, x(a.end > 0 ? a.end : t1));
        c.text(10, y + 15, "attempt " + std::to_string(a.attempt));
        c.rect(x0, y, x1 - x0, 20, fill, "class=\"attempt\" data-attempt=\"" + std::to_string(a.attempt) + "\"");
        c.text(x0 + 4, y + 34,
               (a.end > 0 ? fixed(a.end - a.start, 1) + " s" : "did not end") +
                   (a.ended_by.empty() ? "" : (a.hung ? "; hung: " : "; ended by ") + a.ended_by),
               11);
        y += kRow;
    }
    std::vector<std::string> notes = r.left_out;
    if (!r.end_cause.empty()) notes.push_back("ended by " + r.end_cause);
    for (const std::string& line : notes) {
        c.text(10, y + 4, line, 11);
        y += 18;
    }
    return c.done(y + 10, title);
}

Result<int> run_exit_code(const std::vector<RunReport>& reports, const std::string& where) {
    if (reports.size() == 1 && reports.front().led_group != false) return reports.front().exit_code;
    std::vector<const RunReport*> leaders;
    for (const RunReport& r : reports)
        if (r.led_group == true) leaders.push_back(&r);
    if (leaders.size() == 1) return leaders.front()->exit_code;
    if (reports.size() == 1)
        return Error{"report: the only run in " + where + " was a member of a group, not its leader",
                     "give the group's --log-dir on a file system every node sees (its leader's run.json is there)"};
    const std::string runs = std::to_string(reports.size()) + " runs in " + where;
    if (leaders.empty())
        return Error{"report: none of the " + runs +
                         " led its group when the group ended (the leader's run.json "
                         "says so; a leader killed before the end writes none)",
                     "give one run's directory to read its exit code"};
    return Error{"report: " + std::to_string(leaders.size()) + " of the " + runs +
                     " led a group at its end: the directory holds several jobs",
                 "give each job its own --log-dir (examples/sbatch/group.sbatch: dlaunch-logs-$SLURM_JOB_ID)"};
}

}  // namespace dlaunch
