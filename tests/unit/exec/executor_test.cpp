// The executor through its Spawner seam: real processes (a shell command per rank and attempt), no
// Python, no plan files. Checks the group restart, the failure records and the exit code.
#include "dlaunch/executor.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <map>
#include <thread>
#include <utility>

#include "dlaunch/side_thread.hpp"

namespace dlaunch {
namespace {

// Runs `commands[{attempt, local rank}]` under /bin/sh instead of the rank's program.
class ScriptedSpawner : public Spawner {
public:
    explicit ScriptedSpawner(std::map<std::pair<int, int>, std::string> commands)
        : commands_(std::move(commands)), real_(fork_exec_spawner(inherited_, nullptr)) {}

    Result<pid_t> spawn(const RankPlan& rank, int attempt, const SpawnIo& io) override {
        started.emplace_back(attempt, rank.local_rank);
        RankPlan scripted = rank;
        scripted.argv = {"/bin/sh", "-c", commands_.at({attempt, rank.local_rank})};
        return real_->spawn(scripted, attempt, io);
    }

    std::vector<std::pair<int, int>> started;

private:
    EnvMap inherited_{{"PATH", "/usr/bin:/bin"}};
    std::map<std::pair<int, int>, std::string> commands_;
    std::unique_ptr<Spawner> real_;
};

LaunchPlan two_ranks() {
    LaunchPlan plan;
    plan.world_size = plan.nproc_per_node = 2;
    for (int r = 0; r < 2; ++r) {
        RankPlan rank;
        rank.rank = rank.local_rank = r;
        rank.world_size = rank.local_world_size = 2;
        rank.argv = {"/nonexistent/never-run"};
        rank.console_stdout = rank.console_stderr = false;
        plan.ranks.push_back(rank);
    }
    return plan;
}

RunOutcome run(ScriptedSpawner& spawner, int max_restarts, std::optional<AttemptWatch> watch = std::nullopt) {
    ExecutorOptions options;
    options.watch = std::move(watch);
    options.grace_seconds = 5;
    options.forward_signals = {SIGTERM, SIGINT};
    options.max_restarts = max_restarts;
    options.spawner = &spawner;
    return run_workers(
        [](int attempt) -> Result<LaunchPlan> {
            LaunchPlan p = two_ranks();
            p.restart_count = attempt;
            return p;
        },
        {}, options);
}

TEST(Executor, AFailedRankRestartsTheGroupOnceAndTheRunSucceeds) {
    ScriptedSpawner spawner({{{0, 0}, "sleep 30"}, {{0, 1}, "exit 3"}, {{1, 0}, "exit 0"}, {{1, 1}, "exit 0"}});
    RunOutcome outcome = run(spawner, 1);
    EXPECT_EQ(outcome.exit_code, 0);
    EXPECT_FALSE(outcome.failed);
    EXPECT_EQ(outcome.restarts, 1);
    EXPECT_EQ(spawner.started, (std::vector<std::pair<int, int>>{{0, 0}, {0, 1}, {1, 0}, {1, 1}}));
    ASSERT_EQ(outcome.failures.size(), 2u);
    EXPECT_EQ(outcome.failures[0].rank, 1);
    EXPECT_TRUE(outcome.failures[0].failure.root_cause);
    EXPECT_EQ(outcome.failures[0].failure.exit.status, (ExitStatus{false, 3}));
    EXPECT_EQ(outcome.failures[1].rank, 0);
    EXPECT_TRUE(outcome.failures[1].failure.stopped_by_us);
    EXPECT_EQ(outcome.failures[1].failure.exit.status, (ExitStatus{true, SIGTERM}));
}

TEST(Executor, WithoutRestartsLeftTheRootCausesCodeEndsTheRun) {
    ScriptedSpawner spawner({{{0, 0}, "exit 7"}, {{0, 1}, "sleep 30"}});
    RunOutcome outcome = run(spawner, 0);
    EXPECT_TRUE(outcome.failed);
    EXPECT_EQ(outcome.exit_code, 7);
    EXPECT_EQ(outcome.restarts, 0);
    EXPECT_EQ(spawner.started.size(), 2u);
}

TEST(Executor, TheWatchStopsTheAttemptAndNothingRestartsOrFails) {
    ScriptedSpawner spawner({{{0, 0}, "sleep 30"}, {{0, 1}, "sleep 30"}});
    int asked = 0;
    RunOutcome outcome = run(spawner, 3, AttemptWatch{std::chrono::milliseconds(20), [&] { return ++asked == 3; }, {}});
    // Asked every tick until it said stop; while the stopped workers end it is asked on (the group's channel
    // is polled there: heartbeats go on through a long grace), so a loaded machine may ask once more.
    EXPECT_GE(asked, 3);
    EXPECT_TRUE(outcome.stopped_by_group);
    EXPECT_FALSE(outcome.failed);
    EXPECT_EQ(outcome.exit_code, 0);
    EXPECT_EQ(outcome.restarts, 0) << "the group decides the next attempt";
    EXPECT_EQ(spawner.started.size(), 2u);
    ASSERT_EQ(outcome.failures.size(), 2u);
    EXPECT_TRUE(outcome.failures[0].failure.stopped_by_us);
}

TEST(Executor, NewsOnTheWakeDescriptorIsHeardWithoutWaitingForTheTick) {
    // A tick of an hour: only the wake descriptor (the group channel's) can bring the stop.
    ScriptedSpawner spawner({{{0, 0}, "sleep 30"}, {{0, 1}, "sleep 30"}});
    int pipe_fds[2];
    ASSERT_EQ(::pipe(pipe_fds), 0);
    std::atomic<bool> news{false};
    // Made as the agent makes its threads: one that left SIGCHLD unblocked could take a worker's and the
    // run would wait for that worker for ever.
    std::thread leader = side_thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        news = true;
        ASSERT_EQ(::write(pipe_fds[1], "x", 1), 1);
    });
    RunOutcome outcome =
        run(spawner, 0, AttemptWatch{std::chrono::hours(1), [&] { return news.load(); }, {}, pipe_fds[0]});
    leader.join();
    EXPECT_TRUE(outcome.stopped_by_group);
    EXPECT_EQ(outcome.failures.size(), 2u);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
}

TEST(Executor, TheWatchHearsTheFirstFailureAsItHappensOnce) {
    // Rank 1 fails while rank 0 ignores SIGTERM: the group is told before rank 0's grace is over.
    ScriptedSpawner spawner({{{0, 0}, "trap '' TERM; sleep 2"}, {{0, 1}, "exit 3"}});
    std::vector<FailureRecord> told;
    RunOutcome outcome = run(spawner, 0,
                             AttemptWatch{std::chrono::milliseconds(20), [] { return false; },
                                          [&](const FailureRecord& f) { told.push_back(f); }});
    ASSERT_EQ(told.size(), 1u) << "the first failure only";
    EXPECT_EQ(told[0].rank, 1);
    EXPECT_TRUE(told[0].failure.root_cause);
    EXPECT_EQ(told[0].failure.exit.status, (ExitStatus{false, 3}));
    EXPECT_EQ(outcome.exit_code, 3);
}

TEST(SideThread, StartsWithEverySignalBlockedAndLeavesTheCallersMaskAsItWas) {
    sigset_t before, after, inside;
    ::pthread_sigmask(SIG_SETMASK, nullptr, &before);
    side_thread([&] { ::pthread_sigmask(SIG_SETMASK, nullptr, &inside); }).join();
    ::pthread_sigmask(SIG_SETMASK, nullptr, &after);
    for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGUSR1}) {
        EXPECT_TRUE(sigismember(&inside, s)) << s;
        EXPECT_EQ(sigismember(&after, s), sigismember(&before, s)) << s;
    }
}

}  // namespace
}  // namespace dlaunch
