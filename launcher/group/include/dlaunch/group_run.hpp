// Restarts inside the allocation: the agents of a multi-node Slurm step (or of nodes started by hand that met
// in the node rendezvous or through etcd) form a group and run every attempt together. Node 0's agent leads: it listens
// on the group channel (launcher/group/), admits the others with their credential (group_auth.hpp), hears how each
// node's attempt ended (or that a node went silent), stops every node at the first failure or loss, decides the next
// attempt with decide_group_attempt() and tells every member. The rules are elastic/group.hpp's; this file only carries
// them out.
//
// Before every attempt each node runs the health gate and tells the leader, which answers with the attempt's
// members (decide_gate(): failing nodes left out, spares in their place) or, with too few passing, the
// job's end or requeue.
//
// A hot spare (a member past --nnodes MAX) runs no workers: it waits, listening to the group, until a
// decision names it for the next attempt.
//
// An attempt ended by a signal (Slurm ending the job, scancel, the warning signal) leaves the group: the
// agent ends as it would alone (finish_run); so does a stop signal that comes while the group waits
// outside an attempt (joining, hearing the others end, a spare idling): those are blocked meanwhile. A member that
// loses its leader does what decide_without_leader() says: its part ends, or (--requeue) the job is requeued by the
// leader's successor.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dlaunch/executor.hpp"
#include "dlaunch/group.hpp"
#include "dlaunch/group_auth.hpp"
#include "dlaunch/group_channel.hpp"
#include "dlaunch/group_store.hpp"
#include "dlaunch/result.hpp"
#include "dlaunch/summary.hpp"

namespace dlaunch {

struct GroupSetup {
    int member = 0;                  // this agent's node index (SLURM_PROCID, or its rendezvous node rank); 0 leads
    std::vector<std::string> hosts;  // every member's node name (by hand: address), by member id
    int first_nodes = 0;             // members 0..first_nodes-1 run the first attempt; the rest are hot spares
    std::string leader_addr;         // node 0's address (MASTER_ADDR)
    std::string own_addr;            // by hand with --local-addr: this node's, which members connect from
    int port = 0;                    // the group channel's port on node 0 (group_port(); by hand the rendezvous's)
    // By hand on node 0: the rendezvous's socket, listening on `port`, which the first leader takes over
    // (Leader::adopt; it is empty after). Null or empty: the leader listens anew.
    std::shared_ptr<Fd> listener;
    // By hand on every node: node 0's leader takes the rendezvous's socket over (Leader::adopt), so a member that
    // connected before it serves waits for its welcome as long as it would have tried to connect.
    bool leader_takes_socket = false;
    std::string run_id;  // what the members' credentials sign
    GroupAuth auth;      // MUNGE under Slurm, the run's secret by hand
    GroupPolicy policy;
    group::ChannelTimes times;
    double join_seconds = 60;   // how long a member retries reaching the leader, and the leader waits for all
    std::string missing_hint;   // what to do when a member did not join in time
    double grace_seconds = 30;  // the workers' stop grace: how long stopped members may take to end
    int restarts_used = 0;      // of --max-restarts, before this run (--requeue: the job's failed attempts)
    int warning_signal = 0;     // --requeue: Slurm's warning signal (only logged between attempts); 0: none
    // The health gate (health/health.hpp): what this node's check before `attempt` found ("": it passed).
    // Null (--no-health-check without --health-check): every node still reports, as passing.
    std::function<std::string(int attempt)> check_health;
    // The check only tries the log directory (health::may_take_long): the agent runs it inline, not on a thread
    // beside the channel (a thread per attempt cost every agent's restart its creation, stack and exit).
    bool health_check_is_quick = false;
    double health_seconds = 60;  // how long a node's check may take: the leader waits this long (and a heartbeat)
    // Where the membership is kept besides the group's channel (group_store.hpp); null: nowhere (dlaunch's own
    // channel is all there is). The leader reads how many nodes wait there while its workers run (below
    // --nnodes MAX it stops the attempt and every node meets again in the store to take them:
    // decide_store_scale_up), fresh when an attempt failed (decide_with_waiting_nodes) and at the health gate
    // (decide_gate_with_waiting_nodes). A member that cannot reach its leader while the group forms asks whether
    // the leader is gone from it, and meets the others again when it is (decide_without_leader); without a
    // store it only retries until the join time is over.
    GroupStore* store = nullptr;
};

// Runs this node's workers of `attempt` on `members` (ids, in node-rank order) until they end or the
// watch says stop.
using RunGroupAttempt =
    std::function<RunOutcome(int attempt, const std::vector<int>& members, const AttemptWatch& watch)>;

struct GroupEnd {
    enum class Kind {
        Decided,  // the group decided the job's end: decision says Done, GiveUp or Requeue
        Left,     // a signal ended this node's attempt (outcome.stop_signal, outcome.checkpointed)
    } kind = Kind::Decided;
    GroupDecision decision;
    RunOutcome outcome;                // this node's attempts, merged: every failure, restarts, the exit code
    int attempt = 0;                   // the last attempt
    std::vector<int> members;          // its members
    bool summed_up_by_leader = false;  // a member whose end the leader heard: the leader prints the summary
    bool records = false;  // this node records the end in the job's ledger (the leader; a lost leader's successor)
};

// Called on every node once the group decided to restart after `attempt` (run on `members`), with the
// failures this node records of it (the leader: every node's; a member: its own).
using OnRestart = std::function<void(int attempt, const std::vector<int>& members, const GroupDecision& decision,
                                     const std::vector<FailureRecord>& failures)>;
// Forms the group (an Error when it cannot: no leader, a member missing, refused) and runs attempts from
// `first_attempt` until the group decides the end or this node leaves.
Result<GroupEnd> run_group(const GroupSetup& setup, int first_attempt, const RunGroupAttempt& run_attempt,
                           const OnRestart& on_restart = {});

}  // namespace dlaunch
