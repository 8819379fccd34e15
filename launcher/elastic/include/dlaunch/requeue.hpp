// Requeue: a Slurm batch job's attempts as elastic restarts (dlaunch --requeue). Pure: the attempt
// ledger's records, what to do when an attempt ends, and the texts; the agent reads and appends the
// ledger file and calls libslurm.
//
// Rules (the one place for them; README "Requeue" and docs/requeue.md say the same):
// - An attempt is one run of the workers. Every rank of an attempt sees its number as
//   TORCHELASTIC_RESTART_COUNT and DLAUNCH_RESTART_COUNT, and the job id as TORCHELASTIC_RUN_ID, whatever
//   restarted or requeued the job. Attempts are numbered over the job: a run of the batch job (Slurm's
//   restart count, SLURM_RESTART_COUNT, absent = 0) starts with the attempt after every attempt the ledger
//   holds from earlier runs (first_attempt_of_run), so a group's restarts inside one run (group_run.hpp)
//   and the requeues between runs count on from each other. Without in-job restarts that is Slurm's count.
// - The budget, --max-restarts, counts attempts that ended in a worker failure, job-wide: the ledger
//   (attempts.jsonl in the job's log directory) survives requeue. A failure with budget left requeues the
//   job (a group of nodes restarts inside the allocation instead, and requeues only when fewer than MIN
//   nodes are left: group.hpp); with none left the job ends with the failure summary of every attempt and
//   the exit code of the last attempt's root cause.
// - The warning signal (Slurm's --signal=SIG@SECONDS reaches every task, so every agent) sends the
//   checkpoint signal to every worker, waits until they exit or the checkpoint grace ends (never past
//   the job's end), then requeues. That does not use the budget.
// - SIGTERM is Slurm ending the attempt. The workers get the checkpoint signal and the ending grace
//   (--checkpoint-grace, never past Slurm's KillWait, less a margin); then node 0 asks slurmctld why the
//   job ends (decide_after_sigterm): requeued by Slurm (scontrol requeue, PreemptMode=REQUEUE, node
//   failure) -> nothing to do; preempted to be cancelled, or its node failed -> dlaunch requeues it;
//   cancelled (scancel), timed out, or still running (a SIGTERM from elsewhere) -> the job ends, not
//   requeued. None of these uses the budget.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/scheduler.hpp"
#include "dlaunch/summary.hpp"

namespace dlaunch {

enum class AttemptEnd {
    Failed,        // a worker failed
    Checkpointed,  // the warning signal came: workers checkpointed (or the grace ran out)
    Stopped,       // a stop signal (Slurm ended the attempt)
};

struct AttemptRecord {
    int attempt = 0;
    AttemptEnd end = AttemptEnd::Failed;
    std::string detail;  // "rank 3 exited with exit code 5", "SIGUSR1 (Slurm's warning)", ...
    std::string host;    // the node that wrote the record
    int node_rank = 0;
    int nnodes = 1;
    int world_size = 1;
    double time = 0;                      // seconds since the epoch
    int slurm_restart = 0;                // the run of the batch job that wrote it (its SLURM_RESTART_COUNT)
    int exit_code = 0;                    // the attempt's root cause's code (Failed), else the agent's
    bool final = false;                   // no requeue follows: the job ends with exit_code (agents stopped by the
                                          // end of the step exit with it too, so srun and the job report it)
    bool restarted = false;               // the group restarted inside the allocation after it: attempt+1 began
    std::vector<FailureRecord> failures;  // this node's failures in that attempt (Failed)
    bool operator==(const AttemptRecord&) const = default;
};

nlohmann::json attempt_to_json(const AttemptRecord& r);
std::optional<AttemptRecord> attempt_from_json(const nlohmann::json& j);  // nullopt: not a record
// One record per line; lines that are not records (a torn write) are skipped and counted.
std::vector<AttemptRecord> parse_ledger(const std::string& text, int* skipped = nullptr);

// The first attempt of run `slurm_restart` of the batch job: the one after every attempt that earlier runs
// recorded (after one the group restarted from inside the allocation, the one after the next: that one
// began, even if its end was never recorded), and never below Slurm's count (a run that ended before anybody
// recorded still counts). Records of this run itself are not looked at: a fast node may write one before a
// slow one starts.
int first_attempt_of_run(int slurm_restart, const std::vector<AttemptRecord>& ledger);
// Attempts that ended in a failure (each attempt counted once, however many nodes recorded it).
int failed_attempts(const std::vector<AttemptRecord>& ledger);

struct RequeueDecision {
    bool requeue = false;
    int failures_used = 0;  // failed attempts including this one
    std::string message;    // one line for the log
};

// After attempt `attempt` failed on this node: requeue while failed attempts ≤ max_restarts.
// `ledger` already holds this node's record of the attempt.
RequeueDecision decide_after_failure(const std::vector<AttemptRecord>& ledger, int attempt, int max_restarts);

// The failure summary of every attempt in the ledger, as one RunOutcome (the last failed attempt's root
// cause gives the exit code).
RunOutcome outcome_of_all_attempts(const std::vector<AttemptRecord>& ledger, const std::string& run_id,
                                   int max_restarts);

struct StopDecision {
    AttemptEnd end = AttemptEnd::Stopped;  // Checkpointed: the job comes back; Stopped: it ends
    bool requeue = false;                  // dlaunch calls slurm_requeue
    std::string detail;                    // for the ledger and the log
};

StopDecision decide_after_sigterm(JobEnding ending);

// How long the workers get after Slurm's SIGTERM: the checkpoint grace, but never past Slurm's KillWait
// (after which it sends SIGKILL), less a margin for the agent's own end. `kill_wait`: nullopt when
// unknown (then Slurm's default, 30 s, is assumed).
double ending_wait(double grace_seconds, std::optional<double> kill_wait);

// srun --dist-launch=requeue (no agent: the SPANK plugin in slurmstepd sees each task's end). While the
// job runs, a task exiting with checkpoint-exit has checkpointed (the job is requeued, the budget is not
// used), any other non-zero end is a failure (requeued within max-restarts, as for the agent); once Slurm
// ends the job, rank 0's end asks decide_after_sigterm. A checkpoint-exit while the job is being requeued
// is still a checkpoint (another task's requeue reached slurmctld first). Pure.
enum class TaskEnd { Finished, Failed, Checkpointed, SlurmEnded };
TaskEnd classify_task_end(const ExitStatus& status, JobEnding ending, std::optional<int> checkpoint_exit);

// "dlaunch: job 812: attempt 2 (requeued 1 time; 1 of 3 failed attempts used): 2 nodes, world size 8"
std::string attempt_banner(const std::string& run_id, int attempt, int requeues, int failures_used, int max_restarts,
                           int nnodes, int world_size);

// How long to wait for the workers' checkpoint: the configured grace, but never past the job's end
// (minus a margin for the requeue itself). `seconds_left`: until the job's end time, when known.
double checkpoint_wait(double grace_seconds, std::optional<double> seconds_left);

}  // namespace dlaunch
