#include "dlaunch/requeue.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace dlaunch {
namespace {

const char* end_name(AttemptEnd e) {
    switch (e) {
        case AttemptEnd::Failed: return "failed";
        case AttemptEnd::Checkpointed: return "checkpointed";
        case AttemptEnd::Stopped: return "stopped";
    }
    return "failed";
}

std::optional<AttemptEnd> end_from_name(const std::string& s) {
    for (AttemptEnd e : {AttemptEnd::Failed, AttemptEnd::Checkpointed, AttemptEnd::Stopped})
        if (s == end_name(e)) return e;
    return std::nullopt;
}

}  // namespace

nlohmann::json attempt_to_json(const AttemptRecord& r) {
    nlohmann::json failures = nlohmann::json::array();
    for (auto& f : r.failures) failures.push_back(failure_record_json(f));
    return {{"attempt", r.attempt},       {"end", end_name(r.end)},
            {"detail", r.detail},         {"host", r.host},
            {"node_rank", r.node_rank},   {"nnodes", r.nnodes},
            {"world_size", r.world_size}, {"slurm_restart", r.slurm_restart},
            {"time", format_utc(r.time)}, {"epoch", r.time},
            {"exit_code", r.exit_code},   {"final", r.final},
            {"restarted", r.restarted},   {"failures", failures}};
}

std::optional<AttemptRecord> attempt_from_json(const nlohmann::json& j) {
    try {
        AttemptRecord r;
        r.attempt = j.at("attempt").get<int>();
        auto end = end_from_name(j.at("end").get<std::string>());
        if (!end) return std::nullopt;
        r.end = *end;
        r.detail = j.at("detail").get<std::string>();
        r.host = j.at("host").get<std::string>();
        r.node_rank = j.at("node_rank").get<int>();
        r.nnodes = j.at("nnodes").get<int>();
        r.world_size = j.at("world_size").get<int>();
        r.time = j.at("epoch").get<double>();
        r.slurm_restart = j.value("slurm_restart", r.attempt);  // before in-job attempts: the same number
        r.exit_code = j.at("exit_code").get<int>();
        r.final = j.value("final", false);
        r.restarted = j.value("restarted", false);
        for (auto& f : j.at("failures")) {
            auto rec = failure_record_from_json(f);
            if (!rec) return std::nullopt;
            r.failures.push_back(*rec);
        }
        return r;
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

std::vector<AttemptRecord> parse_ledger(const std::string& text, int* skipped) {
    std::vector<AttemptRecord> out;
    int bad = 0;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        auto j = nlohmann::json::parse(line, nullptr, false);
        auto r = j.is_discarded() ? std::nullopt : attempt_from_json(j);
        if (r)
            out.push_back(std::move(*r));
        else
            ++bad;
    }
    if (skipped) *skipped = bad;
    return out;
}

int first_attempt_of_run(int slurm_restart, const std::vector<AttemptRecord>& ledger) {
    int first = slurm_restart;
    for (const AttemptRecord& r : ledger)
        if (r.slurm_restart < slurm_restart) first = std::max(first, r.attempt + (r.restarted ? 2 : 1));
    return first;
}

int failed_attempts(const std::vector<AttemptRecord>& ledger) {
    std::set<int> failed;
    for (auto& r : ledger)
        if (r.end == AttemptEnd::Failed) failed.insert(r.attempt);
    return static_cast<int>(failed.size());
}

RequeueDecision decide_after_failure(const std::vector<AttemptRecord>& ledger, int attempt, int max_restarts) {
    RequeueDecision d;
    d.failures_used = failed_attempts(ledger);
    // Normally this node's record is in the ledger; count the attempt even if the write was lost.
    if (std::none_of(ledger.begin(), ledger.end(),
                     [&](const AttemptRecord& r) { return r.attempt == attempt && r.end == AttemptEnd::Failed; }))
        ++d.failures_used;
    d.requeue = d.failures_used <= max_restarts;
    const std::string used = std::to_string(d.failures_used);
    const std::string allowed = std::to_string(max_restarts);
    d.message =
        "requeue: attempt " + std::to_string(attempt) + " failed; " +
        (d.requeue ? used + " of " + allowed + " failed attempts allowed (--max-restarts) used: requeueing the job"
                   : used + " failed attempts, more than the " + allowed + " --max-restarts allows: the job ends here");
    return d;
}

RunOutcome outcome_of_all_attempts(const std::vector<AttemptRecord>& ledger, const std::string& run_id,
                                   int max_restarts) {
    RunOutcome o;
    o.run_id = run_id;
    o.failed = true;
    o.max_restarts = max_restarts;
    o.exit_code = 0;
    int last_failed = -1;
    for (auto& r : ledger)
        if (r.end == AttemptEnd::Failed) last_failed = std::max(last_failed, r.attempt);
    o.restarts = std::max(0, failed_attempts(ledger) - 1);  // the budget used: requeues after failures
    // Several nodes may have recorded the same attempt: its root cause is the earliest one among them.
    std::vector<AttemptRecord> sorted = ledger;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const AttemptRecord& a, const AttemptRecord& b) { return a.attempt < b.attempt; });
    std::map<int, const FailureRecord*> first_root;
    for (auto& r : sorted)
        for (auto& f : r.failures)
            if (f.failure.root_cause &&
                (!first_root.contains(r.attempt) || f.failure.exit.time < first_root[r.attempt]->failure.exit.time))
                first_root[r.attempt] = &f;
    for (auto& r : sorted)
        for (auto& f : r.failures) {
            FailureRecord copy = f;
            auto root = first_root.find(r.attempt);  // not [] : an attempt without a root cause stays without
            copy.failure.root_cause = root != first_root.end() && root->second == &f;
            if (f.failure.root_cause && !copy.failure.root_cause) copy.failure.stopped_by_us = false;
            o.failures.push_back(copy);
        }
    // render_failure_summary takes the last flagged root cause: keep time order within attempts.
    std::stable_sort(o.failures.begin(), o.failures.end(), [](const FailureRecord& a, const FailureRecord& b) {
        return a.failure.attempt != b.failure.attempt ? a.failure.attempt < b.failure.attempt
                                                      : a.failure.exit.time < b.failure.exit.time;
    });
    if (last_failed >= 0 && first_root.contains(last_failed))
        o.exit_code = first_root[last_failed]->failure.exit_code();
    else if (last_failed >= 0)  // no worker failed in it: a node was lost, the record says which
        for (auto& r : ledger)
            if (r.attempt == last_failed && r.end == AttemptEnd::Failed) {
                o.exit_code = r.exit_code;
                o.end_cause = "attempt " + std::to_string(r.attempt) + ": " + r.detail;
            }
    return o;
}

std::string attempt_banner(const std::string& run_id, int attempt, int requeues, int failures_used, int max_restarts,
                           int nnodes, int world_size) {
    return "dlaunch: job " + run_id + ": attempt " + std::to_string(attempt) + " (requeued " +
           std::to_string(requeues) + (requeues == 1 ? " time; " : " times; ") + std::to_string(failures_used) +
           " of " + std::to_string(max_restarts) + " failed attempts used): " + std::to_string(nnodes) +
           (nnodes == 1 ? " node" : " nodes") + ", world size " + std::to_string(world_size);
}

double checkpoint_wait(double grace_seconds, std::optional<double> seconds_left) {
    constexpr double kRequeueMargin = 5;  // slurm_requeue and the agents' exit before Slurm's own end
    if (!seconds_left) return grace_seconds;
    return std::max(0.0, std::min(grace_seconds, *seconds_left - kRequeueMargin));
}

StopDecision decide_after_sigterm(JobEnding ending) {
    switch (ending) {
        case JobEnding::Requeueing:
            return {AttemptEnd::Checkpointed, false,
                    "SIGTERM: Slurm requeues the job (scontrol requeue, preemption or node failure)"};
        case JobEnding::Preempted:
            return {AttemptEnd::Checkpointed, true, "SIGTERM: the job was preempted; dlaunch requeues it"};
        case JobEnding::NodeFailed:
            return {AttemptEnd::Checkpointed, true, "SIGTERM: a node of the job failed; dlaunch requeues it"};
        case JobEnding::TimedOut:
            return {AttemptEnd::Stopped, false,
                    "SIGTERM: the job reached its time limit with no warning signal before it; not requeued "
                    "(submit with #SBATCH --signal=USR1@120 so the job checkpoints and comes back)"};
        case JobEnding::Cancelled:
            return {AttemptEnd::Stopped, false, "SIGTERM: the job was cancelled (scancel); not requeued"};
        case JobEnding::Running:
            return {AttemptEnd::Stopped, false, "SIGTERM while the job still runs (not Slurm ending it); not requeued"};
        case JobEnding::Unknown: break;
    }
    return {AttemptEnd::Stopped, false, "SIGTERM, and slurmctld could not say why the job ends; not requeued"};
}

TaskEnd classify_task_end(const ExitStatus& status, JobEnding ending, std::optional<int> checkpoint_exit) {
    const bool checkpoint = checkpoint_exit && !status.signaled && status.code == *checkpoint_exit;
    // Every task of a checkpointing job exits with checkpoint-exit and asks for the requeue: the first
    // request to reach slurmctld makes the job Requeueing for the others, which checkpointed all the same.
    if (checkpoint && (ending == JobEnding::Running || ending == JobEnding::Requeueing)) return TaskEnd::Checkpointed;
    if (ending != JobEnding::Running) return TaskEnd::SlurmEnded;
    return status.success() ? TaskEnd::Finished : TaskEnd::Failed;
}

double ending_wait(double grace_seconds, std::optional<double> kill_wait) {
    constexpr double kSlurmDefaultKillWait = 30;
    constexpr double kAgentMargin = 1;  // the agent asks slurmctld, writes the ledger and exits before SIGKILL
    return std::max(0.0, std::min(grace_seconds, kill_wait.value_or(kSlurmDefaultKillWait) - kAgentMargin));
}

}  // namespace dlaunch
