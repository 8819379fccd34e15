// dlaunch --requeue at the edge: the job's directory and attempt ledger on the shared file system, and
// the decisions of requeue.hpp carried out through libslurm.
#pragma once

#include <string>
#include <vector>

#include "dlaunch/job_context.hpp"
#include "dlaunch/request.hpp"
#include "dlaunch/requeue.hpp"
#include "dlaunch/result.hpp"

namespace dlaunch {

struct RequeueJob {
    std::string job_id;
    int attempt = 0;      // SLURM_RESTART_COUNT (absent on the first run: 0)
    std::string job_dir;  // LOG_DIR/JOB_ID: rank logs and the ledger, shared by every node and attempt
    std::string ledger;   // job_dir/attempts.jsonl
};

// Checks that this is a Slurm batch job and makes its directory: --log-dir, else
// $SLURM_SUBMIT_DIR/dlaunch-logs. A usage Error otherwise (nothing started).
Result<RequeueJob> prepare_requeue(const LaunchRequest& req, const EnvMap& env);

// Every record so far (an absent ledger is empty); a torn line is skipped with a warning.
std::vector<AttemptRecord> read_ledger(const RequeueJob& job);

// Appends one line (one write, O_APPEND: nodes appending at once do not interleave) and syncs it.
Status append_ledger(const RequeueJob& job, const AttemptRecord& record);

}  // namespace dlaunch
