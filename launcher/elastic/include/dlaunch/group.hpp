// The group of a job's agents (one per node) restarting inside the allocation: what the group does when an
// attempt ends on several nodes. Pure: the group's leader gathers how each member's attempt ended (its
// workers' end, or the member lost: no heartbeat, connection closed) and sends every member the decision.
//
// Rules:
// - Every member's workers succeeded: the job is done.
// - A worker failed or a member was lost: the attempt failed, and it uses one restart of the group's budget
//   (--max-restarts counts attempts of the whole group, not of a node). Past the budget: give up, with the
//   root cause.
// - The next attempt runs on the members left, in their order, topped up with idle spares to MAX nodes
//   (a spare takes a lost member's place); the world size follows. With fewer than MIN members left the job
//   leaves the allocation: requeued with the lost nodes excluded (--requeue), else it gives up.
// - Under --requeue the job's ledger (requeue.hpp) keeps the group's attempts: the leader records each
//   failed one with every node's failures (final when the group gives up), so that restarts inside the
//   allocation and requeues count on from each other, against one budget (decide_group_end).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/attempt_end.hpp"
#include "dlaunch/request.hpp"
#include "dlaunch/summary.hpp"

namespace dlaunch {

enum class MemberEnd {
    Succeeded,  // its workers all exited 0
    Failed,     // a worker failed (its failures say which)
    Stopped,    // the group stopped its workers because another member failed or was lost
    Lost,       // the member stopped answering (no heartbeat within the bound, or its connection closed)
};

struct GroupMember {
    int id = 0;        // stable for the job's life: its node index in the allocation (SLURM_NODEID) or join order
    std::string host;  // the node's name, as Slurm knows it (for --exclude)
    MemberEnd end = MemberEnd::Succeeded;
    std::vector<FailureRecord> failures;  // Failed: its workers' failures in this attempt
    std::string lost_why;                 // Lost: "no heartbeat for 10 s", "connection closed", ...
    bool operator==(const GroupMember&) const = default;
};

struct GroupFacts {
    int attempt = 0;
    std::vector<GroupMember> active;       // this attempt's members, in node-rank order
    std::vector<GroupMember> spares;       // idle members, in arrival order (a lost spare has end Lost)
    int restarts_used = 0;                 // before this attempt's end
    std::vector<std::string> lost_before;  // hosts lost in earlier attempts of this run (excluded on a requeue too)
};

struct GroupPolicy {
    NodeRange nnodes;  // --nnodes MIN:MAX
    int nproc_per_node = 1;
    int max_restarts = 0;
    bool requeue = false;             // --requeue: fewer than MIN nodes left sends the job back to Slurm's queue
    RestartBackoff backoff{0, 0};     // --restart-backoff: every node waits this long before a restart
    std::vector<int> member_procs{};  // each member id's workers when nodes differ (met by hand); else empty
    bool leader_replaceable = false;  // the nodes met through a store that elects another leader (etcd)
};

struct GroupDecision {
    // MeetAgain: the nodes meet again in the store they met through (etcd): the leader was lost and the store
    // elects another (decided by a member alone), or the leader takes nodes waiting there (sent to all).
    enum class Kind { Done, Restart, Requeue, GiveUp, MeetAgain } kind = Kind::Done;
    int restarts_used = 0;
    std::vector<int> next_members;              // Restart: member ids, in node-rank order
    int next_world_size = 0;                    // Restart
    double wait_seconds = 0;                    // Restart: every node waits this long first (--restart-backoff)
    std::vector<std::pair<int, int>> replaced;  // Restart: (lost member id, spare id)
    std::vector<std::string> exclude;           // Requeue: hosts Slurm must not hand back
    std::vector<int> left_behind;               // MeetAgain (the leader's): members lost (the leader adds those
                                                // of earlier attempts), not taken again while their leases live
    int exit_code = 0;        // GiveUp, Requeue: the root cause rank's code (128+N for signal N); 3 for a lost node
    std::string cause;        // what ended the attempt (group_root_cause); "" when Done
    std::string requeue_why;  // Requeue: why the job leaves the allocation (not sent to the members)
    std::string summary;      // one line: what failed and what the group does
    bool operator==(const GroupDecision&) const = default;
};

GroupDecision decide_group_attempt(const GroupFacts& facts, const GroupPolicy& policy);

// A node waiting to join (an idle spare, a node that came late) while the attempt runs on fewer members
// than --nnodes MAX: as under torchrun ("membership changes do not count as retries"), the group restarts
// at once to take it. The next attempt runs on this one's members, in their order, then the waiting nodes
// that are alive in arrival order, up to MAX. It uses no restart of --max-restarts and waits no backoff.
// `facts.active`: the running members (their ends are not read); `facts.spares`: the nodes waiting.
// nullopt: nothing to take (no live node waits, or the attempt already has MAX members).
std::optional<GroupDecision> decide_scale_up(const GroupFacts& facts, const GroupPolicy& policy);

// The same through a store that keeps the membership (etcd): `waiting` nodes alive in the store and not on
// the attempt's record, which names fewer than MAX nodes (its members, `facts.active`, and the nodes of it
// left out as spares, `facts.spares`, unless lost). The group cannot take them on its own channel: every node
// meets again in the store, where the leader publishes the next attempt with them. No restart of
// --max-restarts is used. nullopt: nothing to take.
std::optional<GroupDecision> decide_store_scale_up(const GroupFacts& facts, const GroupPolicy& policy, int waiting);

// The decision on an attempt the leader stopped to take waiting nodes (`scale_up`, from decide_store_scale_up;
// the leader stops none once a member has ended): the nodes meet again (a member that finished as the stop
// came included: the others did not), unless the attempt ended otherwise on its own (every node done, or a
// worker failed or a node was lost before the stop came), which decide_group_attempt() decides as for any
// attempt.
GroupDecision decide_after_scale_up(const GroupFacts& facts, const GroupPolicy& policy, const GroupDecision& scale_up);

// The decision on an attempt that ended by itself when the nodes met through a store (etcd) where `waiting`
// live nodes wait outside the attempt: decide_group_attempt(), except that an attempt that failed within the
// budget meets again in the store, taking the waiting nodes (and leaving the lost members behind), when its
// restart would run below MAX or fewer than MIN nodes are left but the waiting ones make up MIN. The failure
// uses its restart as any other.
GroupDecision decide_with_waiting_nodes(const GroupFacts& facts, const GroupPolicy& policy, int waiting);

// The world size of an attempt on `members` (member ids): their workers summed.
int world_size_of(const GroupPolicy& policy, const std::vector<int>& members);

// The health gate before an attempt: every node of the group (members and spares) checks itself
// (health/health.hpp) and tells the leader; a node lost meanwhile, or silent past the bound, fails it.
// - The attempt runs on its planned members that passed, in their order, with spares that passed in the
//   places of those that failed (never more nodes than planned); the world size follows. A node left out
//   waits as a spare and is checked again before the next attempt. Leaving nodes out uses no restart.
// - With fewer than --nnodes MIN nodes passing, or node 0 failing (it leads the group and, under Slurm,
//   hosts the batch script and MASTER_ADDR), the attempt cannot start, which uses one restart of the
//   budget: under --requeue the job goes back to Slurm's queue with the failing nodes (and those lost
//   before) excluded; without it, or past the budget, the job ends with exit_code::kNotReady.
struct GateFacts {
    int attempt = 0;
    std::vector<GroupMember> planned;    // the attempt's members, in node-rank order (id, host)
    std::vector<GroupMember> spares;     // idle nodes, in order
    std::map<int, std::string> failing;  // node id -> why it failed the check ("lost: ..." for a lost node)
    int restarts_used = 0;
    std::vector<std::string> lost_before;  // hosts lost in earlier attempts (excluded on a requeue too)
};

struct GateDecision {
    bool go = true;
    std::vector<int> members;       // go: who runs the attempt, in node-rank order
    std::vector<LeftOut> left_out;  // planned members that failed, and why
    GroupDecision end;              // !go: Requeue or GiveUp, for every node
    // !go on a member: the leader was lost before it answered; `end` is decide_without_leader()'s.
    bool leader_lost = false;
    bool operator==(const GateDecision&) const = default;
};

GateDecision decide_gate(const GateFacts& facts, const GroupPolicy& policy);

// The gate through a store that keeps the membership (etcd), where `waiting` live nodes wait outside the
// group: when `gate` (decide_gate's) would run the attempt on fewer nodes than planned, or not at all, because
// nodes other than the leader failed the check, the nodes meet again in the store instead, leaving the
// failing nodes behind for the rest of the run and taking the waiting ones (a healthy node that came later is
// preferred to one that fails the check). No restart of --max-restarts is used (leaving nodes out uses none).
// nullopt: the gate's own decision stands (nobody waits, nothing to swap, the leader failed, or the nodes
// left with those waiting would still be fewer than MIN).
std::optional<GroupDecision> decide_gate_with_waiting_nodes(const GateFacts& facts, const GateDecision& gate,
                                                            const GroupPolicy& policy, int waiting);

// A signal that came while this node waited outside an attempt (no worker runs: joining, hearing the others
// end, a spare idling, or the leader leaving by it): Slurm's warning signal (--requeue) leaves the group as
// checkpointed (the workers' last checkpoint stands; node 0 requeues the job), a stop signal as a stop by
// that signal (128+S). The attempt's own failures are kept.
void leave_between_attempts(RunOutcome& outcome, int signo, int warning_signal);

// What a member does when the leader (node 0) is lost during an attempt. Node 0 leads for the whole job
// (and under Slurm hosts the batch script, whose loss ends the allocation): the group cannot go on.
// Without --requeue every member ends its part (exit 3). With it the job leaves the allocation: the
// successor (the attempt's first member after node 0) records the failed attempt and requeues the job,
// without node 0 when it went silent (a closed connection: its agent died, the node lives); past the budget
// it records the job's end. The other members end their part as for any requeue.
struct LeaderLoss {
    int attempt = 0;
    int member = 0;            // the member deciding
    std::vector<int> members;  // the attempt's, in node-rank order (node 0 first)
    std::string leader_host;
    std::string why;      // "no heartbeat for 10 s", "connection closed"
    bool silent = false;  // lost by silence, not by a closed connection
    int restarts_used = 0;
    bool refused = false;  // the leader turned this node away (why): it lives, and leads without this node
};
struct LeaderLossDecision {
    GroupDecision decision;
    bool records_here = false;  // this member is the successor: it records the attempt (and requeues)
};
LeaderLossDecision decide_without_leader(const LeaderLoss& loss, const GroupPolicy& policy);

// The leader's account of one attempt while it ends: each member's end as it arrives (its own, the members'
// "ended" messages, losses the channel saw). Pure. The first failure or loss is why every other member must
// stop; once each active member has ended or is lost the facts are complete for decide_group_attempt().
class GroupAttempt {
public:
    GroupAttempt(int attempt, std::vector<GroupMember> active, std::vector<GroupMember> spares, int restarts_used,
                 std::vector<std::string> lost_before = {});

    // Each returns why the other members must stop their workers now, once (the first failure or loss);
    // "" otherwise. A member not of this attempt, or already ended, changes nothing.
    std::string ended(int member, MemberEnd end, std::vector<FailureRecord> failures);
    std::string lost(int member, const std::string& why);
    // A member's first worker failure, told before its attempt ended (`why`: the failure's detail).
    std::string failing(int member, const std::string& why);
    // The stop was sent and the members still running did not end in time: they are lost.
    void stop_overdue(const std::string& why);

    bool complete() const;
    bool any_ended() const;  // a member's end (or loss) was heard: the attempt is ending
    bool stopping() const { return stop_sent_; }
    const GroupFacts& facts() const { return facts_; }

private:
    // Where a member is in the facts' lists: a look-up per message (a search of the lists made the leader's
    // work per restart O(N²): 1,024 ends each searching ~100 KB of members).
    struct Slot {
        bool active = false;
        size_t index = 0;
    };
    GroupMember* find(int member, bool& active);
    std::string stop_reason(const GroupMember& m);
    void end(size_t index);
    GroupFacts facts_;
    std::vector<std::optional<Slot>> slots_;  // by member id
    std::vector<bool> ended_;                 // per active member, in facts_.active order
    size_t ended_count_ = 0;
    bool stop_sent_ = false;
};

// Every node's worker failures of the attempt, in time order, with one root cause: the earliest (each node
// flags its own first failure). The leader's record of the attempt, for the job's summary and failure.json.
std::vector<FailureRecord> group_failures(const GroupFacts& facts);

// What ended the attempt, in words: "rank 3 on node2: exit code 5", "node3 lost: no heartbeat for 10 s".
std::string group_root_cause(const GroupFacts& facts);

// Under --requeue, what the group's decision on an attempt means for the job's ledger and the job: the
// leader (facts.first) records the failed attempt (facts.failures: the group's), then gives the job back
// to Slurm's queue without the lost nodes (Requeue) or ends it with the summary of every attempt in the
// ledger (GiveUp); a restart is only recorded. A member has nothing to record: it exits.
AttemptDecision decide_group_end(const GroupDecision& decision, const AttemptFacts& facts, int max_restarts);

}  // namespace dlaunch
