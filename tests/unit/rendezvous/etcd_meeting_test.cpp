// The pure parts of the nodes' meeting through etcd (etcd_meeting.hpp): who the leader takes into the first
// attempt, which attempt on record is the run's, and a node's place in it.
#include "dlaunch/etcd_meeting.hpp"

#include <gtest/gtest.h>

namespace dlaunch {
namespace {

using etcd::AttemptRecord;
using etcd::LiveNode;
using etcd::NodeFacts;

NodeFacts node(const std::string& id, int nproc = 2) {
    return {id, "10.0.0." + id.substr(1), nproc, "default"};
}

std::vector<LiveNode> arrived(std::initializer_list<const char*> ids) {
    std::vector<LiveNode> out;
    int64_t revision = 10;
    for (const char* id : ids) out.push_back({node(id), revision++});
    return out;
}

std::vector<std::string> ids(const std::vector<NodeFacts>& nodes) {
    std::vector<std::string> out;
    for (const NodeFacts& n : nodes) out.push_back(n.id);
    return out;
}

TEST(EtcdMeeting, TheLeaderComesFirstThenTheOthersInArrivalOrderUpToMax) {
    auto members = first_members(arrived({"n1", "n2", "n3", "n4"}), "n3", {2, 3}, false);
    ASSERT_TRUE(members);
    EXPECT_EQ(ids(*members), (std::vector<std::string>{"n3", "n1", "n2"}));
}

TEST(EtcdMeeting, TheLeaderWaitsForMaxUntilTheLastCallThenTakesMin) {
    EXPECT_FALSE(first_members(arrived({"n1"}), "n1", {2, 3}, true)) << "fewer than MIN: never";
    EXPECT_FALSE(first_members(arrived({"n1", "n2"}), "n1", {2, 3}, false)) << "MIN, before the last call";
    ASSERT_TRUE(first_members(arrived({"n1", "n2"}), "n1", {2, 3}, true));
    EXPECT_TRUE(first_members(arrived({"n1", "n2", "n3"}), "n1", {3, 3}, false)) << "MAX: at once";
}

TEST(EtcdMeeting, ALeaderWithoutItsOwnEntryDecidesNothing) {
    EXPECT_FALSE(first_members(arrived({"n1", "n2"}), "n9", {2, 2}, true));
}

TEST(EtcdMeeting, AnAttemptWithoutOneLiveMemberIsAnEarlierRunsLeftover) {
    const AttemptRecord record{0, {node("n1"), node("n2")}, "10.0.0.1", 29500, 29400, 0, {}};
    EXPECT_TRUE(attempt_is_current(record, arrived({"n5", "n2"})));
    EXPECT_FALSE(attempt_is_current(record, arrived({"n5", "n6"})));
    EXPECT_FALSE(attempt_is_current(record, {}));
}

TEST(EtcdMeeting, ANodeTakesItsRankAddressesAndSharesFromTheAttempt) {
    const AttemptRecord record{0, {node("n3", 4), node("n1", 2)}, "10.0.0.3", 29500, 29400, 0, {}};
    auto place = assignment_in(record, "n1");
    ASSERT_TRUE(place);
    EXPECT_EQ(place->node_rank, 1);
    EXPECT_EQ(place->nnodes, 2);
    EXPECT_EQ(place->master_addr, "10.0.0.3");
    EXPECT_EQ(place->master_port, 29500);
    EXPECT_EQ(place->rendezvous_port, 29400);
    EXPECT_EQ(place->node_addrs, (std::vector<std::string>{"10.0.0.3", "10.0.0.1"}));
    EXPECT_EQ(place->shares, (std::vector<NodeShare>{{4, "default"}, {2, "default"}}));
    EXPECT_FALSE(assignment_in(record, "n2")) << "not a member";
    AttemptRecord no_group = record;
    no_group.group_port = 0;
    EXPECT_FALSE(assignment_in(no_group, "n1")) << "no port to reach the leader's group at";
}

}  // namespace
}  // namespace dlaunch
