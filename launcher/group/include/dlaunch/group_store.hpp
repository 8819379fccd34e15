// Where a group's membership is kept besides its own channel: the one seam between the group's run loop
// (group_run.hpp) and whatever the nodes met through. Three implementations:
// - none (a null store): dlaunch's own channel is all there is (under Slurm, or after dlaunch's node
//   rendezvous); nobody waits outside the group and a lost leader ends the group's run (decide_without_leader);
// - etcd (etcd_store.hpp, over rendezvous/etcd_meeting.hpp): every node holds a lease there, nodes that came late wait
// there, and
//   the nodes meet again there under a new leader or to take waiting nodes;
// - node 0's rendezvous door (rendezvous_store.hpp, over rendezvous/rendezvous_door.hpp): by hand with
//   --nnodes MIN:MAX, nodes that came late wait at node 0's rendezvous and the nodes meet there again to take
//   them; node 0 leads for the whole run.
// Neither the decisions (elastic/) nor the run loop know which: the loop asks the store, and carries out what
// elastic/ decides from the answers.
#pragma once

#include <algorithm>
#include <vector>

#include "dlaunch/job_context.hpp"
#include "dlaunch/request.hpp"
#include "dlaunch/result.hpp"

namespace dlaunch {

// How long the nodes that met in a store wait for each other to form the group (and to meet again): every node
// has met before, so a leader lost meanwhile is not waited for until the join timeout.
inline double store_join_seconds(const LaunchRequest& req) {
    return std::min(req.rendezvous_timeout_seconds, std::max(30.0, req.heartbeat_timeout_seconds));
}

class GroupStore {
public:
    virtual ~GroupStore() = default;

    // On the leader of the attempt this node met last: how many live nodes wait in the store to join the
    // group (`fresh`: read now, else as last counted); 0 on the other nodes, or when the store does not answer.
    virtual int waiting(bool fresh) = 0;
    // Whether the group's leader is gone from the store (false while it lives or the store does not answer).
    virtual bool leader_gone() = 0;
    // Whether the nodes meet again under another leader when theirs is lost (etcd), or end (node 0's door).
    virtual bool replaces_leader() const = 0;

    // A node's place in the attempt the nodes met again for, and that attempt's number.
    struct Place {
        NodeAssignment assignment;
        int attempt = 0;
        int restarts_used = 0;  // of --max-restarts before it, as its leader counts them
    };
    // After `attempt` ended with GroupDecision::Kind::MeetAgain: waits for the next attempt, published by
    // whoever leads now, with `left_behind` (node ranks of the attempt this node met under) left out for the
    // rest of the run. An Error when none comes within the join timeout, or when it goes on without this node.
    virtual Result<Place> meet_again(const LaunchRequest& req, int attempt, int restarts_used,
                                     const std::vector<int>& left_behind) = 0;
    // Leaves the store (this node's entries go); the last node out removes the run's.
    virtual void leave() = 0;
};

}  // namespace dlaunch
