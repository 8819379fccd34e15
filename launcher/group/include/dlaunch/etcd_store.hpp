// The group's store when the nodes met through etcd: this node's part in the run's membership
// (rendezvous/etcd_meeting.hpp) behind group_store.hpp's seam.
#pragma once

#include <memory>

#include "dlaunch/etcd_meeting.hpp"
#include "dlaunch/group_store.hpp"

namespace dlaunch {

// Takes the meeting (joined, its first attempt met); leave() or the store's end leaves the run.
std::unique_ptr<GroupStore> etcd_store(std::unique_ptr<EtcdMeeting> meeting);

}  // namespace dlaunch
