// The attempt-end engine at the edge: the job's directory and attempt ledger on the shared file system,
// failure.json, and the decisions of attempt_end.hpp carried out (through libslurm for requeue and the
// end of a step). The one place that writes the ledger and failure.json.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "dlaunch/attempt_end.hpp"
#include "dlaunch/job_context.hpp"
#include "dlaunch/request.hpp"
#include "dlaunch/requeue.hpp"
#include "dlaunch/result.hpp"

namespace dlaunch {

struct RequeueJob {
    std::string job_id;
    int attempt = 0;        // the run's first attempt (first_attempt_of_run)
    int slurm_restart = 0;  // SLURM_RESTART_COUNT (absent on the first run: 0): requeues so far
    std::string job_dir;    // LOG_DIR/JOB_ID: rank logs and the ledger, shared by every node and attempt
    std::string ledger;     // job_dir/attempts.jsonl
};

// Checks that this is a Slurm batch job and makes its directory: --log-dir, else
// $SLURM_SUBMIT_DIR/dlaunch-logs. A usage Error otherwise (nothing started).
Result<RequeueJob> prepare_requeue(const LaunchRequest& req, const EnvMap& env);

// Creates the ledger file if missing (the plugin does it as the job's user; task ends append as root).
Status create_ledger(const RequeueJob& job);

// Every record so far (an absent ledger is empty); a torn line is skipped with a warning.
std::vector<AttemptRecord> read_ledger(const RequeueJob& job);

// Appends one line (one write, O_APPEND: nodes appending at once do not interleave) and syncs it.
Status append_ledger(const RequeueJob& job, const AttemptRecord& record);

// Writes `outcome` as JSON to DIR/failure.json (given to `owner` when set: the plugin runs as root) and
// returns the path; an Error when it cannot be written.
struct Owner {
    uid_t uid;
    gid_t gid;
};
// <dir>/run.json: the record of a run, whatever its end (run_record_json); returns its path.
Result<std::string> write_run_json(const std::string& dir, const RunOutcome& outcome);

Result<std::string> write_failure_json(const std::string& dir, const RunOutcome& outcome,
                                       std::optional<Owner> owner = std::nullopt);

// The agent's own TORCHELASTIC_ERROR_FILE (in `env`; nothing when unset), as torchrun writes it for a
// scheduler that wraps the launcher (torch_error_file.hpp): the root cause's error file after workers failed
// (nothing when that worker wrote none), or `message` when the launcher itself failed or was stopped.
void record_worker_failure_for_launcher(const EnvMap& env, const RunOutcome& outcome);
void record_launcher_error(const EnvMap& env, const std::string& message);

// Where carry_out() speaks: the agent's console, or the plugin's slurm_error().
class AttemptReport {
public:
    virtual ~AttemptReport() = default;
    virtual void log(const LogLine& line) = 0;
    // This node's failure summary of the attempt (agent).
    virtual void node_summary(const RunOutcome& outcome) = 0;
    // The job ends: the summary of `all` (every attempt under requeue), written to `json_path` ("" when it
    // could not be written: the error was logged).
    virtual void final_summary(const RunOutcome& all, const std::string& json_path, bool every_attempt) = 0;
};

// Where the decision's effects go.
struct AttemptPlace {
    std::optional<RequeueJob> job;     // requeue: the ledger and the Slurm job to requeue
    std::string records_dir;           // failure.json's directory
    std::optional<Owner> owner;        // failure.json's owner
    std::string step_job_id, step_id;  // end_step: the Slurm step to end on every node
};

// Carries out `d` in this order: the record, this node's summary, the log lines, the requeue; when no
// requeue happened, the final summary (failure.json) and the end of the step. Returns the exit code.
int carry_out(const AttemptDecision& d, const AttemptFacts& facts, const AttemptPlace& place, AttemptReport& report);

}  // namespace dlaunch
