// The attempt-end engine's rules, table by table, without processes, files or Slurm.
#include "dlaunch/attempt_end.hpp"

#include <gtest/gtest.h>

#include <csignal>

#include "dlaunch/exit_codes.hpp"

namespace dlaunch {
namespace {

FailureRecord failure(int rank, const std::string& host, int code, int attempt = 0, double time = 10) {
    FailureRecord r;
    r.rank = rank;
    r.host = host;
    r.failure = {attempt, {rank, 100 + rank, {false, code}, time}, true, false};
    return r;
}

AttemptFacts facts(NodeEnd end, int exit_code, bool first = true) {
    AttemptFacts f;
    f.job_id = f.run_id = "812";
    f.host = first ? "n1" : "n2";
    f.node_rank = first ? 0 : 1;
    f.nnodes = 2;
    f.world_size = 4;
    f.first = first;
    f.time = 20;
    f.end = end;
    f.exit_code = exit_code;
    f.checkpoint_detail = "SIGUSR1 (the job's warning signal)";
    f.job_ending = [] {
        ADD_FAILURE() << "slurmctld was asked although no rule needed it";
        return JobEnding::Unknown;
    };
    return f;
}

AttemptPolicy requeue_policy(int max_restarts, Reporter who = Reporter::Agent) {
    return {true, max_restarts, who, true};
}

AttemptRecord final_failure(int attempt, int code) {
    AttemptRecord r;
    r.attempt = attempt;
    r.end = AttemptEnd::Failed;
    r.host = "n2";
    r.node_rank = 1;
    r.detail = "rank 3 on n2: exit code " + std::to_string(code);
    r.exit_code = code;
    r.final = true;
    r.failures = {failure(3, "n2", code, attempt)};
    return r;
}

TEST(AttemptEnd, WithoutRequeueAFailedRunEndsWithItsSummaryAndTheStep) {
    AttemptFacts f = facts(NodeEnd::Failed, 5);
    RunOutcome outcome;
    outcome.failed = true;
    outcome.exit_code = 5;
    outcome.failures = {failure(1, "n1", 5)};
    f.outcome = outcome;
    AttemptDecision d = decide_attempt_end(f, {false, 2, Reporter::Agent, true});
    EXPECT_EQ(d.final_summary, outcome);
    EXPECT_TRUE(d.end_step);
    EXPECT_FALSE(d.record);
    EXPECT_FALSE(d.requeue);
    EXPECT_EQ(d.exit_code, 5);

    AttemptDecision ok = decide_attempt_end(facts(NodeEnd::Succeeded, 0), {false, 2, Reporter::Agent, true});
    EXPECT_EQ(ok, AttemptDecision{});
}

TEST(AttemptEnd, AGroupMemberWritesItsFailuresButLeavesTheSummaryToTheLeader) {
    AttemptFacts f = facts(NodeEnd::Failed, 5);
    RunOutcome outcome;
    outcome.failed = true;
    outcome.failures = {failure(1, "n2", 5)};
    f.outcome = outcome;
    AttemptDecision member = decide_attempt_end(f, {false, 2, Reporter::Agent, false, true});
    EXPECT_EQ(member.final_summary, outcome) << "its failure.json";
    EXPECT_FALSE(member.summary_on_console);
    EXPECT_FALSE(member.end_step) << "the group stopped every node already";
    EXPECT_TRUE(decide_attempt_end(f, {false, 2, Reporter::Agent, false, false}).summary_on_console);
}

TEST(AttemptEnd, AFailureWithBudgetLeftIsRecordedAndRequeues) {
    AttemptFacts f = facts(NodeEnd::Failed, 5, false);
    f.failures = {failure(3, "n2", 5)};
    for (Reporter who : {Reporter::Agent, Reporter::Task}) {
        AttemptDecision d = decide_attempt_end(f, requeue_policy(3, who));
        ASSERT_TRUE(d.record);
        EXPECT_EQ(d.record->end, AttemptEnd::Failed);
        EXPECT_FALSE(d.record->final);
        EXPECT_EQ(d.record->detail, "rank 3 on n2: exit code 5");
        EXPECT_EQ(d.requeue, who == Reporter::Agent ? "worker failure" : "task failure");
        ASSERT_EQ(d.log.size(), 1u);
        EXPECT_EQ(d.log[0].text,
                  "rank 3 on n2: exit code 5: requeue: attempt 0 failed; 1 of 3 failed attempts allowed "
                  "(--max-restarts) used: requeueing the job");
        EXPECT_EQ(d.show_node_summary, who == Reporter::Agent);
        EXPECT_EQ(d.exit_code, 5);
        EXPECT_EQ(d.exit_code_if_not_requeued, 5);  // slurm_requeue failed: the job ends with this failure
        EXPECT_TRUE(d.final_summary);
    }
}

TEST(AttemptEnd, ANodeTheHealthGateRefusedIsRecordedAndRequeuedWithoutIt) {
    AttemptFacts f = facts(NodeEnd::Failed, exit_code::kNotReady, false);
    f.not_ready = "n2 failed the health check (site check `x`: exit code 1)";
    AttemptDecision d = decide_attempt_end(f, requeue_policy(3));
    ASSERT_TRUE(d.record);
    EXPECT_EQ(d.record->detail, f.not_ready);
    EXPECT_TRUE(d.record->failures.empty());
    EXPECT_EQ(d.requeue, "this node failed the health check");
    EXPECT_EQ(d.exclude, (std::vector<std::string>{"n2"}));
    EXPECT_EQ(d.exit_code_if_not_requeued, exit_code::kNotReady);
    f.ledger = {final_failure(0, 5)};
    f.ledger[0].final = false;
    f.attempt = 3;
    d = decide_attempt_end(f, requeue_policy(0));
    EXPECT_FALSE(d.requeue) << "past the budget the job ends; nothing is excluded";
    EXPECT_TRUE(d.exclude.empty());
}

TEST(AttemptEnd, PastTheBudgetTheJobEndsWithEveryAttemptAndTheLastRootCause) {
    AttemptFacts f = facts(NodeEnd::Failed, 7);
    f.attempt = 1;
    f.failures = {failure(0, "n1", 7, 1)};
    AttemptRecord earlier = final_failure(0, 3);
    earlier.final = false;
    f.ledger = {earlier};
    AttemptDecision d = decide_attempt_end(f, requeue_policy(1));
    ASSERT_TRUE(d.record);
    EXPECT_TRUE(d.record->final);
    EXPECT_FALSE(d.requeue);
    ASSERT_TRUE(d.final_summary);
    EXPECT_EQ(d.final_summary->failures.size(), 2u);
    EXPECT_EQ(d.final_summary->run_id, "812");
    EXPECT_TRUE(d.end_step);
    EXPECT_EQ(d.exit_code, 7);
}

TEST(AttemptEnd, AFailureAfterAnotherNodeEndedTheJobJoinsItsRecord) {
    AttemptFacts f = facts(NodeEnd::Failed, 9);
    f.failures = {failure(0, "n1", 9, 0, 11)};
    f.ledger = {final_failure(0, 3)};
    AttemptDecision d = decide_attempt_end(f, requeue_policy(0, Reporter::Task));
    ASSERT_TRUE(d.record);
    EXPECT_TRUE(d.record->final);
    EXPECT_FALSE(d.requeue);
    EXPECT_FALSE(d.final_summary);
    EXPECT_TRUE(d.log.empty());
    EXPECT_EQ(d.exit_code, 3);
}

TEST(AttemptEnd, ACheckpointIsRecordedByTheFirstAndRequeuesWithoutTheBudget) {
    AttemptDecision agent0 = decide_attempt_end(facts(NodeEnd::Checkpointed, 0), requeue_policy(0));
    ASSERT_TRUE(agent0.record);
    EXPECT_EQ(agent0.record->end, AttemptEnd::Checkpointed);
    EXPECT_EQ(agent0.record->detail, "SIGUSR1 (the job's warning signal)");
    EXPECT_EQ(agent0.requeue, "checkpoint after the warning signal");
    EXPECT_EQ(agent0.exit_code, 0);
    EXPECT_EQ(agent0.exit_code_if_not_requeued, exit_code::kLaunchFailure);

    AttemptDecision agent1 = decide_attempt_end(facts(NodeEnd::Checkpointed, 0, false), requeue_policy(0));
    EXPECT_FALSE(agent1.record);
    EXPECT_FALSE(agent1.requeue);
    ASSERT_EQ(agent1.log.size(), 1u);
    EXPECT_EQ(agent1.log[0].text, "checkpoint: this node's workers are done; node 0 requeues the job");

    // Every checkpointed task asks for the requeue (the first to arrive wins); only rank 0 records it.
    AttemptDecision task =
        decide_attempt_end(facts(NodeEnd::Checkpointed, 42, false), requeue_policy(0, Reporter::Task));
    EXPECT_FALSE(task.record);
    EXPECT_EQ(task.requeue, "checkpoint");
}

struct SlurmEndRow {
    JobEnding ending;
    AttemptEnd recorded;
    bool requeue;
};

TEST(AttemptEnd, SlurmEndingTheAttemptAsksSlurmctldOnceOnTheFirstNode) {
    for (auto row : {SlurmEndRow{JobEnding::Preempted, AttemptEnd::Checkpointed, true},
                     SlurmEndRow{JobEnding::Requeueing, AttemptEnd::Checkpointed, false},
                     SlurmEndRow{JobEnding::NodeFailed, AttemptEnd::Checkpointed, true},
                     SlurmEndRow{JobEnding::Cancelled, AttemptEnd::Stopped, false},
                     SlurmEndRow{JobEnding::TimedOut, AttemptEnd::Stopped, false},
                     SlurmEndRow{JobEnding::Unknown, AttemptEnd::Stopped, false}}) {
        AttemptFacts f = facts(NodeEnd::SlurmEnded, 143);
        int asked = 0;
        f.job_ending = [&] { return ++asked, row.ending; };
        AttemptDecision d = decide_attempt_end(f, requeue_policy(0));
        EXPECT_EQ(asked, 1);
        ASSERT_TRUE(d.record);
        EXPECT_EQ(d.record->end, row.recorded);
        EXPECT_EQ(d.requeue.has_value(), row.requeue);
        EXPECT_EQ(d.exit_code, 143);
    }
}

TEST(AttemptEnd, SlurmEndingAnAttemptAlreadyOnRecordAsksNothing) {
    AttemptFacts f = facts(NodeEnd::SlurmEnded, 143);
    f.ledger = {final_failure(0, 3)};
    AttemptDecision d = decide_attempt_end(f, requeue_policy(0));
    EXPECT_FALSE(d.record);
    EXPECT_EQ(d.exit_code, 3);  // the final failure's code is the job's

    AttemptDecision other = decide_attempt_end(facts(NodeEnd::SlurmEnded, 143, false), requeue_policy(0));
    EXPECT_FALSE(other.record);
    ASSERT_EQ(other.log.size(), 1u);
    EXPECT_EQ(other.exit_code, 143);
}

TEST(AttemptEnd, AStopRecordsThisNodesFailureAndTakesTheFinalCode) {
    AttemptFacts f = facts(NodeEnd::Stopped, 143, false);
    f.failures = {failure(2, "n2", 6)};
    f.ledger = {final_failure(0, 3)};
    AttemptDecision d = decide_attempt_end(f, requeue_policy(0));
    ASSERT_TRUE(d.record);
    EXPECT_EQ(d.record->end, AttemptEnd::Failed);
    EXPECT_FALSE(d.record->final);
    ASSERT_EQ(d.log.size(), 1u);
    EXPECT_EQ(d.log[0].text, "stop: node 1 (n2) ended the job: rank 3 on n2: exit code 3");
    EXPECT_EQ(d.exit_code, 3);

    AttemptDecision first = decide_attempt_end(facts(NodeEnd::Stopped, 143), requeue_policy(0));
    ASSERT_TRUE(first.record);
    EXPECT_EQ(first.record->end, AttemptEnd::Stopped);
    EXPECT_EQ(first.record->detail, "stopped by a signal (exit code 143)");
}

TEST(AttemptEnd, OnlyASuccessOfARankOtherThanZeroSparesSlurmctldTheQuestion) {
    EXPECT_FALSE(task_end_needs_job_state({false, 0}, 3));
    EXPECT_TRUE(task_end_needs_job_state({false, 0}, 0));
    EXPECT_TRUE(task_end_needs_job_state({false, 42}, 3));
    EXPECT_TRUE(task_end_needs_job_state({true, SIGTERM}, 3));
}

TEST(AttemptEnd, AnAgentsRunEndIsReadOffItsOutcome) {
    RunOutcome o;
    EXPECT_EQ(node_end_of(o), NodeEnd::Succeeded);
    o.exit_code = 130;
    EXPECT_EQ(node_end_of(o), NodeEnd::Stopped);
    o.failed = true;
    EXPECT_EQ(node_end_of(o), NodeEnd::Failed);
    o = {};
    o.checkpointed = true;
    EXPECT_EQ(node_end_of(o), NodeEnd::Checkpointed);
    o.stop_signal = SIGTERM;
    EXPECT_EQ(node_end_of(o), NodeEnd::SlurmEnded);
}

TEST(AttemptEnd, AGroupNodeStoppedBySlurmsSigtermWhileStoppingAfterAFailureAsksSlurmWhy) {
    // The group stopped every node after a crash; preemption's SIGTERM came during the grace.
    RunOutcome o;
    o.exit_code = 143;
    o.stop_signal = SIGTERM;
    o.stopped_by_group = true;
    EXPECT_EQ(node_end_of(o), NodeEnd::Stopped) << "alone: a stop by signal";
    EXPECT_EQ(group_node_end_of(o), NodeEnd::SlurmEnded);
    o.stop_signal = SIGINT;
    o.exit_code = 130;
    EXPECT_EQ(group_node_end_of(o), NodeEnd::Stopped) << "a user's ^C is no word from Slurm";
}

}  // namespace
}  // namespace dlaunch
