// How the nodes of a run started by hand meet through etcd (--rdzv-backend etcd or etcd-v2; docs/etcd.md).
//
// Every agent enters the run's membership in etcd under a lease of its own (its liveness, renewed on a
// thread of its own for as long as the agent runs), and one of them takes the run's leader key. The leader
// waits for the nodes as dlaunch's c10d host does (MAX of --nnodes MIN:MAX, or MIN once the last call is
// over, until the join timeout) and publishes the first attempt: its members in node-rank order (itself
// first), the workers' master address and port and the port its group listens on. Every node reads its
// place there; from then on the group runs as after dlaunch's own rendezvous (group_run.hpp).
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dlaunch/etcd_membership.hpp"
#include "dlaunch/job_context.hpp"
#include "dlaunch/request.hpp"
#include "dlaunch/result.hpp"

namespace dlaunch {

// What a node's facts say of its run secret (DLAUNCH_RDZV_SECRET) without telling it: 16 hex digits of an
// HMAC of the run id keyed with the secret, the same on nodes with the same secret; "-" for none. An Error when
// Nettle cannot be loaded.
Result<std::string> secret_tag(const std::string& secret, const std::string& run_id);

// Why `node` cannot be in one group with `leader`, in the words of the node's side ("" when it can): it was
// started with another --nnodes, or another secret (or the leader's record does not say).
std::string misfit(const etcd::NodeFacts& node, const etcd::NodeFacts& leader);
inline bool fits(const etcd::NodeFacts& node, const etcd::NodeFacts& leader) {
    return misfit(node, leader).empty();
}

// What the leader says of the live nodes outside its attempt's `members` (ids) that do not fit it, one line
// each ("not taking the node at ADDR (ID) into run R: in its words, ..."), skipping and then adding the ids
// in `said`: a node of this version is told and leaves, one of another version would wait unheard.
std::vector<std::string> misfits_to_say(const std::vector<etcd::LiveNode>& live,
                                        const std::vector<std::string>& members, const etcd::NodeFacts& leader,
                                        const std::string& run_id, std::set<std::string>& said);

// The first attempt's members as the leader `leader` decides them from the nodes alive (in arrival order):
// itself first, then the others that fit it in arrival order, at most MAX. nullopt while it waits: fewer than
// MIN, or fewer than MAX before the last call is over (nodes that do not fit do not count).
std::optional<std::vector<etcd::NodeFacts>> first_members(const std::vector<etcd::LiveNode>& live,
                                                          const std::string& leader, NodeRange nnodes,
                                                          bool last_call_over);

// Whether an attempt on record is the run's current one: one of its members is alive. An attempt whose
// nodes are all gone is an earlier run's with the same id (killed before it removed its keys).
bool attempt_is_current(const etcd::AttemptRecord& record, const std::vector<etcd::LiveNode>& live);

// Node `self`'s place in an attempt; nullopt when the attempt does not name it.
std::optional<NodeAssignment> assignment_in(const etcd::AttemptRecord& record, const std::string& self);

// This agent's part in the run's membership: joined on make(), its lease renewed until leave() (or the end).
// The group's store when the nodes met through etcd (group/etcd_store.hpp puts it behind group_store.hpp).
class EtcdMeeting {
public:
    // A node's place in an attempt on record, and the attempt's number.
    struct Place {
        NodeAssignment assignment;
        int attempt = 0;
        int restarts_used = 0;  // of --max-restarts before it, as its leader counts them
    };
    // Connects to etcd and enters the run: an Error naming the endpoint when etcd cannot be reached, or
    // refuses (TLS, a node id taken).
    static Result<std::unique_ptr<EtcdMeeting>> make(const LaunchRequest& req, const etcd::NodeFacts& self,
                                                     const std::string& run_id);
    ~EtcdMeeting();
    EtcdMeeting(const EtcdMeeting&) = delete;
    EtcdMeeting& operator=(const EtcdMeeting&) = delete;

    // Waits for the run's first attempt (leading it when this node holds the leader key) and returns this
    // node's place in it (a late node's attempt is not 0). A node that comes while the run is under way waits, however
    // long, for an attempt that names it (the leader restarts the group to take it below --nnodes MAX; at MAX it waits
    // as a spare). An Error when too few nodes came within the join timeout, when the run ended while this node waited,
    // when the run's leader was started with another --nnodes or secret (misfit()), or when etcd fails.
    Result<Place> meet(const LaunchRequest& req);
    // After `attempt` ended for the nodes to meet again (its leader was lost, or it took nodes waiting): waits
    // for the next attempt, published by the leader (whichever live node holds the leader key, once a lost
    // one's lease is gone) with all live nodes, at most MAX, and
    // returns this node's place in it and its number. An Error when none comes within the join timeout,
    // or when it goes on without this node.
    // `left_behind`: node ranks of the attempt this node met under that the group lost; a leader publishing
    // this or a later attempt leaves them out (and does not count them as waiting), even while their leases
    // still live.
    // `restarts_used`: of --max-restarts so far, as this node counts them (the record it publishes when it leads).
    Result<Place> meet_again(const LaunchRequest& req, int attempt, int restarts_used,
                             const std::vector<int>& left_behind);
    // On the leader of the attempt this node met last: how many live nodes that fit it wait outside it, as counted
    // every second beside the lease's renewal, or (`fresh`) read from etcd now (0 when etcd does not answer). 0 on the
    // other nodes.
    int waiting(bool fresh);
    // Whether the leader of the attempt this node met last is gone from the run (its lease ended); false
    // while it lives or etcd does not answer.
    bool leader_gone();
    // Leaves the run: the lease is revoked (this node's keys go with it); the last node out removes the run's
    // keys (a node that has not read the attempt yet is still in).
    void leave();

private:
    struct State;
    explicit EtcdMeeting(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

// This node's facts for the run: its address as the others reach it (--local-addr, else the address this
// machine sends from towards etcd), its workers and role, and an id unique in the run.
Result<etcd::NodeFacts> etcd_node_facts(const LaunchRequest& req, int procs);

}  // namespace dlaunch
