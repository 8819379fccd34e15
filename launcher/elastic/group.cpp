#include "dlaunch/group.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>

#include "dlaunch/attempt_end.hpp"
#include "dlaunch/exit_codes.hpp"

namespace dlaunch {
namespace {

bool lost(const GroupMember& m) {
    return m.end == MemberEnd::Lost;
}

// The restart budget after this attempt: "1 of 2 restarts (--max-restarts) used", or past the last one,
// "no restart left (--max-restarts 1)".
std::string restart_budget(int used, int max) {
    if (used > max) return "no restart left (--max-restarts " + std::to_string(max) + ")";
    return std::to_string(used) + " of " + std::to_string(max) + " restarts (--max-restarts) used";
}

// "a, b, c"; past kNamed entries the rest are counted ("a, ..., h and 842 more"): one line stays readable when
// hundreds of nodes are lost at once.
constexpr size_t kNamed = 8;

std::string listed(const std::vector<std::string>& items) {
    std::string out;
    for (size_t i = 0; i < items.size() && i < kNamed; ++i) out += (out.empty() ? "" : ", ") + items[i];
    if (items.size() > kNamed) out += " and " + std::to_string(items.size() - kNamed) + " more";
    return out;
}

std::string hosts_of(const std::vector<const GroupMember*>& members) {
    std::vector<std::string> hosts;
    for (const GroupMember* m : members) hosts.push_back(m->host);
    return listed(hosts);
}

// The members of the next attempt: this one's members left, then idle spares in their place, up to MAX.
GroupDecision restart_on_members_left(const GroupFacts& f, const GroupPolicy& p, GroupDecision d) {
    std::vector<int> lost_ids;
    for (const GroupMember& m : f.active) (lost(m) ? lost_ids : d.next_members).push_back(m.id);
    size_t replaced = 0;
    for (const GroupMember& s : f.spares) {
        if (lost(s) || static_cast<int>(d.next_members.size()) >= p.nnodes.max) continue;
        d.next_members.push_back(s.id);
        if (replaced < lost_ids.size()) d.replaced.emplace_back(lost_ids[replaced++], s.id);
    }
    d.next_world_size = world_size_of(p, d.next_members);
    return d;
}

std::string what_the_group_does(const GroupFacts& f, const GroupDecision& d) {
    switch (d.kind) {
        case GroupDecision::Kind::Done: return "every node finished";
        case GroupDecision::Kind::GiveUp: return "the job ends here";
        case GroupDecision::Kind::MeetAgain: return "the nodes left meet again under a new leader";
        case GroupDecision::Kind::Requeue:
            return d.exclude.empty() ? "requeued" : "requeued without " + listed(d.exclude);
        case GroupDecision::Kind::Restart: break;
    }
    std::string out = "attempt " + std::to_string(f.attempt + 1) + " on " + std::to_string(d.next_members.size()) +
                      " node(s), world size " + std::to_string(d.next_world_size);
    auto host_of = [&f](int id) {
        for (const auto* list : {&f.active, &f.spares})
            for (const GroupMember& m : *list)
                if (m.id == id) return m.host;
        return std::to_string(id);
    };
    std::vector<std::string> replaced;
    for (auto [gone, spare] : d.replaced) replaced.push_back(host_of(spare) + " replaces " + host_of(gone));
    if (!replaced.empty()) out += "; " + listed(replaced);
    if (d.wait_seconds > 0) out += "; starts in " + fmt::format("{}", d.wait_seconds) + " s (--restart-backoff)";
    return out;
}

// The attempt's root cause: of every node's first failure, the earliest (a failing rank takes its peers on
// other nodes down with it, and each node calls its own first failure the root cause).
const FailureRecord* earliest_root_cause(const GroupFacts& facts) {
    const FailureRecord* root = nullptr;
    for (const GroupMember& m : facts.active)
        for (const FailureRecord& f : m.failures)
            if (f.failure.root_cause && (!root || f.failure.exit.time < root->failure.exit.time)) root = &f;
    return root;
}

// The code the group's agents end with when it gives up: the root cause rank's, like one agent's.
int group_exit_code(const GroupFacts& facts) {
    const FailureRecord* root = earliest_root_cause(facts);
    return root ? root->failure.exit_code() : exit_code::kGroupFailure;
}

}  // namespace

std::vector<FailureRecord> group_failures(const GroupFacts& facts) {
    const FailureRecord* root = earliest_root_cause(facts);
    std::vector<FailureRecord> out;
    for (const GroupMember& m : facts.active)
        for (const FailureRecord& f : m.failures) {
            out.push_back(f);
            out.back().failure.root_cause = &f == root;
        }
    std::stable_sort(out.begin(), out.end(), [](const FailureRecord& a, const FailureRecord& b) {
        return a.failure.exit.time < b.failure.exit.time;
    });
    return out;
}

std::string group_root_cause(const GroupFacts& facts) {
    if (const FailureRecord* root = earliest_root_cause(facts)) return root_cause_detail({*root});
    std::vector<const GroupMember*> gone;
    for (const GroupMember& m : facts.active)
        if (lost(m)) gone.push_back(&m);
    if (gone.empty()) return "no failure";
    return hosts_of(gone) + " lost: " + gone.front()->lost_why;
}

GroupDecision decide_group_attempt(const GroupFacts& f, const GroupPolicy& p) {
    GroupDecision d;
    d.restarts_used = f.restarts_used;
    const bool all_done = std::all_of(f.active.begin(), f.active.end(),
                                      [](const GroupMember& m) { return m.end == MemberEnd::Succeeded; });
    if (all_done) {
        d.summary = what_the_group_does(f, d);
        return d;
    }
    d.restarts_used = f.restarts_used + 1;
    d.exit_code = group_exit_code(f);
    d.cause = group_root_cause(f);
    const std::string cause = "attempt " + std::to_string(f.attempt) + " failed (" + d.cause + "); " +
                              restart_budget(d.restarts_used, p.max_restarts);
    if (d.restarts_used > p.max_restarts) {
        d.kind = GroupDecision::Kind::GiveUp;
        d.summary = cause + ": " + what_the_group_does(f, d);
        return d;
    }
    GroupDecision next = restart_on_members_left(f, p, d);
    if (static_cast<int>(next.next_members.size()) >= p.nnodes.min) {
        next.kind = GroupDecision::Kind::Restart;
        next.wait_seconds = p.backoff.before_restart(next.restarts_used);
        next.summary = cause + ": " + what_the_group_does(f, next);
        return next;
    }
    d.kind = p.requeue ? GroupDecision::Kind::Requeue : GroupDecision::Kind::GiveUp;
    if (p.requeue) d.requeue_why = "fewer nodes left than --nnodes MIN";
    if (p.requeue) {
        d.exclude = f.lost_before;
        for (const auto* list : {&f.active, &f.spares})
            for (const GroupMember& m : *list)
                if (lost(m)) d.exclude.push_back(m.host);
    }
    d.summary = cause + "; " + std::to_string(next.next_members.size()) + " node(s) left, fewer than --nnodes MIN " +
                std::to_string(p.nnodes.min) + ": " + what_the_group_does(f, d) +
                (p.requeue ? "" : " (with --requeue the job would go back to Slurm's queue)");
    return d;
}

namespace {

// "node2 failed the health check (gpus: ...)"; several nodes: "node2 (...), node3 (...) failed the health check".
std::string gate_cause(const GateFacts& f) {
    std::vector<std::string> parts;
    for (const auto* list : {&f.planned, &f.spares})
        for (const GroupMember& m : *list)
            if (auto bad = f.failing.find(m.id); bad != f.failing.end())
                parts.push_back(m.host + " (" + bad->second + ")");
    return listed(parts) + " failed the health check";
}

// Fewer than MIN nodes passed, or the leader did not: the attempt does not start.
GroupDecision refuse_attempt(const GateFacts& f, const GroupPolicy& p, size_t passed) {
    const bool leader_failed = f.failing.contains(0);
    GroupDecision d;
    d.restarts_used = f.restarts_used + 1;
    d.exit_code = exit_code::kNotReady;
    d.cause = gate_cause(f);
    const std::string cause = "attempt " + std::to_string(f.attempt) + " cannot start (" + d.cause + "); " +
                              restart_budget(d.restarts_used, p.max_restarts);
    d.kind = GroupDecision::Kind::GiveUp;
    if (d.restarts_used > p.max_restarts) {
        d.summary = cause + ": " + what_the_group_does({}, d);
        return d;
    }
    if (p.requeue) {
        d.kind = GroupDecision::Kind::Requeue;
        d.requeue_why = leader_failed ? "the group's leader failed the health check"
                                      : "fewer nodes passed the health check than --nnodes MIN";
        d.exclude = f.lost_before;
        for (const auto* list : {&f.planned, &f.spares})
            for (const GroupMember& m : *list)
                if (f.failing.contains(m.id)) d.exclude.push_back(m.host);
    }
    const std::string why = leader_failed ? "the group cannot go on without its leader"
                                          : std::to_string(passed) + " node(s) passed, fewer than --nnodes MIN " +
                                                std::to_string(p.nnodes.min);
    d.summary = cause + "; " + why + ": " + what_the_group_does({}, d) +
                (p.requeue ? "" : " (with --requeue the job would go back to Slurm's queue without them)");
    return d;
}

}  // namespace

GateDecision decide_gate(const GateFacts& f, const GroupPolicy& p) {
    GateDecision g;
    for (const GroupMember& m : f.planned) {
        if (auto bad = f.failing.find(m.id); bad != f.failing.end())
            g.left_out.push_back({f.attempt, m.host, bad->second});
        else
            g.members.push_back(m.id);
    }
    for (const GroupMember& s : f.spares)
        if (g.members.size() < f.planned.size() && !f.failing.contains(s.id)) g.members.push_back(s.id);
    // Node 0 leads the group (and under Slurm hosts the batch script and MASTER_ADDR): never left out.
    if (static_cast<int>(g.members.size()) >= p.nnodes.min && !f.failing.contains(0)) return g;
    g.go = false;
    g.end = refuse_attempt(f, p, g.members.size());
    g.members.clear();
    return g;
}

std::optional<GroupDecision> decide_gate_with_waiting_nodes(const GateFacts& f, const GateDecision& gate,
                                                            const GroupPolicy& p, int waiting) {
    const bool short_of_plan = !gate.go || gate.members.size() < f.planned.size();
    if (waiting <= 0 || f.failing.empty() || f.failing.contains(0) || !short_of_plan) return std::nullopt;
    GroupDecision d;
    for (const auto* list : {&f.planned, &f.spares})
        for (const GroupMember& m : *list)
            if (f.failing.contains(m.id)) d.left_behind.push_back(m.id);
    const int healthy = static_cast<int>(f.planned.size() + f.spares.size() - d.left_behind.size());
    const int next = std::min(p.nnodes.max, healthy + waiting);
    if (next < p.nnodes.min) return std::nullopt;
    d.kind = GroupDecision::Kind::MeetAgain;
    d.restarts_used = f.restarts_used;
    d.exit_code = exit_code::kNotReady;
    d.cause = gate_cause(f);
    d.summary = "attempt " + std::to_string(f.attempt) + ": " + d.cause + "; " + std::to_string(waiting) +
                (waiting == 1 ? " node waits" : " nodes wait") +
                " to join: the nodes meet again without the failing node(s) (no restart of --max-restarts used), "
                "attempt " +
                std::to_string(f.attempt + 1) + " on " + std::to_string(next) + " node(s)";
    return d;
}

void leave_between_attempts(RunOutcome& outcome, int signo, int warning_signal) {
    const bool warning = signo == warning_signal && !stop_signals().contains(signo);
    outcome.checkpointed = warning;
    outcome.stop_signal = warning ? 0 : signo;
    outcome.exit_code = warning ? exit_code::kSuccess : exit_code::kSignalBase + signo;
    outcome.failed = false;
}

LeaderLossDecision decide_without_leader(const LeaderLoss& l, const GroupPolicy& p) {
    LeaderLossDecision out;
    GroupDecision& d = out.decision;
    d.kind = GroupDecision::Kind::GiveUp;
    d.exit_code = exit_code::kGroupFailure;
    d.restarts_used = l.restarts_used + 1;
    d.cause = l.leader_host + " lost: " + l.why;
    const std::string lost = "the group's leader on " + l.leader_host + " is lost (" + l.why + ")";
    if (l.refused) {  // the group goes on without this node: nothing to requeue, no one to meet again
        d.summary = "the group's leader on " + l.leader_host + " refused this node (" + l.why +
                    "); this node's part of the job ends";
        return out;
    }
    if (p.leader_replaceable && !p.requeue) {
        const std::string budget = "attempt " + std::to_string(l.attempt) + " failed (" + d.cause + "); " +
                                   restart_budget(d.restarts_used, p.max_restarts);
        if (d.restarts_used > p.max_restarts) {
            d.summary = budget + ": the job ends here";
            return out;
        }
        const int left = static_cast<int>(l.members.size()) - 1;
        if (left < p.nnodes.min) {
            d.summary = budget + "; " + std::to_string(left) + " node(s) left, fewer than --nnodes MIN (" +
                        std::to_string(p.nnodes.min) + "): the job ends here";
            return out;
        }
        d.kind = GroupDecision::Kind::MeetAgain;
        d.summary = budget + "; " + what_the_group_does({}, d);
        return out;
    }
    if (!p.requeue) {
        d.summary = lost + "; this node's part of the job ends";
        return out;
    }
    auto after_leader = std::find_if(l.members.begin(), l.members.end(), [](int m) { return m != 0; });
    out.records_here = after_leader != l.members.end() && *after_leader == l.member;
    const std::string budget = "attempt " + std::to_string(l.attempt) + " failed (" + d.cause + "); " +
                               restart_budget(d.restarts_used, p.max_restarts);
    if (d.restarts_used > p.max_restarts) {
        d.summary = budget + ": the job ends here";
        return out;
    }
    d.kind = GroupDecision::Kind::Requeue;
    d.requeue_why = "the group's leader is lost";
    if (l.silent) d.exclude = {l.leader_host};
    d.summary = budget + "; the group cannot go on without its leader: " + what_the_group_does({}, d);
    return out;
}

AttemptDecision decide_group_end(const GroupDecision& g, const AttemptFacts& f, int max_restarts) {
    AttemptDecision d;
    d.exit_code = g.exit_code;
    if (g.kind == GroupDecision::Kind::Done) return d;
    if (!f.first) {
        if (g.kind == GroupDecision::Kind::Requeue) {
            d.exit_code = exit_code::kSuccess;
            d.log.push_back({LogLine::Level::Info, "requeue: the group requeues the job; this node's part ends"});
        }
        return d;
    }
    AttemptRecord mine = attempt_record(f, AttemptEnd::Failed, g.cause);
    mine.exit_code = g.exit_code;
    mine.final = g.kind == GroupDecision::Kind::GiveUp;
    mine.restarted = g.kind == GroupDecision::Kind::Restart;
    d.record = mine;
    if (g.kind == GroupDecision::Kind::Restart) return d;
    std::vector<AttemptRecord> ledger = f.ledger;
    ledger.push_back(mine);
    RunOutcome all = outcome_of_all_attempts(ledger, f.run_id, max_restarts);
    const int job_code = all.exit_code != 0 ? all.exit_code : g.exit_code;
    d.final_summary = std::move(all);  // with a requeue: shown only when slurm_requeue fails
    if (g.kind == GroupDecision::Kind::Requeue) {
        d.requeue = g.requeue_why;
        d.exclude = g.exclude;
        d.exit_code_if_not_requeued = job_code;
        return d;
    }
    d.exit_code = job_code;
    return d;
}

GroupAttempt::GroupAttempt(int attempt, std::vector<GroupMember> active, std::vector<GroupMember> spares,
                           int restarts_used, std::vector<std::string> lost_before)
    : ended_(active.size(), false) {
    facts_.lost_before = std::move(lost_before);
    facts_.attempt = attempt;
    facts_.active = std::move(active);
    facts_.spares = std::move(spares);
    facts_.restarts_used = restarts_used;
    for (const auto* list : {&facts_.active, &facts_.spares})
        for (size_t i = 0; i < list->size(); ++i) {
            const int id = (*list)[i].id;
            if (id < 0) continue;  // no member says it is one
            if (static_cast<size_t>(id) >= slots_.size()) slots_.resize(static_cast<size_t>(id) + 1);
            if (!slots_[static_cast<size_t>(id)]) slots_[static_cast<size_t>(id)] = Slot{list == &facts_.active, i};
        }
}

GroupMember* GroupAttempt::find(int member, bool& active) {
    if (member < 0 || static_cast<size_t>(member) >= slots_.size() || !slots_[static_cast<size_t>(member)])
        return nullptr;
    const Slot slot = *slots_[static_cast<size_t>(member)];
    active = slot.active;
    return &(active ? facts_.active : facts_.spares)[slot.index];
}

void GroupAttempt::end(size_t index) {
    if (!ended_[index]) ++ended_count_;
    ended_[index] = true;
}

std::string GroupAttempt::stop_reason(const GroupMember& m) {
    if (stop_sent_ || (m.end != MemberEnd::Failed && m.end != MemberEnd::Lost)) return "";
    stop_sent_ = true;
    if (m.end == MemberEnd::Lost) return m.host + " lost: " + m.lost_why;
    return root_cause_detail(m.failures);
}

std::string GroupAttempt::ended(int member, MemberEnd end, std::vector<FailureRecord> failures) {
    bool active = false;
    GroupMember* m = find(member, active);
    if (!m || !active) return "";
    const size_t index = static_cast<size_t>(m - facts_.active.data());
    if (ended_[index]) return "";
    this->end(index);
    m->end = end;
    m->failures = std::move(failures);
    return stop_reason(*m);
}

std::string GroupAttempt::lost(int member, const std::string& why) {
    bool active = false;
    GroupMember* m = find(member, active);
    if (!m) return "";
    if (!active) {
        m->end = MemberEnd::Lost;  // a spare gone: it replaces nobody
        m->lost_why = why;
        return "";
    }
    const size_t index = static_cast<size_t>(m - facts_.active.data());
    if (ended_[index]) return "";  // it ended first; the connection closing after that is no loss
    end(index);
    m->end = MemberEnd::Lost;
    m->lost_why = why;
    return stop_reason(*m);
}

std::string GroupAttempt::failing(int member, const std::string& why) {
    bool active = false;
    const GroupMember* m = find(member, active);
    if (!m || !active || stop_sent_) return "";
    stop_sent_ = true;
    return why;
}

void GroupAttempt::stop_overdue(const std::string& why) {
    for (size_t i = 0; i < facts_.active.size(); ++i)
        if (!ended_[i]) {
            end(i);
            facts_.active[i].end = MemberEnd::Lost;
            facts_.active[i].lost_why = why;
        }
}

bool GroupAttempt::any_ended() const {
    return ended_count_ > 0;
}

bool GroupAttempt::complete() const {
    return ended_count_ == ended_.size();
}

std::optional<GroupDecision> decide_scale_up(const GroupFacts& f, const GroupPolicy& p) {
    GroupDecision d;
    d.kind = GroupDecision::Kind::Restart;
    d.restarts_used = f.restarts_used;
    for (const GroupMember& m : f.active) d.next_members.push_back(m.id);
    std::vector<const GroupMember*> taken;
    for (const GroupMember& s : f.spares) {
        if (lost(s) || static_cast<int>(d.next_members.size()) >= p.nnodes.max) continue;
        d.next_members.push_back(s.id);
        taken.push_back(&s);
    }
    if (taken.empty()) return std::nullopt;
    d.next_world_size = world_size_of(p, d.next_members);
    d.summary = "attempt " + std::to_string(f.attempt) + ": " + hosts_of(taken) +
                (taken.size() == 1 ? " waits" : " wait") + " to join, below --nnodes MAX " +
                std::to_string(p.nnodes.max) +
                " (a membership change: no restart "
                "of --max-restarts used): " +
                what_the_group_does(f, d);
    return d;
}

namespace {

// The nodes of the attempt's record that it runs without (the health gate left them out), alive: they stay on
// the record and come back when the nodes meet again.
int spares_alive(const GroupFacts& f) {
    return static_cast<int>(
        std::count_if(f.spares.begin(), f.spares.end(), [](const GroupMember& m) { return !lost(m); }));
}

}  // namespace

std::optional<GroupDecision> decide_store_scale_up(const GroupFacts& f, const GroupPolicy& p, int waiting) {
    const int members = static_cast<int>(f.active.size()) + spares_alive(f);
    if (waiting <= 0 || members >= p.nnodes.max) return std::nullopt;
    GroupDecision d;
    d.kind = GroupDecision::Kind::MeetAgain;
    d.restarts_used = f.restarts_used;
    const int taken = std::min(waiting, p.nnodes.max - members);
    d.summary = "attempt " + std::to_string(f.attempt) + ": " + std::to_string(waiting) +
                (waiting == 1 ? " node waits" : " nodes wait") + " to join, below --nnodes MAX " +
                std::to_string(p.nnodes.max) +
                " (a membership change: no restart of --max-restarts used): the nodes meet again, attempt " +
                std::to_string(f.attempt + 1) + " on " + std::to_string(members + taken) + " node(s)";
    return d;
}

GroupDecision decide_after_scale_up(const GroupFacts& f, const GroupPolicy& p, const GroupDecision& scale_up) {
    GroupDecision own = decide_group_attempt(f, p);
    // A member whose workers finished as the stop came cannot make the attempt done while others were stopped:
    // the stop still decides (no restart used).
    const bool only_stopped = std::all_of(f.active.begin(), f.active.end(), [](const GroupMember& m) {
        return m.end == MemberEnd::Stopped || m.end == MemberEnd::Succeeded;
    });
    if (own.kind == GroupDecision::Kind::Done || !only_stopped) return own;
    return scale_up;
}

GroupDecision decide_with_waiting_nodes(const GroupFacts& f, const GroupPolicy& p, int waiting) {
    GroupDecision d = decide_group_attempt(f, p);
    const bool failed_within_budget = d.kind == GroupDecision::Kind::Restart ||
                                      (d.kind == GroupDecision::Kind::GiveUp && d.restarts_used <= p.max_restarts);
    if (waiting <= 0 || !failed_within_budget) return d;
    if (d.kind == GroupDecision::Kind::Restart && static_cast<int>(d.next_members.size()) >= p.nnodes.max) return d;
    GroupDecision again;
    again.kind = GroupDecision::Kind::MeetAgain;
    again.restarts_used = d.restarts_used;
    again.exit_code = d.exit_code;
    again.cause = d.cause;
    again.wait_seconds = p.backoff.before_restart(again.restarts_used);
    for (const GroupMember& m : f.active)
        if (lost(m)) again.left_behind.push_back(m.id);
    // The next attempt takes the live nodes on record (the health gate's left-out ones too) and those waiting.
    const int left = static_cast<int>(f.active.size() - again.left_behind.size()) + spares_alive(f);
    const int next = std::min(p.nnodes.max, left + waiting);
    if (next < p.nnodes.min) return d;
    again.summary = "attempt " + std::to_string(f.attempt) + " failed (" + d.cause + "); " +
                    restart_budget(again.restarts_used, p.max_restarts) + "; " + std::to_string(waiting) +
                    (waiting == 1 ? " node waits" : " nodes wait") + " to join: the nodes meet again, attempt " +
                    std::to_string(f.attempt + 1) + " on " + std::to_string(next) + " node(s)";
    return again;
}

int world_size_of(const GroupPolicy& policy, const std::vector<int>& members) {
    int world = 0;
    for (int id : members)
        world += static_cast<size_t>(id) < policy.member_procs.size() ? policy.member_procs[static_cast<size_t>(id)]
                                                                      : policy.nproc_per_node;
    return world;
}

}  // namespace dlaunch
