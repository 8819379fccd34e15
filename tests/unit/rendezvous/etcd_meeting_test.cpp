// The pure parts of the nodes' meeting through etcd (etcd_meeting.hpp): who the leader takes into the first
// attempt (only nodes started with its --nnodes and secret), which attempt on record is the run's, and a
// node's place in it.
#include "dlaunch/etcd_meeting.hpp"

#include <gtest/gtest.h>

namespace dlaunch {
namespace {

using etcd::AttemptRecord;
using etcd::LiveNode;
using etcd::NodeFacts;

NodeFacts node(const std::string& id, int nproc = 2) {
    return {id, "10.0.0." + id.substr(1), nproc, "default", 2, 3, "-"};
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

TEST(EtcdMeeting, NodesStartedWithAnotherRangeOrSecretAreNotTakenNorCounted) {
    std::vector<LiveNode> live = arrived({"n1", "n2", "n3", "n4"});
    live[1].facts.nnodes_max = 4;                   // n2: --nnodes 2:4
    live[2].facts.secret_tag = "0123456789abcdef";  // n3: a secret, where the leader has none
    auto members = first_members(live, "n1", {2, 3}, true);
    ASSERT_TRUE(members);
    EXPECT_EQ(ids(*members), (std::vector<std::string>{"n1", "n4"}));
    EXPECT_FALSE(first_members(live, "n1", {2, 3}, false)) << "4 live nodes, but 2 that fit: not MAX";
    live.pop_back();
    EXPECT_FALSE(first_members(live, "n1", {2, 3}, true)) << "the leader alone fits: fewer than MIN";
}

TEST(EtcdMeeting, ANodeThatDoesNotFitTheLeaderIsToldWhy) {
    const NodeFacts leader = node("n1");
    NodeFacts n = node("n2");
    EXPECT_EQ(misfit(n, leader), "");
    EXPECT_TRUE(fits(n, leader));
    n.nnodes_min = 3;
    EXPECT_EQ(misfit(n, leader), "this node has --nnodes 3 and the run's leader 2:3");
    n = node("n2");
    n.secret_tag = *secret_tag("a secret of twenty chars", "job7");
    EXPECT_EQ(misfit(n, leader), "this node has a DLAUNCH_RDZV_SECRET and the run's leader none");
    EXPECT_EQ(misfit(leader, n), "the run's leader has a DLAUNCH_RDZV_SECRET and this node none");
    NodeFacts other = n;
    other.secret_tag = *secret_tag("another secret, as long", "job7");
    EXPECT_EQ(misfit(other, n), "this node's DLAUNCH_RDZV_SECRET is not the run leader's");
    NodeFacts older = node("n3");
    older.nnodes_min = older.nnodes_max = 0;
    older.secret_tag = "";
    EXPECT_EQ(misfit(n, older), "the run's leader does not say its --nnodes (another version of dlaunch)");
    EXPECT_FALSE(fits(older, leader)) << "a node that does not say is not taken";
}

TEST(EtcdMeeting, TheLeaderSaysOnceOfEachWaitingNodeThatDoesNotFitWhy) {
    std::vector<LiveNode> live = arrived({"n1", "n2", "n3", "n4"});
    live[2].facts.nnodes_min = live[2].facts.nnodes_max = 0;  // n3: another version, which says no range
    live[2].facts.secret_tag = "";
    live[3].facts.nnodes_max = 4;  // n4: --nnodes 2:4
    std::set<std::string> said;
    auto lines = misfits_to_say(live, {"n1", "n2"}, live[0].facts, "job7", said);
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0], "not taking the node at " + live[2].facts.addr +
                            " (n3) into run job7: in its words, this node does not say its --nnodes (another "
                            "version of dlaunch)");
    EXPECT_NE(lines[1].find("(n4) into run job7: in its words, this node has --nnodes 2:4 and the run's leader 2:3"),
              std::string::npos)
        << lines[1];
    EXPECT_TRUE(misfits_to_say(live, {"n1", "n2"}, live[0].facts, "job7", said).empty()) << "said once";
    EXPECT_EQ(said, (std::set<std::string>{"n3", "n4"})) << "members and nodes that fit are not said";
}

TEST(EtcdMeeting, TheSecretsTagIsTheSameForTheSameSecretAndTellsNothingOfIt) {
    const std::string secret = "s3cret-of-twenty-chars";
    const std::string tag = *secret_tag(secret, "job7");
    EXPECT_EQ(tag, *secret_tag(secret, "job7"));
    EXPECT_EQ(tag.size(), 16u);
    EXPECT_EQ(tag.find_first_not_of("0123456789abcdef"), std::string::npos);
    EXPECT_NE(tag, *secret_tag("s3cret-of-twenty-chars!", "job7"));
    EXPECT_NE(tag, *secret_tag(secret, "job8")) << "a run's tag says nothing of another run's";
    EXPECT_EQ(*secret_tag("", "job7"), "-");
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
