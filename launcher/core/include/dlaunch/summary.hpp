// The failure summary: printed once when a run ends in failure, and written as JSON into the run
// directory. Built from plain records so it can be tested without processes.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/failure_policy.hpp"

namespace dlaunch {

struct FailureRecord {
    Failure failure;
    int rank = 0;
    int node_rank = 0;
    std::string role;       // parameter-server mode: "server", "trainer", "heter_worker" (rank is its index)
    std::string role_name;  // the worker's role (ROLE_NAME: --role, "default"; in PS mode its PS role)
    std::string host;
    std::string stderr_log;                    // "" when not kept
    std::vector<std::string> stderr_tail;      // last lines of the worker's stderr
    std::optional<std::string> error_message;  // from TORCHELASTIC_ERROR_FILE, when the worker wrote one
    std::optional<std::string> traceback;      // the Python traceback in that file
    std::string error_file;                    // that file, when the worker wrote it ("" else)
    // A hang (failure.hung_after): where every rank's stacks went, the likeliest culprit and the evidence.
    std::string stacks_files;
    std::string culprit;  // "rank 2 (host node1)": the other ranks wait in a collective for it
    std::vector<std::string> hang_evidence;
    std::vector<std::string> notes;  // what dlaunch did to this rank (torchrun's watchdog expired, ...)
    bool operator==(const FailureRecord&) const = default;
};

// A rank still running (while others of its attempt have finished, or when a stop came).
// A rank that listens to the stack signal but did not answer it in time (busy in native code).
inline constexpr const char* kNoPythonStack = "no Python stack: it did not answer within 1 s (in native code?)";

struct Straggler {
    int rank = 0;
    int pid = 0;
    std::string host;
    double running_seconds = 0;
    std::string where;        // at a stop: where its Python thread was ("train.py:14 in main: ..."), "" unknown,
                              // or kNoPythonStack
    std::string stacks_file;  // at a stop: the file its stacks went to ("" when not taken)
    bool operator==(const Straggler&) const = default;
};
// When one attempt of the worker group ran (seconds since the epoch; end 0 while it runs).
struct AttemptSpan {
    int attempt = 0;
    double start = 0;
    double end = 0;
    bool operator==(const AttemptSpan&) const = default;
};

// A node the health gate (health.hpp) left out of an attempt (which ran without it, or did not start at all).
struct LeftOut {
    int attempt = 0;
    std::string host;
    std::string why;  // "gpus: GPU 1 ...: 3 uncorrected ECC errors", "site check `...`: exit code 1: ..."
    bool operator==(const LeftOut&) const = default;
};

struct RunOutcome {
    std::string run_id;
    int exit_code = 0;
    bool failed = false;            // ended because workers failed with no restart left (not by a signal, not success)
    bool checkpointed = false;      // the workers were asked to checkpoint (--requeue: the warning signal, or
                                    // Slurm's SIGTERM: then stop_signal is SIGTERM)
    int stop_signal = 0;            // the stop signal that ended the run, 0 if none
    bool stopped_by_group = false;  // the group ended the attempt (another node failed or was lost)
    // In a group whose end was decided: whether this agent led it then (the leader, or a lost leader's
    // successor): its exit code is the group's, whatever srun says of a node that failed. None: no group.
    std::optional<bool> led_group;
    int restarts = 0;  // restarts done
    int max_restarts = 0;
    std::vector<FailureRecord> failures;  // all attempts, in time order; root causes flagged
    // The last attempt failed with no worker failing in it (a node lost): what ended it, which then is the
    // run's root cause ("attempt 1: node2 lost: no heartbeat for 10 s"); "" otherwise.
    std::string end_cause;
    // The health gate refused the attempt before it started: why ("node1 failed the health check (gpus: ...)";
    // end_cause says it with the attempt). The exit code is exit_code::kNotReady.
    std::string not_ready;
    std::vector<LeftOut> left_out;  // nodes the group's health gate left out, attempt by attempt
    // How the last worker to end ended (a watched rank's own status, to mirror: rank_watch.hpp).
    std::optional<ExitStatus> last_exit;
    std::vector<AttemptSpan> attempts;       // this node's attempts, in order
    std::vector<Straggler> running_at_stop;  // stopped by a signal: the ranks that still ran
    // Worker logs that could not be written in full (a full or failing log directory), one line each:
    // "rank 0: /logs/run/attempt_0/0/stdout.log: No space left on device".
    std::vector<std::string> log_errors;
    bool operator==(const RunOutcome&) const = default;
};

// Reads a torchelastic error file ({"message": {"message": ..., "extraInfo": {"py_callstack": ...}}},
// or any other JSON/text). Returns {message, traceback}; empty optionals when there is nothing usable.
std::pair<std::optional<std::string>, std::optional<std::string>> parse_error_file(const std::string& content);

// Human text, several lines, ending in '\n'. Empty unless the run failed (a run that failed, restarted
// and then succeeded did not fail).
std::string render_failure_summary(const RunOutcome& outcome);

nlohmann::json failure_summary_json(const RunOutcome& outcome);

// How the run ended, in a word or two: "succeeded", "failed", "hung", "stopped by SIGINT",
// "checkpointed", "ended by the group", "not ready" (the health gate refused an attempt).
std::string run_end_word(const RunOutcome& outcome);

// The record of every run (run.json in the run directory, success or not): how it ended, its exit code,
// each attempt with its start, end, duration and the root cause that ended it, every failure.
nlohmann::json run_record_json(const RunOutcome& outcome, const std::string& run_dir);

// The run's exit code once its logs are judged: exit_code::kLogFailure when it would be 0 but a worker's log
// was cut (outcome.log_errors) and the user did not ask to ignore that (--ignore-log-errors); else `code`.
int exit_code_after_logs(int code, const RunOutcome& outcome, bool ignore_log_errors);

// "3 of 4 ranks finished; waiting for rank 2 (pid 123, host node1, running 40 s)" (at most 4 ranks named).
std::string waiting_line(int finished, int total, const std::vector<Straggler>& waiting);
// "ranks still running: 0 (pid 123, host node1, running 40 s, at train.py:14 in main: ...), 1 (...)"
std::string still_running_line(const std::vector<Straggler>& running);
// When to say it again: seconds after the first rank finished, for the n-th time (0, 1, ...): 10 s, then
// doubling, at most every 5 minutes.
double waiting_note_after(int said);

// "attempt 0: node2 left out (health check: gpus: ...)", one line per node left out (true whether
// the attempt then ran or, too few nodes passing, never started).
std::vector<std::string> left_out_lines(const RunOutcome& outcome);

// "succeeded after 2 restarts (attempt 0: rank 1, exit code 1; attempt 1: rank 0, signal SIGSEGV (11))";
// "" for a run without restarts or that did not succeed.
std::string restarts_line(const RunOutcome& outcome);

// One failure as in failure_summary_json's "failures", and back (nullopt when fields are missing).
nlohmann::json failure_record_json(const FailureRecord& record);
std::optional<FailureRecord> failure_record_from_json(const nlohmann::json& j);

// "2026-11-21T12:00:01.250Z"
std::string format_utc(double epoch_seconds);

}  // namespace dlaunch
