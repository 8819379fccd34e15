// The group's store when the nodes met in dlaunch's own rendezvous with --nnodes MIN:MAX: node 0's door
// (rendezvous/rendezvous_door.hpp) behind group_store.hpp's seam. Node 0 counts the nodes waiting there and
// answers the nodes meeting again; the others connect to it again to meet.
#pragma once

#include <memory>

#include "dlaunch/group_store.hpp"
#include "dlaunch/node_rendezvous.hpp"

namespace dlaunch {

// Takes this node's meeting (`met`: node 0's holds the door; the others' say where it is).
std::unique_ptr<GroupStore> rendezvous_store(const LaunchRequest& req, const MeetingTerms& terms, const Met& met);

}  // namespace dlaunch
