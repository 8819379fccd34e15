#include "dlaunch/attempt_end.hpp"

#include <algorithm>
#include <csignal>

#include "dlaunch/exit_codes.hpp"

namespace dlaunch {
namespace {

using Level = LogLine::Level;

AttemptDecision exit_only(int code) {
    AttemptDecision d;
    d.exit_code = code;
    return d;
}

}  // namespace

AttemptRecord attempt_record(const AttemptFacts& f, AttemptEnd end, std::string detail) {
    return AttemptRecord{.attempt = f.attempt,
                         .end = end,
                         .detail = std::move(detail),
                         .host = f.host,
                         .node_rank = f.node_rank,
                         .nnodes = f.nnodes,
                         .world_size = f.world_size,
                         .time = f.time,
                         .slurm_restart = f.slurm_restart,
                         .exit_code = f.exit_code,
                         .final = false,
                         .failures = end == AttemptEnd::Failed ? f.failures : std::vector<FailureRecord>{}};
}

namespace {

// The first record of this attempt in the ledger, if any node (or task) wrote one.
const AttemptRecord* first_record_of_attempt(const AttemptFacts& f) {
    for (auto& r : f.ledger)
        if (r.attempt == f.attempt) return &r;
    return nullptr;
}

const AttemptRecord* final_record_of_attempt(const AttemptFacts& f) {
    for (auto& r : f.ledger)
        if (r.attempt == f.attempt && r.end == AttemptEnd::Failed && r.final) return &r;
    return nullptr;
}

// Without requeue: the run's own restarts are spent; a failure ends it here.
AttemptDecision local_end(const AttemptFacts& f, const AttemptPolicy& p) {
    AttemptDecision d;
    d.exit_code = f.exit_code;
    if (f.end == NodeEnd::Succeeded && f.outcome)
        if (const std::string line = restarts_line(*f.outcome); !line.empty()) d.log.push_back({Level::Info, line});
    if (f.end != NodeEnd::Failed || !f.outcome) return d;
    d.final_summary = *f.outcome;
    d.end_step = p.multi_node_step;
    d.summary_on_console = !p.group_member;
    return d;
}

AttemptDecision slurm_ended(const AttemptFacts& f, const AttemptPolicy& p) {
    AttemptDecision d;
    d.exit_code = f.exit_code;
    if (const AttemptRecord* r = first_record_of_attempt(f)) {
        // A failure or a checkpoint ended the attempt and is on record; a final failure's code is the job's.
        if (p.reporter == Reporter::Agent && r->end == AttemptEnd::Failed && r->final) d.exit_code = r->exit_code;
        return d;
    }
    if (!f.first) {
        if (p.reporter == Reporter::Agent)
            d.log.push_back({Level::Info, "checkpoint: this node's workers are done; node 0 records why the job ends"});
        return d;
    }
    StopDecision stop = decide_after_sigterm(f.job_ending ? f.job_ending() : JobEnding::Unknown);
    d.record = attempt_record(f, stop.end, stop.detail);
    if (p.reporter == Reporter::Agent)
        d.log.push_back({stop.end == AttemptEnd::Checkpointed ? Level::Warn : Level::Error, "requeue: " + stop.detail});
    if (stop.requeue) d.requeue = "Slurm ended the attempt";
    return d;
}

AttemptDecision checkpointed(const AttemptFacts& f, const AttemptPolicy& p) {
    AttemptDecision d;
    const bool agent = p.reporter == Reporter::Agent;
    d.exit_code = agent ? exit_code::kSuccess : f.exit_code;
    if (!f.first && agent) {
        d.log.push_back({Level::Info, "checkpoint: this node's workers are done; node 0 requeues the job"});
        return d;
    }
    if (f.first) d.record = attempt_record(f, AttemptEnd::Checkpointed, f.checkpoint_detail);
    // Every checkpointed task asks (the first to arrive requeues); of the agents, node 0 does.
    d.requeue = agent ? "checkpoint after the warning signal" : "checkpoint";
    if (agent) d.exit_code_if_not_requeued = exit_code::kLaunchFailure;
    return d;
}

AttemptDecision failed(const AttemptFacts& f, const AttemptPolicy& p, const std::string& run_id) {
    AttemptDecision d;
    d.exit_code = f.exit_code;
    AttemptRecord mine =
        attempt_record(f, AttemptEnd::Failed, f.not_ready.empty() ? root_cause_detail(f.failures) : f.not_ready);
    if (const AttemptRecord* ended = final_record_of_attempt(f)) {
        // Another node (task) ended the job already and said so: this failure goes on record with it.
        mine.final = true;
        d.record = mine;
        d.exit_code = ended->exit_code;
        return d;
    }
    std::vector<AttemptRecord> ledger = f.ledger;
    ledger.push_back(mine);
    RequeueDecision budget = decide_after_failure(ledger, f.attempt, p.max_restarts);
    mine.final = !budget.requeue;
    d.record = mine;
    d.show_node_summary = p.reporter == Reporter::Agent;
    d.log.push_back({Level::Warn, mine.detail + ": " + budget.message});
    if (budget.requeue) d.requeue = p.reporter == Reporter::Agent ? "worker failure" : "task failure";
    if (budget.requeue && !f.not_ready.empty()) {
        d.requeue = "this node failed the health check";
        d.exclude = {f.host};
    }
    RunOutcome all = outcome_of_all_attempts(ledger, run_id, p.max_restarts);
    const int job_code = all.exit_code != 0 ? all.exit_code : f.exit_code;  // the last root cause's
    if (budget.requeue)
        d.exit_code_if_not_requeued = job_code;
    else
        d.exit_code = job_code;
    d.final_summary = std::move(all);
    d.end_step = p.multi_node_step;
    return d;
}

AttemptDecision stopped(const AttemptFacts& f) {
    AttemptDecision d;
    d.exit_code = f.exit_code;
    bool known = false;  // a record says why this attempt ends (this node's failure, another's)
    if (std::any_of(f.failures.begin(), f.failures.end(), [](auto& r) { return r.failure.root_cause; })) {
        // This node's worker failed too, but another node's requeue (or final failure) stopped it first:
        // its failure still goes on record, it may be the attempt's earliest (the root cause).
        d.record = attempt_record(f, AttemptEnd::Failed, root_cause_detail(f.failures));
        known = true;
    }
    for (auto& r : f.ledger) {
        if (r.attempt != f.attempt) continue;
        known = true;
        if (r.end == AttemptEnd::Failed && r.final) {
            d.log.push_back({Level::Info, "stop: node " + std::to_string(r.node_rank) + " (" + r.host +
                                              ") ended the job: " + r.detail});
            d.exit_code = r.exit_code;
            return d;
        }
    }
    if (f.first && !known)
        d.record = attempt_record(f, AttemptEnd::Stopped,
                                  "stopped by a signal (exit code " + std::to_string(f.exit_code) + ")");
    return d;
}

}  // namespace

bool task_end_needs_job_state(const ExitStatus& exit, int rank) {
    return !exit.success() || rank == 0;
}

NodeEnd node_end_of(const RunOutcome& outcome) {
    if (outcome.checkpointed) return outcome.stop_signal == SIGTERM ? NodeEnd::SlurmEnded : NodeEnd::Checkpointed;
    if (outcome.failed) return NodeEnd::Failed;
    return outcome.exit_code == exit_code::kSuccess ? NodeEnd::Succeeded : NodeEnd::Stopped;
}

NodeEnd group_node_end_of(const RunOutcome& outcome) {
    return outcome.stop_signal == SIGTERM ? NodeEnd::SlurmEnded : node_end_of(outcome);
}

NodeEnd node_end_of(TaskEnd end) {
    switch (end) {
        case TaskEnd::Finished: return NodeEnd::Succeeded;
        case TaskEnd::Failed: return NodeEnd::Failed;
        case TaskEnd::Checkpointed: return NodeEnd::Checkpointed;
        case TaskEnd::SlurmEnded: return NodeEnd::SlurmEnded;
    }
    return NodeEnd::Failed;
}

std::string root_cause_detail(const std::vector<FailureRecord>& failures) {
    auto root =
        std::find_if(failures.begin(), failures.end(), [](const FailureRecord& r) { return r.failure.root_cause; });
    if (root == failures.end()) return "a worker failed";
    return "rank " + std::to_string(root->rank) + " on " + root->host + ": " + root->failure.describe();
}

AttemptDecision decide_attempt_end(const AttemptFacts& f, const AttemptPolicy& p) {
    if (!p.requeue) return local_end(f, p);
    switch (f.end) {
        case NodeEnd::Succeeded: return exit_only(f.exit_code);
        case NodeEnd::SlurmEnded: return slurm_ended(f, p);
        case NodeEnd::Checkpointed: return checkpointed(f, p);
        case NodeEnd::Failed: return failed(f, p, f.run_id);
        case NodeEnd::Stopped: return stopped(f);
    }
    return exit_only(f.exit_code);
}

}  // namespace dlaunch
