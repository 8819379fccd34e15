#include "dlaunch/failure_policy.hpp"

#include <gtest/gtest.h>

#include <csignal>

#include "dlaunch/exit_codes.hpp"

namespace dlaunch {
namespace {

using K = Action::Kind;
const std::set<int> kStop{SIGTERM, SIGINT, SIGHUP, SIGQUIT};

WorkerExit exited(int local_rank, int code, double t = 1) {
    return {local_rank, 100 + local_rank, {false, code}, t};
}
WorkerExit killed(int local_rank, int signo, double t = 1) {
    return {local_rank, 100 + local_rank, {true, signo}, t};
}

TEST(FailurePolicy, AllSucceed) {
    FailurePolicy p(3, 0, kStop);
    EXPECT_EQ(p.start(), (std::vector<Action>{{K::StartGroup, 0}}));
    EXPECT_TRUE(p.worker_exited(exited(0, 0)).empty()) << "wait for the others (torchrun semantics)";
    EXPECT_TRUE(p.worker_exited(exited(2, 0)).empty());
    EXPECT_EQ(p.worker_exited(exited(1, 0)), (std::vector<Action>{{K::Exit, 0}}));
    EXPECT_TRUE(p.done());
    EXPECT_TRUE(p.failures().empty());
}

TEST(FailurePolicy, FailureStopsTheGroupThenRestartsWhileBudgetLasts) {
    FailurePolicy p(2, 1, kStop);
    p.start();
    EXPECT_EQ(p.worker_exited(exited(1, 3)), (std::vector<Action>{{K::SignalWorkers, SIGTERM}, {K::StartGrace, 0}}));
    EXPECT_EQ(p.worker_exited(killed(0, SIGTERM)), (std::vector<Action>{{K::StartGroup, 1}}));
    EXPECT_EQ(p.restart_count(), 1);
    // Second attempt fails too: budget exhausted, exit with this attempt's root cause.
    p.worker_exited(killed(0, SIGSEGV, 5));
    EXPECT_EQ(p.worker_exited(exited(1, 0)), (std::vector<Action>{{K::Exit, 128 + SIGSEGV}}));
    ASSERT_TRUE(p.root_cause());
    EXPECT_EQ(p.root_cause()->attempt, 1);
    EXPECT_EQ(p.root_cause()->exit.local_rank, 0);
    ASSERT_EQ(p.failures().size(), 3u);
    EXPECT_TRUE(p.failures()[0].root_cause);
    EXPECT_TRUE(p.failures()[1].stopped_by_us);
    EXPECT_FALSE(p.failures()[1].root_cause);
}

TEST(FailurePolicy, ARankThatHadFailedBeforeTheStopIsNotTakenForAnEffectOfIt) {
    FailurePolicy p(3, 0, kStop);
    p.start();
    p.worker_exited(exited(0, 3));
    WorkerExit own = exited(1, 5);
    own.before_the_stop = true;
    p.worker_exited(own);
    p.worker_exited(killed(2, SIGTERM));
    ASSERT_EQ(p.failures().size(), 3u);
    EXPECT_TRUE(p.failures()[0].root_cause);
    EXPECT_FALSE(p.failures()[1].root_cause);
    EXPECT_FALSE(p.failures()[1].stopped_by_us) << "exit code 5 is its own failure";
    EXPECT_TRUE(p.failures()[2].stopped_by_us);
}

TEST(RestartBackoff, DoublesUpToTheMostAndZeroTurnsItOff) {
    const RestartBackoff b{1, 5};
    EXPECT_EQ(b.before_restart(1), 1);
    EXPECT_EQ(b.before_restart(2), 2);
    EXPECT_EQ(b.before_restart(3), 4);
    EXPECT_EQ(b.before_restart(4), 5);
    EXPECT_EQ(b.before_restart(1000), 5) << "bounded, and no overflow however many restarts";
    EXPECT_EQ((RestartBackoff{0, 30}.before_restart(3)), 0);
    EXPECT_EQ((RestartBackoff{7, 7}.before_restart(2)), 7);
}

TEST(FailurePolicy, ARestartWaitsOutItsBackoffFirst) {
    FailurePolicy p(2, 2, kStop, {}, std::nullopt, RestartBackoff{0.5, 30});
    p.start();
    p.worker_exited(exited(1, 3));
    EXPECT_EQ(p.worker_exited(killed(0, SIGTERM)), (std::vector<Action>{{K::WaitToRestart, 1, 0.5}}));
    EXPECT_TRUE(p.waiting_to_restart());
    EXPECT_EQ(p.grace_expired(), (std::vector<Action>{{K::StartGroup, 1}}));
    p.worker_exited(exited(1, 3));
    EXPECT_EQ(p.worker_exited(killed(0, SIGTERM)), (std::vector<Action>{{K::WaitToRestart, 2, 1.0}}));
}

TEST(FailurePolicy, AStopSignalWhileWaitingToRestartEndsTheRunAtOnce) {
    FailurePolicy p(1, 3, kStop, {}, std::nullopt, RestartBackoff{10, 30});
    p.start();
    p.worker_exited(exited(0, 3));
    ASSERT_TRUE(p.waiting_to_restart());
    EXPECT_EQ(p.signal_received(SIGUSR1), (std::vector<Action>{{K::SignalWorkers, SIGUSR1}})) << "no worker to get it";
    EXPECT_EQ(p.signal_received(SIGINT), (std::vector<Action>{{K::Exit, 128 + SIGINT}}));
    EXPECT_EQ(p.stopped_by_signal(), SIGINT);
}

TEST(FailurePolicy, ServicesAreStoppedOnceTheOthersSucceedInARestartedAttemptToo) {
    // Local rank 1 is a service: after a restart the others' count starts again.
    FailurePolicy p(2, 1, kStop, {1});
    p.start();
    p.worker_exited(exited(0, 3));
    EXPECT_EQ(p.worker_exited(killed(1, SIGTERM)), (std::vector<Action>{{K::StartGroup, 1}}));
    EXPECT_EQ(p.worker_exited(exited(0, 0)), (std::vector<Action>{{K::SignalWorkers, SIGTERM}, {K::StartGrace, 0}}));
}

TEST(FailurePolicy, AHangStopsTheGroupAndEndsWithTheHangCode) {
    FailurePolicy p(3, 0, kStop);
    p.start();
    EXPECT_EQ(p.worker_hung({2, 102, {}, 50}, 5.5),
              (std::vector<Action>{{K::SignalWorkers, SIGTERM}, {K::StartGrace, kStopGrace}}));
    EXPECT_TRUE(p.worker_exited(killed(0, SIGTERM)).empty());
    EXPECT_TRUE(p.worker_exited(killed(2, SIGTERM)).empty()) << "the hung rank's end is the same failure";
    EXPECT_EQ(p.worker_exited(killed(1, SIGTERM)), (std::vector<Action>{{K::Exit, exit_code::kHang}}));
    ASSERT_TRUE(p.root_cause());
    EXPECT_EQ(p.root_cause()->hung_after, 5.5);
    EXPECT_EQ(p.root_cause()->exit.local_rank, 2);
    EXPECT_EQ(p.root_cause()->exit.status, (ExitStatus{true, SIGTERM}));
    EXPECT_EQ(p.root_cause()->describe(), "hung: no progress for 6 s (then signal SIGTERM (15))");
    ASSERT_EQ(p.failures().size(), 3u);
    EXPECT_TRUE(p.failures()[1].stopped_by_us);
}

TEST(FailurePolicy, AHangRestartsWhileBudgetLastsAndIsIgnoredWhileStopping) {
    FailurePolicy p(2, 1, kStop);
    p.start();
    p.worker_hung({0, 100, {}, 50}, 10);
    EXPECT_TRUE(p.worker_hung({1, 101, {}, 51}, 10).empty()) << "already stopping";
    p.worker_exited(killed(0, SIGTERM));
    EXPECT_EQ(p.worker_exited(killed(1, SIGTERM)), (std::vector<Action>{{K::StartGroup, 1}}));
    EXPECT_EQ(p.worker_exited(exited(0, 0)), std::vector<Action>{});
    EXPECT_EQ(p.worker_exited(exited(1, 0)), (std::vector<Action>{{K::Exit, 0}}));
    EXPECT_EQ(p.failures().front().describe(), "hung: no progress for 10 s (then signal SIGTERM (15))");
}

TEST(FailurePolicy, LastWorkerFailingStillCountsAsFailure) {
    FailurePolicy p(2, 0, kStop);
    p.start();
    p.worker_exited(exited(0, 0));
    auto actions = p.worker_exited(exited(1, 4));
    EXPECT_EQ(actions.back(), (Action{K::Exit, 4}));
}

TEST(FailurePolicy, StopSignalForwardsGraceThenExit128PlusN) {
    FailurePolicy p(2, 5, kStop);
    p.start();
    EXPECT_EQ(p.signal_received(SIGINT), (std::vector<Action>{{K::SignalWorkers, SIGINT}, {K::StartGrace, 0}}));
    EXPECT_EQ(p.grace_expired(), (std::vector<Action>{{K::KillWorkers, 0}}));
    p.worker_exited(killed(0, SIGKILL));
    EXPECT_EQ(p.worker_exited(killed(1, SIGKILL)), (std::vector<Action>{{K::Exit, 128 + SIGINT}}))
        << "never restarts after a stop signal, even with budget left";
}

TEST(FailurePolicy, GroupStopEndsTheAttemptWithoutRestartOrFailure) {
    FailurePolicy p(2, 3, kStop);
    p.start();
    EXPECT_EQ(p.group_stop(), (std::vector<Action>{{K::SignalWorkers, SIGTERM}, {K::StartGrace, 0}}));
    EXPECT_TRUE(p.group_stop().empty()) << "asked twice: one stop";
    p.worker_exited(killed(0, SIGTERM));
    EXPECT_EQ(p.worker_exited(exited(1, 1)), (std::vector<Action>{{K::Exit, 0}}))
        << "the group decides the next attempt, not this node's budget";
    EXPECT_TRUE(p.stopped_by_group());
    EXPECT_FALSE(p.root_cause()) << "deaths after the group's stop are its effects";
    EXPECT_EQ(p.failures().size(), 2u);
}

TEST(FailurePolicy, GroupStopAfterThisNodeFailedChangesNothing) {
    FailurePolicy p(2, 0, kStop);
    p.start();
    p.worker_exited(exited(1, 3));
    EXPECT_TRUE(p.group_stop().empty());
    EXPECT_EQ(p.worker_exited(killed(0, SIGTERM)), (std::vector<Action>{{K::Exit, 3}}));
    EXPECT_FALSE(p.stopped_by_group());
    ASSERT_TRUE(p.root_cause());
}

TEST(FailurePolicy, SecondStopSignalKillsAtOnce) {
    FailurePolicy p(1, 0, kStop);
    p.start();
    p.signal_received(SIGINT);
    EXPECT_EQ(p.signal_received(SIGINT), (std::vector<Action>{{K::KillWorkers, 0}}));
}

TEST(FailurePolicy, NonStopSignalsAreOnlyForwarded) {
    FailurePolicy p(2, 0, kStop);
    p.start();
    EXPECT_EQ(p.signal_received(SIGUSR1), (std::vector<Action>{{K::SignalWorkers, SIGUSR1}}));
    EXPECT_FALSE(p.done());
    EXPECT_FALSE(p.stopped_by_signal());
}

TEST(FailurePolicy, StopSignalDuringFailureStopPreventsRestart) {
    FailurePolicy p(2, 3, kStop);
    p.start();
    p.worker_exited(exited(0, 1));
    EXPECT_EQ(p.signal_received(SIGTERM), (std::vector<Action>{{K::SignalWorkers, SIGTERM}}));
    EXPECT_EQ(p.worker_exited(killed(1, SIGTERM)), (std::vector<Action>{{K::Exit, 128 + SIGTERM}}));
}

TEST(FailurePolicy, RestartBudgetCountsOverTheWholeRun) {
    FailurePolicy p(1, 2, kStop);
    p.start();
    EXPECT_EQ(p.worker_exited(exited(0, 1)).back(), (Action{K::StartGroup, 1}));
    EXPECT_EQ(p.worker_exited(exited(0, 1)).back(), (Action{K::StartGroup, 2}));
    EXPECT_EQ(p.worker_exited(exited(0, 9)).back(), (Action{K::Exit, 9}));
    EXPECT_EQ(p.failures().size(), 3u);
}

TEST(FailurePolicy, EventsAfterDoneAreIgnored) {
    FailurePolicy p(1, 0, kStop);
    p.start();
    p.worker_exited(exited(0, 0));
    EXPECT_TRUE(p.signal_received(SIGTERM).empty());
    EXPECT_TRUE(p.grace_expired().empty());
    EXPECT_EQ(p.exit_code(), 0);
}

TEST(ExitStatus, Describe) {
    EXPECT_EQ((ExitStatus{false, 3}).describe(), "exit code 3");
    EXPECT_EQ((ExitStatus{true, SIGSEGV}).describe(), "signal SIGSEGV (11)");
    EXPECT_EQ((ExitStatus{true, SIGKILL}).as_exit_code(), 137);
}

}  // namespace
}  // namespace dlaunch
