// An attempt's context with the agent's node lists lent to it: the copy has them, the agent has them back.
#include "dlaunch/lent_context.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dlaunch {
namespace {

const std::vector<std::string> kAddrs{"10.0.0.1", "10.0.0.2", "10.0.0.3"};
const std::vector<NodeShare> kShares{{2, "trainer"}, {2, "trainer"}, {4, "trainer"}};

JobContext met_by_hand() {
    JobContext c;
    c.run_id = "job";
    c.restart_count = 1;
    c.assignment = NodeAssignment{3, 1, "10.0.0.1", 29500, kAddrs, 29400, kShares};
    return c;
}

TEST(LentContext, TheAttemptHasTheListsWhileItLivesAndTheAgentHasThemBackAfter) {
    JobContext own = met_by_hand();
    const std::string* first = &own.assignment->node_addrs[0];
    {
        LentContext lent(own, 3, false);
        JobContext& c = lent.get();
        EXPECT_EQ(c.run_id, "job");
        EXPECT_EQ(c.restart_count, 1);
        ASSERT_TRUE(c.assignment);
        EXPECT_EQ(c.assignment->node_addrs, kAddrs);
        EXPECT_EQ(&c.assignment->node_addrs[0], first);  // moved, not copied
        EXPECT_EQ(c.assignment->shares, kShares);
        EXPECT_EQ(c.assignment->master_port, 29500);
        EXPECT_TRUE(own.assignment->node_addrs.empty());  // lent out
        c.restart_count = 2;
        c.assignment->node_rank = 2;
    }
    EXPECT_EQ(own.assignment->node_addrs, kAddrs);
    EXPECT_EQ(&own.assignment->node_addrs[0], first);
    EXPECT_EQ(own.assignment->shares, kShares);
    EXPECT_EQ(own.restart_count, 1);  // what the attempt changed in its copy stays there
    EXPECT_EQ(own.assignment->node_rank, 1);
}

TEST(LentContext, NodesAlikeLendNoSharesAndAListWithoutAnEntryPerNodeStaysWithTheAgent) {
    JobContext own = met_by_hand();
    own.assignment->node_addrs.pop_back();  // not one per node: the attempt gets none (as group_plan's copy did)
    {
        LentContext lent(own, 3, true);
        JobContext& c = lent.get();
        EXPECT_TRUE(c.assignment->shares.empty());  // every node like this one
        EXPECT_TRUE(c.assignment->node_addrs.empty());
        EXPECT_TRUE(own.assignment->shares.empty());
    }
    EXPECT_EQ(own.assignment->shares, kShares);
    EXPECT_EQ(own.assignment->node_addrs, (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));
}

TEST(LentContext, UnderSlurmTheStepsNodesAddressesAndSharesAreLent) {
    JobContext own;
    own.scheduler = SchedulerInfo{};
    own.scheduler->nodes = {"n1", "n2", "n3"};
    own.scheduler->rank = 2;
    own.node_addrs = kAddrs;
    own.node_shares = kShares;
    {
        LentContext lent(own, 3, false);
        JobContext& c = lent.get();
        EXPECT_EQ(c.scheduler->nodes, (std::vector<std::string>{"n1", "n2", "n3"}));
        EXPECT_EQ(c.scheduler->rank, 2);
        EXPECT_EQ(c.node_addrs, kAddrs);
        EXPECT_EQ(c.node_shares, kShares);
        EXPECT_TRUE(own.scheduler->nodes.empty());
        c.node_addrs.pop_back();  // what the attempt does to a lent list, the agent gets back
    }
    EXPECT_EQ(own.scheduler->nodes, (std::vector<std::string>{"n1", "n2", "n3"}));
    EXPECT_EQ(own.node_addrs, (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));
    EXPECT_EQ(own.node_shares, kShares);
    {
        LentContext lent(own, 3, true);  // alike, and one list short: neither goes to the attempt
        EXPECT_TRUE(lent.get().node_shares.empty());
        EXPECT_TRUE(lent.get().node_addrs.empty());
        EXPECT_EQ(lent.get().scheduler->nodes.size(), 3U);
    }
    EXPECT_EQ(own.node_shares, kShares);
    EXPECT_EQ(own.node_addrs.size(), 2U);
}

TEST(LentContext, TwoAttemptsInARowSeeTheSameLists) {
    JobContext own = met_by_hand();
    for (int attempt = 1; attempt <= 2; ++attempt) {
        LentContext lent(own, 3, false);
        EXPECT_EQ(lent.get().assignment->node_addrs, kAddrs) << attempt;
        EXPECT_EQ(lent.get().assignment->shares, kShares) << attempt;
    }
    EXPECT_EQ(own.assignment->node_addrs, kAddrs);
}

}  // namespace
}  // namespace dlaunch
