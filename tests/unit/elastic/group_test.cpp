// The group's rules at the end of a multi-node attempt, table by table, without processes or networks.
#include "dlaunch/group.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <map>

#include "dlaunch/exit_codes.hpp"

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
    return {0, std::move(active), std::move(spares), restarts_used, {}};
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

TEST(Group, EveryNodeWaitsTheRestartBackoffBeforeTheNextAttempt) {
    auto f = facts({member(0, MemberEnd::Stopped), failed(1, 3, 5)}, {}, 2);
    GroupPolicy p = policy(2, 2, 5);
    p.backoff = {1, 30};
    auto d = decide_group_attempt(f, p);
    EXPECT_EQ(d.kind, Kind::Restart);
    EXPECT_EQ(d.wait_seconds, 4) << "restart 3: 1, 2, 4 s";
    EXPECT_NE(d.summary.find("attempt 1 on 2 node(s), world size 4; starts in 4 s (--restart-backoff)"),
              std::string::npos)
        << d.summary;
}

TEST(Group, PastTheBudgetTheGroupGivesUpWithTheRootCause) {
    auto f = facts({member(0, MemberEnd::Stopped), failed(1, 3, 5)}, {}, 1);
    auto d = decide_group_attempt(f, policy(2, 2, 1));
    EXPECT_EQ(d.kind, Kind::GiveUp);
    EXPECT_EQ(d.restarts_used, 2);
    EXPECT_EQ(d.exit_code, 5) << "the root cause rank's code, as one agent would end";
    EXPECT_NE(d.summary.find("rank 3 on node2: exit code 5"), std::string::npos) << d.summary;
    EXPECT_NE(d.summary.find("no restart left (--max-restarts 1): the job ends here"), std::string::npos) << d.summary;
}

TEST(Group, TheRootCauseIsTheEarliestFailureOfAllNodes) {
    // Rank 3 crashed at t=10; its peers on node1 lost their connection to it at t=11 and failed too.
    GroupMember peer = failed(0, 1, 1);
    peer.failures[0].failure.exit.time = 11;
    auto d = decide_group_attempt(facts({peer, failed(1, 3, 5)}, {}, 3), policy(2, 2, 3));
    EXPECT_EQ(d.exit_code, 5);
    EXPECT_NE(d.summary.find("(rank 3 on node2: exit code 5)"), std::string::npos) << d.summary;
}

TEST(Group, TheAttemptsFailuresOfAllNodesInTimeOrderWithOneRootCause) {
    GroupMember peer = failed(0, 1, 1);
    peer.failures[0].failure.exit.time = 11;
    auto all = group_failures(facts({peer, failed(1, 3, 5), member(2, MemberEnd::Stopped)}));
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0].rank, 3);
    EXPECT_TRUE(all[0].failure.root_cause);
    EXPECT_EQ(all[1].rank, 1);
    EXPECT_FALSE(all[1].failure.root_cause) << "node1 called its own first failure the root cause; the group does not";
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

TEST(Group, HundredsOfLostNodesAreNamedUpToEightAndCounted) {
    std::vector<GroupMember> active{member(0, MemberEnd::Stopped)};
    for (int id = 1; id <= 850; ++id) active.push_back(member(id, MemberEnd::Lost));
    auto d = decide_group_attempt(facts(active), policy(2, 1024));
    EXPECT_EQ(d.kind, Kind::GiveUp);
    EXPECT_NE(d.summary.find("node2, node3, node4, node5, node6, node7, node8, node9 and 842 more lost: no heartbeat"),
              std::string::npos)
        << d.summary;
    EXPECT_LT(d.summary.size(), 400u) << d.summary;
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

TEST(GroupScaleUp, ANodeWaitingBelowMaxIsTakenAtOnceWithoutUsingARestart) {
    auto f = facts({member(0), member(1)}, {member(2)}, 1);
    f.attempt = 3;
    auto d = decide_scale_up(f, policy(1, 3, 2));
    ASSERT_TRUE(d);
    EXPECT_EQ(d->kind, Kind::Restart);
    EXPECT_EQ(d->next_members, (std::vector<int>{0, 1, 2})) << "the members in their order, then the newcomer";
    EXPECT_EQ(d->next_world_size, 6);
    EXPECT_EQ(d->restarts_used, 1) << "a membership change is no retry (torchrun)";
    EXPECT_EQ(d->wait_seconds, 0);
    EXPECT_TRUE(d->replaced.empty());
    EXPECT_EQ(d->summary,
              "attempt 3: node3 waits to join, below --nnodes MAX 3 (a membership change: no restart of "
              "--max-restarts used): attempt 4 on 3 node(s), world size 6");
}

TEST(GroupScaleUp, WaitingNodesAreTakenInArrivalOrderUpToMaxAndLostOnesNever) {
    auto f = facts({member(0)}, {member(5, MemberEnd::Lost), member(4), member(3), member(2)});
    auto d = decide_scale_up(f, policy(1, 3));
    ASSERT_TRUE(d);
    EXPECT_EQ(d->next_members, (std::vector<int>{0, 4, 3}));
    EXPECT_NE(d->summary.find("attempt 0: node5, node4 wait to join"), std::string::npos)
        << d->summary << " (member 4 is node5; the lost member 5, node6, is not named)";
}

TEST(GroupScaleUp, NothingToTakeAtMaxOrWithNobodyAliveWaiting) {
    EXPECT_FALSE(decide_scale_up(facts({member(0), member(1)}, {member(2)}), policy(1, 2))) << "already MAX";
    EXPECT_FALSE(decide_scale_up(facts({member(0)}, {}), policy(1, 2))) << "nobody waits";
    EXPECT_FALSE(decide_scale_up(facts({member(0)}, {member(1, MemberEnd::Lost)}), policy(1, 2)))
        << "the one waiting died";
}

TEST(GroupScaleUp, NodesOfDifferentSizesCountTheirOwnWorkers) {
    GroupPolicy p = policy(1, 3);
    p.member_procs = {4, 1, 2};
    auto d = decide_scale_up(facts({member(0)}, {member(2)}), p);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->next_world_size, 6);
}

TEST(GroupScaleUp, NodesWaitingInTheStoreMakeTheNodesMeetAgainWithoutUsingARestart) {
    auto f = facts({member(0), member(1)}, {}, 1);
    f.attempt = 2;
    auto d = decide_store_scale_up(f, policy(2, 4), 3);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->kind, Kind::MeetAgain);
    EXPECT_EQ(d->restarts_used, 1) << "a membership change is no retry (torchrun)";
    EXPECT_EQ(d->summary,
              "attempt 2: 3 nodes wait to join, below --nnodes MAX 4 (a membership change: no restart of "
              "--max-restarts used): the nodes meet again, attempt 3 on 4 node(s)");
    EXPECT_FALSE(decide_store_scale_up(facts({member(0), member(1)}), policy(1, 2), 1)) << "already MAX";
    EXPECT_FALSE(decide_store_scale_up(facts({member(0), member(1)}, {member(2)}), policy(1, 3), 1))
        << "node 2 left out by the health gate is still on record: MAX already";
    EXPECT_TRUE(decide_store_scale_up(facts({member(0), member(1)}, {member(2, MemberEnd::Lost)}), policy(1, 3), 1))
        << "a lost one makes room";
    EXPECT_FALSE(decide_store_scale_up(facts({member(0)}), policy(1, 2), 0)) << "nobody waits";
}

TEST(GroupScaleUp, AnAttemptStoppedToTakeWaitingNodesMeetsAgainUnlessItEndedOnItsOwn) {
    auto scale_up = *decide_store_scale_up(facts({member(0), member(1)}), policy(1, 3), 1);
    auto stopped = facts({member(0, MemberEnd::Stopped), member(1, MemberEnd::Stopped)});
    EXPECT_EQ(decide_after_scale_up(stopped, policy(1, 3), scale_up), scale_up);
    auto done = facts({member(0), member(1)});
    EXPECT_EQ(decide_after_scale_up(done, policy(1, 3), scale_up).kind, Kind::Done) << "finished before the stop";
    auto failed_first = facts({failed(0, 0, 1), member(1, MemberEnd::Stopped)});
    auto d = decide_after_scale_up(failed_first, policy(1, 3, 2), scale_up);
    EXPECT_EQ(d.kind, Kind::Restart) << "a worker failed: the attempt failed, and uses a restart";
    EXPECT_EQ(d.restarts_used, 1);
}

TEST(GroupScaleUp, ALostMemberWithASpareWaitingInTheStoreMeetsAgainWithTheSpare) {
    auto f = facts({member(0, MemberEnd::Stopped), member(1, MemberEnd::Lost)});
    auto d = decide_with_waiting_nodes(f, policy(2, 2, 1), 1);
    EXPECT_EQ(d.kind, Kind::MeetAgain) << d.summary;
    EXPECT_EQ(d.restarts_used, 1) << "the loss is a failure: it uses its restart";
    EXPECT_EQ(d.left_behind, std::vector<int>{1});
    EXPECT_EQ(d.summary,
              "attempt 0 failed (node2 lost: no heartbeat for 10 s); 1 of 1 restarts (--max-restarts) used; 1 node "
              "waits to join: "
              "the nodes meet again, attempt 1 on 2 node(s)");
    EXPECT_EQ(decide_with_waiting_nodes(f, policy(2, 2, 1), 0).kind, Kind::GiveUp) << "nobody waits: below MIN";
    EXPECT_EQ(decide_with_waiting_nodes(f, policy(2, 2, 0), 1).kind, Kind::GiveUp) << "past the budget";
    GroupPolicy backoff = policy(2, 2, 1);
    backoff.backoff = RestartBackoff{2, 10};
    EXPECT_EQ(decide_with_waiting_nodes(f, backoff, 1).wait_seconds, 2) << "--restart-backoff, as for any restart";
    auto restart = facts({failed(0, 0, 1), member(1, MemberEnd::Stopped)});
    EXPECT_EQ(decide_with_waiting_nodes(restart, policy(2, 2, 1), 1).kind, Kind::Restart) << "at MAX already";
    EXPECT_EQ(decide_with_waiting_nodes(restart, policy(2, 3, 1), 1).kind, Kind::MeetAgain) << "room for one";
    auto done = facts({member(0), member(1)});
    EXPECT_EQ(decide_with_waiting_nodes(done, policy(2, 3, 1), 1).kind, Kind::Done);
    auto gated = facts({member(0, MemberEnd::Stopped), member(1, MemberEnd::Lost)}, {member(2)});
    auto g = decide_with_waiting_nodes(gated, policy(3, 3, 1), 1);
    EXPECT_EQ(g.kind, Kind::MeetAgain) << "the node the health gate left out is live and on record: 1 + 1 + 1 = MIN";
    EXPECT_NE(g.summary.find("attempt 1 on 3 node(s)"), std::string::npos) << g.summary;
}

TEST(Group, FewerThanMinLeftIsRequeuedWithTheLostNodesExcluded) {
    auto f = facts({member(0, MemberEnd::Stopped), member(1, MemberEnd::Lost), member(2, MemberEnd::Lost)});
    auto d = decide_group_attempt(f, policy(2, 3, 3, true));
    EXPECT_EQ(d.kind, Kind::Requeue);
    EXPECT_EQ(d.exclude, (std::vector<std::string>{"node2", "node3"}));
    EXPECT_NE(d.summary.find("1 node(s) left, fewer than --nnodes MIN 2: requeued without node2, node3"),
              std::string::npos)
        << d.summary;
}

TEST(Group, FewerThanMinLeftWithoutRequeueGivesUpAndSaysWhatWouldHelp) {
    auto f = facts({member(0, MemberEnd::Stopped), member(1, MemberEnd::Lost)});
    auto d = decide_group_attempt(f, policy(2, 2));
    EXPECT_EQ(d.kind, Kind::GiveUp);
    EXPECT_EQ(d.exit_code, exit_code::kGroupFailure) << "a lost node: the group could not go on";
    EXPECT_TRUE(d.exclude.empty());
    EXPECT_NE(d.summary.find("with --requeue the job would go back to Slurm's queue"), std::string::npos) << d.summary;
}

// Under --requeue: the group's decision as the job's ledger and the job see it.

AttemptFacts leader_facts(int attempt, std::vector<AttemptRecord> ledger = {}) {
    AttemptFacts f;
    f.attempt = attempt;
    f.slurm_restart = 0;
    f.run_id = f.job_id = "812";
    f.host = "node1";
    f.nnodes = 2;
    f.world_size = 4;
    f.first = true;
    f.end = NodeEnd::Failed;
    f.failures = failed(1, 3, 5).failures;
    f.failures[0].failure.attempt = attempt;
    f.ledger = std::move(ledger);
    return f;
}

TEST(GroupUnderRequeue, TheLeaderRecordsARestartAndDoesNothingElse) {
    auto g = decide_group_attempt(facts({member(0, MemberEnd::Stopped), failed(1, 3, 5)}), policy(2, 2, 3, true));
    ASSERT_EQ(g.kind, Kind::Restart);
    AttemptFacts f = leader_facts(0);
    f.exit_code = g.exit_code;
    auto d = decide_group_end(g, f, 3);
    ASSERT_TRUE(d.record);
    EXPECT_EQ(d.record->attempt, 0);
    EXPECT_EQ(d.record->end, AttemptEnd::Failed);
    EXPECT_EQ(d.record->detail, "rank 3 on node2: exit code 5");
    EXPECT_EQ(d.record->exit_code, 5);
    EXPECT_FALSE(d.record->final);
    EXPECT_TRUE(d.record->restarted) << "the next attempt begins in the allocation";
    EXPECT_EQ(d.record->failures.size(), 1u);
    EXPECT_FALSE(d.requeue);
    EXPECT_FALSE(d.final_summary);
    f.first = false;
    EXPECT_FALSE(decide_group_end(g, f, 3).record) << "a member has nothing to record: the leader has it all";
}

TEST(GroupUnderRequeue, FewerThanMinLeftRequeuesWithoutTheLostNodes) {
    auto g =
        decide_group_attempt(facts({member(0, MemberEnd::Stopped), member(1, MemberEnd::Lost)}), policy(2, 2, 3, true));
    ASSERT_EQ(g.kind, Kind::Requeue);
    AttemptFacts f = leader_facts(1);
    f.failures.clear();
    auto d = decide_group_end(g, f, 3);
    ASSERT_TRUE(d.record);
    EXPECT_EQ(d.record->detail, "node2 lost: no heartbeat for 10 s");
    EXPECT_FALSE(d.record->final);
    EXPECT_EQ(d.requeue, "fewer nodes left than --nnodes MIN");
    EXPECT_EQ(d.exclude, (std::vector<std::string>{"node2"}));
    EXPECT_EQ(d.exit_code_if_not_requeued, exit_code::kGroupFailure);
    ASSERT_TRUE(d.final_summary) << "if slurm_requeue fails, the job ends: its summary is ready";
    EXPECT_EQ(d.final_summary->end_cause, "attempt 1: node2 lost: no heartbeat for 10 s");
    f.first = false;
    auto member_end = decide_group_end(g, f, 3);
    EXPECT_FALSE(member_end.requeue) << "node 0 requeues";
    EXPECT_EQ(member_end.exit_code, 0);
}

TEST(GroupUnderRequeue, ARequeueExcludesEveryNodeLostInTheRunAndLostSpares) {
    GroupAttempt a(2, {member(0), member(1)}, {member(3)}, 1, {"node3"});  // node3 was lost in attempt 1
    a.lost(3, "connection closed");                                        // the spare node4 too
    a.lost(1, "no heartbeat for 10 s");
    a.ended(0, MemberEnd::Stopped, {});
    ASSERT_TRUE(a.complete());
    auto g = decide_group_attempt(a.facts(), policy(2, 3, 3, true));
    ASSERT_EQ(g.kind, Kind::Requeue);
    EXPECT_EQ(g.exclude, (std::vector<std::string>{"node3", "node2", "node4"}));
    EXPECT_NE(g.summary.find("requeued without node3, node2, node4"), std::string::npos) << g.summary;
}

TEST(GroupUnderRequeue, GivingUpEndsTheJobWithEveryAttemptOfTheLedger) {
    auto g =
        decide_group_attempt(facts({member(0, MemberEnd::Stopped), failed(1, 3, 5)}, {}, 1), policy(2, 2, 1, true));
    ASSERT_EQ(g.kind, Kind::GiveUp);
    AttemptRecord earlier;
    earlier.attempt = 0;
    earlier.end = AttemptEnd::Failed;
    earlier.failures = failed(1, 2, 7).failures;
    earlier.failures[0].failure.attempt = 0;
    AttemptFacts f = leader_facts(1, {earlier});
    f.exit_code = g.exit_code;
    auto d = decide_group_end(g, f, 1);
    ASSERT_TRUE(d.record);
    EXPECT_TRUE(d.record->final);
    ASSERT_TRUE(d.final_summary);
    EXPECT_EQ(d.final_summary->failures.size(), 2u) << "both attempts";
    EXPECT_EQ(d.final_summary->restarts, 1);
    EXPECT_EQ(d.exit_code, 5) << "the last attempt's root cause";
    EXPECT_FALSE(d.requeue);
}

TEST(GroupUnderRequeue, ALostNodeThatEndsTheJobIsItsRootCauseWithItsCode) {
    // Attempt 0: a crash (restarted); attempt 1: node2 lost, the budget spent: the job ends on the loss.
    auto g = decide_group_attempt(facts({member(0, MemberEnd::Stopped), member(1, MemberEnd::Lost)}, {}, 1),
                                  policy(2, 2, 1, true));
    ASSERT_EQ(g.kind, Kind::GiveUp);
    AttemptRecord earlier;
    earlier.attempt = 0;
    earlier.end = AttemptEnd::Failed;
    earlier.failures = failed(1, 2, 7).failures;
    earlier.failures[0].failure.attempt = 0;
    AttemptFacts f = leader_facts(1, {earlier});
    f.failures[0].failure.root_cause = false;  // node 0's rank, stopped by the group: no root cause in attempt 1
    f.failures[0].failure.stopped_by_us = true;
    auto d = decide_group_end(g, f, 1);
    ASSERT_TRUE(d.final_summary);
    EXPECT_EQ(d.exit_code, exit_code::kGroupFailure) << "a lost node's code, not the earlier crash's";
    EXPECT_EQ(d.final_summary->end_cause, "attempt 1: node2 lost: no heartbeat for 10 s");
    const std::string text = render_failure_summary(*d.final_summary);
    EXPECT_NE(text.find("root cause: attempt 1: node2 lost: no heartbeat for 10 s"), std::string::npos) << text;
    EXPECT_NE(text.find("attempt 0: rank 2 (local 2): exit code 7"), std::string::npos) << text;
    EXPECT_NE(text.find("exit code: 69"), std::string::npos) << text;
    EXPECT_TRUE(failure_summary_json(*d.final_summary)["root_cause"].is_null());
}

// The leader's account of an attempt while it ends.

TEST(GroupAttempt, TheFirstFailureStopsTheOthersOnceAndTheFactsCompleteWhenAllEnded) {
    GroupAttempt a(0, {member(0), member(1), member(2)}, {}, 0);
    EXPECT_EQ(a.ended(0, MemberEnd::Succeeded, {}), "") << "a success stops nobody";
    EXPECT_FALSE(a.complete());
    EXPECT_EQ(a.ended(1, MemberEnd::Failed, failed(1, 3, 5).failures), "rank 3 on node2: exit code 5");
    EXPECT_TRUE(a.stopping());
    EXPECT_EQ(a.lost(2, "connection closed"), "") << "the stop was sent already";
    EXPECT_TRUE(a.complete());
    EXPECT_EQ(a.facts().active[2].end, MemberEnd::Lost);
    auto d = decide_group_attempt(a.facts(), policy(2, 3));
    EXPECT_EQ(d.kind, Kind::Restart);
    EXPECT_EQ(d.next_members, (std::vector<int>{0, 1}));
}

TEST(GroupAttempt, AFailureToldAsItHappensStopsTheOthersBeforeItsNodeEnded) {
    GroupAttempt a(0, {member(0), member(1), member(2)}, {}, 0);
    EXPECT_EQ(a.failing(1, "rank 3 on node2: exit code 5"), "rank 3 on node2: exit code 5");
    EXPECT_FALSE(a.complete()) << "node2's workers are still stopping";
    EXPECT_EQ(a.failing(2, "rank 4 on node3: exit code 1"), "") << "the others are being stopped already";
    EXPECT_EQ(a.ended(1, MemberEnd::Failed, failed(1, 3, 5).failures), "") << "its end stops nobody twice";
    EXPECT_EQ(a.failing(7, "rank 9 on node8: exit code 1"), "") << "not a member of the attempt";
}

TEST(GroupAttempt, ALossStopsTheOthersAndAClosedConnectionAfterItsEndIsNoLoss) {
    GroupAttempt a(1, {member(0), member(1), member(2)}, {member(3)}, 1);
    EXPECT_EQ(a.ended(2, MemberEnd::Stopped, {}), "");
    EXPECT_EQ(a.lost(2, "connection closed"), "") << "it ended first";
    EXPECT_EQ(a.facts().active[2].end, MemberEnd::Stopped);
    EXPECT_EQ(a.lost(1, "no heartbeat for 10 s"), "node2 lost: no heartbeat for 10 s");
    EXPECT_EQ(a.ended(1, MemberEnd::Failed, {}), "") << "a lost member's late words change nothing";
    EXPECT_EQ(a.lost(3, "connection closed"), "") << "a lost spare stops nobody";
    EXPECT_EQ(a.facts().spares[0].end, MemberEnd::Lost);
    EXPECT_FALSE(a.complete());
    a.stop_overdue("did not end within 35 s of the stop");
    EXPECT_TRUE(a.complete());
    EXPECT_EQ(a.facts().active[0].end, MemberEnd::Lost);
    EXPECT_EQ(a.facts().active[0].lost_why, "did not end within 35 s of the stop");
}

TEST(GroupAttempt, MembersNotOfTheAttemptChangeNothing) {
    GroupAttempt a(0, {member(0), member(1)}, {}, 0);
    EXPECT_EQ(a.ended(7, MemberEnd::Failed, {}), "");
    EXPECT_EQ(a.lost(7, "connection closed"), "");
    EXPECT_FALSE(a.stopping());
    EXPECT_EQ(a.ended(0, MemberEnd::Succeeded, {}), "");
    EXPECT_EQ(a.ended(1, MemberEnd::Succeeded, {}), "");
    EXPECT_TRUE(a.complete());
    EXPECT_EQ(decide_group_attempt(a.facts(), policy(2, 2)).kind, Kind::Done);
}

TEST(GroupAttempt, MembersAreFoundByTheirIdsWhereverTheyStandInTheLists) {
    GroupAttempt a(3, {member(9), member(2), member(5)}, {member(7)}, 0);  // ids out of order, with gaps
    EXPECT_EQ(a.ended(-1, MemberEnd::Failed, {}), "") << "no member has a negative id";
    EXPECT_EQ(a.lost(1 << 30, "connection closed"), "") << "nor one past every id";
    EXPECT_EQ(a.ended(2, MemberEnd::Succeeded, {}), "");
    EXPECT_EQ(a.lost(7, "connection closed"), "") << "a spare";
    EXPECT_EQ(a.facts().spares[0].end, MemberEnd::Lost);
    EXPECT_TRUE(a.any_ended());
    EXPECT_EQ(a.ended(5, MemberEnd::Failed, failed(5, 3, 5).failures), "rank 3 on node6: exit code 5");
    EXPECT_EQ(a.facts().active[2].end, MemberEnd::Failed);
    EXPECT_FALSE(a.complete());
    EXPECT_EQ(a.ended(9, MemberEnd::Stopped, {}), "");
    EXPECT_EQ(a.ended(9, MemberEnd::Failed, {}), "") << "once ended, a member stays as it ended";
    EXPECT_EQ(a.facts().active[0].end, MemberEnd::Stopped);
    EXPECT_TRUE(a.complete());
}

TEST(GroupSignals, BetweenAttemptsTheWarningLeavesAsCheckpointedAStopAsAStop) {
    RunOutcome o;
    o.failures = failed(1, 3, 5).failures;  // the attempt that just ended
    leave_between_attempts(o, SIGUSR1, SIGUSR1);
    EXPECT_TRUE(o.checkpointed) << "its workers' last checkpoint stands: node 0 requeues";
    EXPECT_EQ(o.stop_signal, 0);
    EXPECT_EQ(o.exit_code, 0);
    EXPECT_EQ(o.failures.size(), 1u);
    leave_between_attempts(o, SIGTERM, SIGUSR1);
    EXPECT_FALSE(o.checkpointed);
    EXPECT_EQ(o.stop_signal, SIGTERM);
    EXPECT_EQ(o.exit_code, 143);
    leave_between_attempts(o, SIGTERM, SIGTERM);
    EXPECT_FALSE(o.checkpointed) << "a warning signal that is a stop signal stops";
}

// The leader (node 0) lost: the group cannot go on without it.

LeaderLoss leader_lost(int member, bool silent = true, int restarts_used = 0) {
    return {1,      member,       {0, 1, 2}, "node1", silent ? "no heartbeat for 10 s" : "connection closed",
            silent, restarts_used};
}

TEST(LeaderLost, WithoutRequeueEveryMembersPartEnds) {
    auto d = decide_without_leader(leader_lost(1), policy(2, 3));
    EXPECT_EQ(d.decision.kind, Kind::GiveUp);
    EXPECT_EQ(d.decision.exit_code, exit_code::kGroupFailure);
    EXPECT_EQ(d.decision.summary,
              "the group's leader on node1 is lost (no heartbeat for 10 s); this node's part of "
              "the job ends");
    EXPECT_FALSE(d.records_here) << "no ledger without --requeue";
}

TEST(LeaderLost, WhenTheStoreElectsAnotherLeaderTheNodesLeftMeetAgain) {
    GroupPolicy p = policy(2, 3);
    p.leader_replaceable = true;
    auto d = decide_without_leader(leader_lost(1), p);
    EXPECT_EQ(d.decision.kind, Kind::MeetAgain);
    EXPECT_EQ(d.decision.restarts_used, 1);
    EXPECT_EQ(d.decision.summary,
              "attempt 1 failed (node1 lost: no heartbeat for 10 s); 1 of 3 restarts (--max-restarts) used; the "
              "nodes left meet again under a new leader");
    EXPECT_FALSE(d.records_here);
}

TEST(LeaderLost, TheNodesLeftMeetAgainOnlyWithinTheBudgetAndWithMinNodes) {
    GroupPolicy p = policy(2, 3);
    p.leader_replaceable = true;
    auto spent = decide_without_leader(leader_lost(1, true, 3), p);
    EXPECT_EQ(spent.decision.kind, Kind::GiveUp);
    EXPECT_EQ(spent.decision.exit_code, exit_code::kGroupFailure);
    EXPECT_NE(spent.decision.summary.find("no restart left (--max-restarts 3): the job ends here"), std::string::npos)
        << spent.decision.summary;
    p.nnodes = {3, 3};
    auto few = decide_without_leader(leader_lost(1), p);
    EXPECT_EQ(few.decision.kind, Kind::GiveUp);
    EXPECT_NE(few.decision.summary.find("2 node(s) left, fewer than --nnodes MIN (3): the job ends here"),
              std::string::npos)
        << few.decision.summary;
}

TEST(LeaderLost, ANodeTheLeaderRefusedEndsItsPartWhateverTheStoreOrRequeue) {
    for (bool requeue : {false, true}) {
        GroupPolicy p = policy(2, 3, 3, requeue);
        p.leader_replaceable = !requeue;
        LeaderLoss l = leader_lost(1, false);
        l.refused = true;
        l.why = "wrong secret";
        auto d = decide_without_leader(l, p);
        EXPECT_EQ(d.decision.kind, Kind::GiveUp);
        EXPECT_FALSE(d.records_here);
        EXPECT_EQ(d.decision.summary,
                  "the group's leader on node1 refused this node (wrong secret); this node's part of the job ends");
    }
}

TEST(LeaderLost, UnderRequeueTheSuccessorRequeuesWithoutASilentLeader) {
    auto d = decide_without_leader(leader_lost(1), policy(2, 3, 3, true));
    ASSERT_EQ(d.decision.kind, Kind::Requeue);
    EXPECT_TRUE(d.records_here) << "member 1 is the first after node 0";
    EXPECT_EQ(d.decision.exclude, (std::vector<std::string>{"node1"}));
    EXPECT_EQ(d.decision.summary,
              "attempt 1 failed (node1 lost: no heartbeat for 10 s); 1 of 3 restarts "
              "(--max-restarts) used; the group cannot go on without its leader: requeued "
              "without node1");
    EXPECT_FALSE(decide_without_leader(leader_lost(2), policy(2, 3, 3, true)).records_here)
        << "only one member requeues";
    AttemptFacts f = leader_facts(1);
    auto end = decide_group_end(d.decision, f, 3);
    ASSERT_TRUE(end.record);
    EXPECT_EQ(end.record->detail, "node1 lost: no heartbeat for 10 s");
    EXPECT_EQ(end.requeue, "the group's leader is lost");
    EXPECT_EQ(end.exclude, (std::vector<std::string>{"node1"}));
}

TEST(LeaderLost, ALeaderWhoseConnectionClosedLivesAndIsNotExcluded) {
    auto d = decide_without_leader(leader_lost(1, false), policy(2, 3, 3, true));
    ASSERT_EQ(d.decision.kind, Kind::Requeue);
    EXPECT_TRUE(d.decision.exclude.empty());
    EXPECT_NE(d.decision.summary.find("without its leader: requeued"), std::string::npos) << d.decision.summary;
}

TEST(LeaderLost, PastTheBudgetTheSuccessorRecordsTheJobsEnd) {
    auto d = decide_without_leader(leader_lost(1, true, 3), policy(2, 3, 3, true));
    EXPECT_EQ(d.decision.kind, Kind::GiveUp);
    EXPECT_TRUE(d.records_here);
    EXPECT_EQ(d.decision.summary,
              "attempt 1 failed (node1 lost: no heartbeat for 10 s); no restart left (--max-restarts 3): the job "
              "ends here");
    auto end = decide_group_end(d.decision, leader_facts(1), 3);
    ASSERT_TRUE(end.record);
    EXPECT_TRUE(end.record->final);
    EXPECT_TRUE(end.final_summary);
}

// --- the health gate before an attempt ---------------------------------------------------------------

GateFacts gate(std::vector<int> planned, std::vector<int> spares, std::map<int, std::string> failing,
               int restarts_used = 0) {
    GateFacts f;
    f.attempt = 1;
    for (int id : planned) f.planned.push_back(member(id));
    for (int id : spares) f.spares.push_back(member(id));
    f.failing = std::move(failing);
    f.restarts_used = restarts_used;
    return f;
}

TEST(Gate, EveryNodePassingRunsThePlannedMembers) {
    auto d = decide_gate(gate({0, 1, 2}, {3}, {}), policy(2, 3));
    EXPECT_TRUE(d.go);
    EXPECT_EQ(d.members, (std::vector<int>{0, 1, 2}));
    EXPECT_TRUE(d.left_out.empty());
}

TEST(Gate, AFailingMemberIsLeftOutAndASpareThatPassedTakesItsPlace) {
    auto d = decide_gate(gate({0, 1, 2}, {3, 4}, {{1, "gpus: GPU 1: 3 uncorrected ECC errors"}, {3, "ib-ports: down"}}),
                         policy(3, 3));
    EXPECT_TRUE(d.go);
    EXPECT_EQ(d.members, (std::vector<int>{0, 2, 4})) << "the failing spare node4 is skipped";
    EXPECT_EQ(d.left_out, (std::vector<LeftOut>{{1, "node2", "gpus: GPU 1: 3 uncorrected ECC errors"}}));
}

TEST(Gate, WithoutASpareTheAttemptRunsOnFewerNodesDownToMinAndUsesNoRestart) {
    auto d = decide_gate(gate({0, 1, 2}, {}, {{2, "site check `x`: exit code 1"}}), policy(2, 3));
    EXPECT_TRUE(d.go);
    EXPECT_EQ(d.members, (std::vector<int>{0, 1}));
    EXPECT_EQ(d.end.restarts_used, 0);
}

TEST(Gate, TooFewPassingGivesUpWithNotReadyWithoutRequeue) {
    auto d = decide_gate(gate({0, 1, 2}, {}, {{2, "site check `x`: exit code 1"}}), policy(3, 3));
    EXPECT_FALSE(d.go);
    EXPECT_TRUE(d.members.empty());
    EXPECT_EQ(d.end.kind, Kind::GiveUp);
    EXPECT_EQ(d.end.exit_code, exit_code::kNotReady);
    EXPECT_EQ(d.end.restarts_used, 1);
    EXPECT_EQ(d.end.cause, "node3 (site check `x`: exit code 1) failed the health check");
    EXPECT_EQ(d.end.summary,
              "attempt 1 cannot start (node3 (site check `x`: exit code 1) failed the health check); 1 of 3 restarts "
              "(--max-restarts) used; 2 node(s) passed, fewer than --nnodes MIN 3: the job ends here (with --requeue "
              "the job would go back to Slurm's queue without them)");
}

TEST(Gate, TooFewPassingRequeuesWithoutTheFailingAndTheLostNodes) {
    GateFacts f = gate({0, 1}, {2}, {{1, "lost: connection closed"}, {2, "gpus: NVML: driver mismatch"}});
    f.lost_before = {"node9"};
    auto d = decide_gate(f, policy(2, 2, 3, true));
    EXPECT_FALSE(d.go);
    EXPECT_EQ(d.end.kind, Kind::Requeue);
    EXPECT_EQ(d.end.exclude, (std::vector<std::string>{"node9", "node2", "node3"}));
    EXPECT_EQ(d.end.exit_code, exit_code::kNotReady);
}

// Through etcd, a node waiting outside the group is preferred to one that fails the check: the nodes meet
// again without the failing one, using no restart.
TEST(Gate, ANodeWaitingInTheStoreTakesTheFailingNodesPlace) {
    const GateFacts f = gate({0, 1}, {}, {{1, "site check `x`: exit code 1"}}, 1);
    const GateDecision own = decide_gate(f, policy(2, 2, 3));
    ASSERT_FALSE(own.go) << "1 node passed, fewer than MIN";
    auto d = decide_gate_with_waiting_nodes(f, own, policy(2, 2, 3), 1);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->kind, Kind::MeetAgain);
    EXPECT_EQ(d->left_behind, (std::vector<int>{1}));
    EXPECT_EQ(d->restarts_used, 1) << "no restart used";
    EXPECT_EQ(d->summary,
              "attempt 1: node2 (site check `x`: exit code 1) failed the health check; 1 node waits to join: the "
              "nodes meet again without the failing node(s) (no restart of --max-restarts used), attempt 2 on 2 "
              "node(s)");
    // Running below plan (MIN 1): the waiting node is still preferred to a smaller world.
    const GateDecision smaller = decide_gate(f, policy(1, 2, 3));
    ASSERT_TRUE(smaller.go);
    EXPECT_TRUE(decide_gate_with_waiting_nodes(f, smaller, policy(1, 2, 3), 2));
}

TEST(Gate, WithNobodyWaitingNothingToSwapOrTheLeaderFailingTheGateDecides) {
    const GateFacts f = gate({0, 1, 2}, {3}, {{1, "ib-ports: down"}});
    const GateDecision full = decide_gate(f, policy(3, 3));
    ASSERT_TRUE(full.go) << "the group's own spare took the place";
    EXPECT_FALSE(decide_gate_with_waiting_nodes(f, full, policy(3, 3), 1)) << "the attempt runs as planned";
    const GateFacts two = gate({0, 1}, {}, {{1, "ib-ports: down"}});
    EXPECT_FALSE(decide_gate_with_waiting_nodes(two, decide_gate(two, policy(2, 2)), policy(2, 2), 0)) << "nobody";
    const GateFacts leader = gate({0, 1}, {}, {{0, "gpus: NVML: driver mismatch"}});
    EXPECT_FALSE(decide_gate_with_waiting_nodes(leader, decide_gate(leader, policy(2, 2)), policy(2, 2), 1))
        << "the group's leader is not swapped";
    const GateFacts three = gate({0, 1, 2}, {}, {{1, "x"}, {2, "y"}});
    EXPECT_FALSE(decide_gate_with_waiting_nodes(three, decide_gate(three, policy(3, 3)), policy(3, 3), 1))
        << "1 healthy and 1 waiting: fewer than MIN 3";
}

TEST(Gate, TheLeaderFailingRequeuesWithoutItEvenWithEnoughNodesLeft) {
    auto d = decide_gate(gate({0, 1, 2}, {}, {{0, "gpus: NVML: driver mismatch"}}), policy(2, 3, 3, true));
    EXPECT_FALSE(d.go);
    EXPECT_EQ(d.end.kind, Kind::Requeue);
    EXPECT_EQ(d.end.exclude, (std::vector<std::string>{"node1"}));
    EXPECT_EQ(d.end.requeue_why, "the group's leader failed the health check");
    EXPECT_EQ(d.end.summary,
              "attempt 1 cannot start (node1 (gpus: NVML: driver mismatch) failed the health check); 1 of 3 restarts "
              "(--max-restarts) used; the group cannot go on without its leader: requeued without node1");
}

TEST(Gate, TooFewPassingPastTheBudgetEndsTheJob) {
    auto d = decide_gate(gate({0, 1}, {}, {{1, "log-dir: full"}}, 3), policy(2, 2, 3, true));
    EXPECT_FALSE(d.go);
    EXPECT_EQ(d.end.kind, Kind::GiveUp);
    EXPECT_EQ(d.end.restarts_used, 4);
    EXPECT_NE(d.end.summary.find("no restart left (--max-restarts 3): the job ends here"), std::string::npos)
        << d.end.summary;
}

}  // namespace
}  // namespace dlaunch
