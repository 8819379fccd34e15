// `dlaunch report RUN_DIR`: a run's record (run.json) as a timeline of its attempts, for people (text)
// and as a picture (SVG): when each attempt ran, what ended it (a failure, a hang, a stop), the waits
// between them, every failure, and the ranks still running at a stop. Pure: JSON in, text out.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/result.hpp"
#include "dlaunch/summary.hpp"

namespace dlaunch {

struct ReportAttempt {
    int attempt = 0;
    double start = 0, end = 0;  // seconds since the epoch (end 0: it had not ended)
    std::string ended_by;       // "rank 1, exit code 7", "" when it succeeded or was stopped
    bool hung = false;          // its root cause was a hang
};

struct RunReport {
    std::string run_id, run_dir, outcome;  // outcome: run.json's ("succeeded", "failed", "stopped by SIGINT")
    int exit_code = 0, restarts = 0, max_restarts = 0;
    std::optional<bool> led_group;  // RunOutcome::led_group (none: not one node of a group)
    std::vector<ReportAttempt> attempts;
    std::vector<std::string> failures;         // "attempt 0: rank 1 (host n1): exit code 7 (root cause)"
    std::vector<std::string> running_at_stop;  // "rank 0 (host n1, at train.py:14 in main: ...)"
    std::string end_cause;                     // what ended the run when no worker's failure did (the health gate)
    std::vector<std::string> left_out;         // "attempt 0: node2 left out (health check: ...)"
};

// "attempt 0: rank 1 (host n1): exit code 7 (root cause)"
std::string report_failure_line(const FailureRecord& failure);

// From run.json (run_record_json). Fails for a file that is not a run record.
Result<RunReport> run_report_from_json(const nlohmann::json& record);
std::string run_report_text(const RunReport& report);

// `dlaunch report --exit-code`: the exit code of the run `reports` (the runs found in the directory
// `where`) stand for: the only run's, else that of the one run that led its group when the group decided
// the end (a group job's records, one per node). Fails when there is no such run, or several.
Result<int> run_exit_code(const std::vector<RunReport>& reports, const std::string& where);
std::string run_report_svg(const RunReport& report);

}  // namespace dlaunch
