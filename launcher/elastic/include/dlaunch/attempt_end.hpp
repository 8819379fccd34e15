// The attempt-end engine: what a node (an agent) or a task (the SPANK plugin) does when its part of an
// attempt ended. Pure: the front-end gathers the facts (how its workers ended, the ledger so far, and,
// only when the rules need it, why Slurm ends the job) and carries out the decision it gets back
// (carry_out() in attempt_io.hpp): records, requeue, the final summary, the exit code.
//
// Rules (docs/requeue.md says the same; requeue.hpp has the pieces they are built from):
// - Without --requeue (an agent restarting inside the run): a failed run ends with its summary and
//   failure.json, and, in a multi-node Slurm step, the end of the step on every node.
// - With requeue, a failure is recorded and requeues the job while failed attempts <= --max-restarts;
//   past that the job ends with the summary of every attempt. An attempt the health gate refused on this
//   node is such a failure; its requeue excludes this node. A failure after another node already ended
//   the job is recorded as final too, and ends with that node's code.
// - The warning signal (agent) or checkpoint-exit (task) is a checkpoint: the first node records it and
//   requeues; the budget is not used.
// - Slurm ending the attempt (SIGTERM): the first node asks why (decide_after_sigterm) unless a record of
//   the attempt already says; others only exit.
// - A stop signal otherwise (agent): this node's own failures go on record (one may be the attempt's
//   root cause); a final record of another node gives the exit code; the first node records the stop.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/requeue.hpp"
#include "dlaunch/summary.hpp"

namespace dlaunch {

enum class NodeEnd {
    Succeeded,     // every worker (task) exited 0
    Failed,        // a worker failed and no restart is left inside the run (RunOutcome::failed)
    Checkpointed,  // the warning signal: workers checkpointed (agent); a task exited with checkpoint-exit
    SlurmEnded,    // Slurm ends the attempt: its SIGTERM (agent), the job no longer running (task)
    Stopped,       // any other stop signal (agent)
};

// Which front-end reports: the words of a few messages differ (tests and users rely on them).
enum class Reporter { Agent, Task };

struct AttemptFacts {
    int attempt = 0;        // the attempt that ended (requeue: numbered over the job, requeue.hpp), else 0
    int slurm_restart = 0;  // the batch job's run (SLURM_RESTART_COUNT) that this is
    std::string job_id;     // the Slurm job (requeue)
    std::string host;       // this node
    int node_rank = 0;
    int nnodes = 1;
    int world_size = 1;
    bool first = false;  // node 0 (agent) or rank 0 (task): the one that records for everybody
    double time = 0;     // now, seconds since the epoch
    NodeEnd end = NodeEnd::Succeeded;
    std::string run_id;                     // for the summary (the job id under requeue)
    int exit_code = 0;                      // the agent's outcome code, or the task's
    std::vector<FailureRecord> failures;    // this node's failures in this attempt, root cause flagged
    std::string not_ready;                  // Failed before it started: the health gate's why (RunOutcome::not_ready)
    std::optional<RunOutcome> outcome;      // the agent's whole run (without requeue: its summary)
    std::string checkpoint_detail;          // Checkpointed: what asked for it, for the record
    std::vector<AttemptRecord> ledger;      // every record so far (requeue)
    std::function<JobEnding()> job_ending;  // asked only when a rule needs it (one slurmctld RPC)
};

struct AttemptPolicy {
    bool requeue = false;  // the job's attempts are the restarts (dlaunch --requeue, --dist-launch=requeue)
    int max_restarts = 0;
    Reporter reporter = Reporter::Agent;
    bool multi_node_step = false;  // a Slurm step of several nodes: a final failure ends it on every node
    bool group_member = false;     // an agent of a group (group_run.hpp) but not its leader, which sums up the job
};

struct LogLine {
    enum class Level { Info, Warn, Error } level = Level::Info;
    std::string text;  // without the "dlaunch: " prefix
    bool operator==(const LogLine&) const = default;
};

struct AttemptDecision {
    std::optional<AttemptRecord> record;  // append to the ledger
    std::vector<LogLine> log;             // say these, in order, before anything else is done
    bool show_node_summary = false;       // print this node's failure summary of the attempt
    std::optional<std::string> requeue;   // requeue the job; the reason ("worker failure", ...)
    std::vector<std::string> exclude;     // with requeue: nodes Slurm must not give the job again (lost ones)
    int exit_code = 0;                    // the agent's exit code (a task's is its own)
    // When no requeue happens (none asked, or slurm_requeue failed):
    std::optional<int> exit_code_if_not_requeued;  // this exit code instead
    std::optional<RunOutcome> final_summary;       // the job ends: failure.json and the summary of it all
    bool end_step = false;                         // with final_summary: end the step on every node
    bool summary_on_console = true;                // false: only failure.json (the group's leader prints it all)
    bool operator==(const AttemptDecision&) const = default;
};

AttemptDecision decide_attempt_end(const AttemptFacts& facts, const AttemptPolicy& policy);
// This node's record of the attempt in `facts`; its failures only when it ended Failed.
AttemptRecord attempt_record(const AttemptFacts& facts, AttemptEnd end, std::string detail);

// A task's end under --dist-launch=requeue needs the job's state from slurmctld (to classify it) unless
// it is a success of a rank other than 0: that one has nothing to record whatever the job does, and every
// task of a finishing job ends at once.
bool task_end_needs_job_state(const ExitStatus& exit, int rank);

// How an agent's run ended, from the executor's outcome; how a task's did (classify_task_end).
NodeEnd node_end_of(const RunOutcome& outcome);
// The same for a node of a group under --requeue: an attempt that SIGTERM ended was ended by Slurm, even
// while the group was stopping after a failure; node 0 then asks slurmctld why, as after a checkpoint.
NodeEnd group_node_end_of(const RunOutcome& outcome);
NodeEnd node_end_of(TaskEnd end);

// "rank 3 on node2: exit code 5" for the attempt's root cause among `failures` ("a worker failed" if none).
std::string root_cause_detail(const std::vector<FailureRecord>& failures);

}  // namespace dlaunch
