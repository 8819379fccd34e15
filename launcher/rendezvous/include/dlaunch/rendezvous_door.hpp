// Node 0's rendezvous kept open while a run with --nnodes MIN:MAX lasts (keeps_door_open()): torchrun's c10d
// scale-up, without a store besides the agents. A node that comes late says its hello as at the start and is
// held there, told every few seconds that it is; the group's leader counts the nodes held (waiting()) and,
// below MAX, stops the attempt for the nodes to meet again (decide_store_scale_up). Every member then
// connects again as a re-joiner (the attempt it met for, its node rank and address there) and node 0 answers
// them all at once with the next attempt's places: the members first, in their order, then the nodes that
// waited, up to MAX. The nodes beyond MAX stay held, as spares, until the run ends (they are told so).
//
// Served on a thread of its own with the rendezvous's bounds (kMaxPending unheard connections, kHelloBytes,
// kHelloSeconds; hosting.hpp) and at most max(64, MAX) nodes held. Node 0 stays the run's leader: the door
// ends with it, and so does the run (a lost leader ends the group's run, as without the door).
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlaunch/clock.hpp"
#include "dlaunch/fd.hpp"
#include "dlaunch/job_context.hpp"
#include "dlaunch/node_rendezvous.hpp"
#include "dlaunch/request.hpp"
#include "dlaunch/result.hpp"

namespace dlaunch {

class RendezvousDoor {
public:
    // Takes the rendezvous's listener (node 0's, the nodes met) and serves it until the door closes.
    static std::shared_ptr<RendezvousDoor> open(Fd listener, const LaunchRequest& req, const MeetingTerms& terms,
                                                const std::string& advertise);
    ~RendezvousDoor();  // closes it: the nodes held are told the run ended
    RendezvousDoor(const RendezvousDoor&) = delete;
    RendezvousDoor& operator=(const RendezvousDoor&) = delete;

    // The nodes met for `attempt` with node 0's assignment `a` (its node rank 0): the members that meet again
    // are theirs; a member of an earlier meeting that comes is told the run went on without it.
    void met(int attempt, const NodeAssignment& a);
    // How many nodes wait to be taken (`fresh`: the departed dropped now; else as last counted).
    int waiting(bool fresh);
    // After `attempt` ended for the nodes to meet again: waits until `deadline` for the members of the last
    // meeting (all but node 0 and `left_behind`) to connect again, then answers them and the nodes that waited,
    // up to --nnodes MAX, with attempt + 1's places; node 0's is returned. An Error when fewer than MIN nodes are
    // there (the ones that came are told).
    Result<Met> meet_again(const std::vector<int>& left_behind, int attempt, int restarts_used,
                           Clock::time_point deadline);
    // Tells the nodes held `why` the run will not take them, and closes the door.
    void close(const std::string& why);

    struct State;

private:
    explicit RendezvousDoor(std::shared_ptr<State> state);
    std::shared_ptr<State> state_;
    std::thread thread_;
};

// A member's side of RendezvousDoor::meet_again: connects to node 0's door at ip:port again, as the node of
// rank under.node_rank at its address in the meeting for attempt `met`, bringing `own` (its share: own_share()),
// and waits until `deadline` for its place in the next attempt.
Result<Met> rejoin_rendezvous(const LaunchRequest& req, const MeetingTerms& terms, const NodeAssignment& under, int met,
                              const NodeShare& own, const std::string& ip, int port, Clock::time_point deadline);

}  // namespace dlaunch
