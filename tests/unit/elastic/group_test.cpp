// The group's rules at the end of a multi-node attempt, table by table, without processes or networks.
#include "dlaunch/group.hpp"

#include <gtest/gtest.h>

namespace dlaunch {
namespace {

using Kind = GroupDecision::Kind;

GroupMember member(int id, MemberEnd end = MemberEnd::Succeeded) {
    GroupMember m;
    m.id = id;
    m.host = "node" + std::to_string(id + 1);
    m.end = end;
    if (end == MemberEnd::Lost) m.lost_why = "no heartbeat for 10 s";
    return m;
}

GroupMember failed(int id, int rank, int code) {
    GroupMember m = member(id, MemberEnd::Failed);
    FailureRecord r;
    r.rank = rank;
    r.node_rank = id;
    r.host = m.host;
    r.failure = {0, {rank, 100 + rank, {false, code}, 10}, true, false};
    m.failures.push_back(r);
    return m;
}

GroupFacts facts(std::vector<GroupMember> active, std::vector<GroupMember> spares = {}, int restarts_used = 0) {
    return {0, std::move(active), std::move(spares), restarts_used};
}

GroupPolicy policy(int min, int max, int max_restarts = 3, bool requeue = false) {
    return {{min, max}, 2, max_restarts, requeue};
}

TEST(Group, EveryMemberSucceededIsDone) {
    auto d = decide_group_attempt(facts({member(0), member(1), member(2)}), policy(3, 3));
    EXPECT_EQ(d.kind, Kind::Done);
    EXPECT_EQ(d.restarts_used, 0);
}

TEST(Group, AWorkerFailureRestartsEveryNodeAndUsesOneRestart) {
    auto f = facts({member(0, MemberEnd::Stopped), failed(1, 3, 5), member(2, MemberEnd::Stopped)});
    auto d = decide_group_attempt(f, policy(3, 3));
    EXPECT_EQ(d.kind, Kind::Restart);
    EXPECT_EQ(d.next_members, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(d.next_world_size, 6);
    EXPECT_EQ(d.restarts_used, 1);
    EXPECT_EQ(d.summary,
              "attempt 0 failed (rank 3 on node2: exit code 5); 1 of 3 restarts (--max-restarts) used: "
              "attempt 1 on 3 node(s), world size 6");
}

TEST(Group, PastTheBudgetTheGroupGivesUpWithTheRootCause) {
    auto f = facts({member(0, MemberEnd::Stopped), failed(1, 3, 5)}, {}, 1);
    auto d = decide_group_attempt(f, policy(2, 2, 1));
    EXPECT_EQ(d.kind, Kind::GiveUp);
    EXPECT_EQ(d.restarts_used, 2);
    EXPECT_NE(d.summary.find("rank 3 on node2: exit code 5"), std::string::npos) << d.summary;
    EXPECT_NE(d.summary.find("2 of 1 restarts (--max-restarts) exceeded: the job ends here"), std::string::npos)
        << d.summary;
}

TEST(Group, ALostNodeIsLeftOutWhenTheRangeAllows) {
    auto f = facts({member(0, MemberEnd::Stopped), member(1, MemberEnd::Stopped), member(2, MemberEnd::Lost)});
    auto d = decide_group_attempt(f, policy(2, 3));
    EXPECT_EQ(d.kind, Kind::Restart);
    EXPECT_EQ(d.next_members, (std::vector<int>{0, 1}));
    EXPECT_EQ(d.next_world_size, 4) << "ranks and world size recomputed for two nodes";
    EXPECT_TRUE(d.replaced.empty());
    EXPECT_NE(d.summary.find("node3 lost: no heartbeat for 10 s"), std::string::npos) << d.summary;
}

TEST(Group, ASpareReplacesALostNodeAndTheWorldSizeStays) {
    auto f =
        facts({member(0, MemberEnd::Stopped), member(1, MemberEnd::Lost), member(2, MemberEnd::Stopped)}, {member(3)});
    auto d = decide_group_attempt(f, policy(3, 3));
    EXPECT_EQ(d.kind, Kind::Restart);
    EXPECT_EQ(d.next_members, (std::vector<int>{0, 2, 3}));
    EXPECT_EQ(d.next_world_size, 6);
    EXPECT_EQ(d.replaced, (std::vector<std::pair<int, int>>{{1, 3}}));
    EXPECT_NE(d.summary.find("node4 replaces node2"), std::string::npos) << d.summary;
}

TEST(Group, SparesBeyondMaxStayIdleAndLostSparesAreNotUsed) {
    auto f =
        facts({failed(0, 0, 1), member(1, MemberEnd::Stopped)}, {member(2, MemberEnd::Lost), member(3), member(4)});
    auto d = decide_group_attempt(f, policy(2, 3));
    EXPECT_EQ(d.next_members, (std::vector<int>{0, 1, 3})) << "filled up to MAX with the first live spare";
    EXPECT_TRUE(d.replaced.empty()) << "nobody was lost: the spare adds a node, it replaces none";
}

TEST(Group, FewerThanMinLeftIsRequeuedWithTheLostNodesExcluded) {
    auto f = facts({member(0, MemberEnd::Stopped), member(1, MemberEnd::Lost), member(2, MemberEnd::Lost)});
    auto d = decide_group_attempt(f, policy(2, 3, 3, true));
    EXPECT_EQ(d.kind, Kind::Requeue);
    EXPECT_EQ(d.exclude, (std::vector<std::string>{"node2", "node3"}));
    EXPECT_NE(d.summary.find("1 node(s) left, fewer than --nnodes MIN 2: requeued without 2 node(s)"),
              std::string::npos)
        << d.summary;
}

TEST(Group, FewerThanMinLeftWithoutRequeueGivesUpAndSaysWhatWouldHelp) {
    auto f = facts({member(0, MemberEnd::Stopped), member(1, MemberEnd::Lost)});
    auto d = decide_group_attempt(f, policy(2, 2));
    EXPECT_EQ(d.kind, Kind::GiveUp);
    EXPECT_TRUE(d.exclude.empty());
    EXPECT_NE(d.summary.find("with --requeue the job would go back to Slurm's queue"), std::string::npos) << d.summary;
}

}  // namespace
}  // namespace dlaunch
