#include "dlaunch/rank_watch.hpp"

#include <gtest/gtest.h>

#include "dlaunch/exit_codes.hpp"

namespace dlaunch {
namespace {

RunOutcome ended(ExitStatus rank, int exit_code) {
    RunOutcome o;
    o.exit_code = exit_code;
    o.last_exit = rank;
    return o;
}

TEST(RankWatch, TheWatcherEndsAsItsRankDid) {
    EXPECT_EQ(watched_end(ended({false, 0}, 0)).exit_code, 0);
    // Stopped by SIGTERM, the rank checkpointed and exited 75: 75, not the executor's 143.
    auto checkpointed = watched_end(ended({false, 75}, 143));
    EXPECT_EQ(checkpointed.exit_code, 75);
    EXPECT_EQ(checkpointed.signal, 0);
    auto segv = watched_end(ended({true, 11}, 139));
    EXPECT_EQ(segv.exit_code, 139);
    EXPECT_EQ(segv.signal, 11) << "re-raised, so the launcher sees a signal death";
    RunOutcome never_started;
    never_started.exit_code = exit_code::kLaunchFailure;
    EXPECT_EQ(watched_end(never_started).exit_code, exit_code::kLaunchFailure);
}

TEST(RankWatch, AHangEndsWith124HoweverTheRankWasStopped) {
    RunOutcome o = ended({true, 15}, exit_code::kHang);
    FailureRecord hung;
    hung.failure.root_cause = true;
    hung.failure.hung_after = 6.0;
    o.failures.push_back(hung);
    auto end = watched_end(o);
    EXPECT_EQ(end.exit_code, exit_code::kHang);
    EXPECT_EQ(end.signal, 0);
}

WatchPlaces places() {
    return {"4242",
            "/opt/dlaunch/python",
            "/tmp/dlaunch-watchdog-4242",
            "/tmp/dlaunch-heartbeat-4242",
            "/tmp/dlaunch-stacks-4242.txt",
            "/tmp/native-dlaunch-stacks-4242.txt"};
}

TEST(RankWatch, TheWatchedPlanHasOneRankItsFifosAndItsStacks) {
    LaunchPlan node;
    node.world_size = 4;
    node.hang_timeout = 30;
    RankPlan rank;
    rank.rank = 2;
    rank.console_stdout = false;
    EnvMap env{{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}, {"PYTHONPATH", "/mine"}};
    LaunchPlan plan = watched_rank_plan(node, rank, env, places());
    ASSERT_EQ(plan.ranks.size(), 1u);
    EXPECT_TRUE(plan.watched_alone);
    EXPECT_FALSE(plan.prefix_console);
    EXPECT_TRUE(plan.ranks[0].console_stdout);
    EXPECT_EQ(plan.timer_file, "/tmp/dlaunch-watchdog-4242");
    EXPECT_EQ(plan.heartbeat_file, "/tmp/dlaunch-heartbeat-4242");
    EXPECT_EQ(plan.stacks_files, "") << "$TMPDIR stacks are shown on stderr, not named as a place to look";
    const EnvMap& e = plan.ranks[0].env;
    EXPECT_EQ(e.at("DLAUNCH_STACKS_FILE"), "/tmp/dlaunch-stacks-4242.txt");
    EXPECT_EQ(e.at("PYTHONPATH"), "/opt/dlaunch/python:/mine");
    EXPECT_EQ(e.at("TORCHELASTIC_TIMER_FILE"), "/tmp/dlaunch-watchdog-4242");
    EXPECT_EQ(e.at("DLAUNCH_HEARTBEAT_FILE"), "/tmp/dlaunch-heartbeat-4242");
}

TEST(RankWatch, ANamedTimerFileIsOnePerRankAndALogDirectoryKeepsTheStacks) {
    RankPlan rank;
    rank.rank = 3;
    rank.stacks_file = "/logs/rank_3/stacks.attempt_1.txt";
    rank.env["DLAUNCH_STACKS_FILE"] = "/logs/rank_3/stacks.attempt_1.txt";
    EnvMap env{{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}, {"TORCHELASTIC_TIMER_FILE", "/run/wd"}};
    LaunchPlan plan = watched_rank_plan({}, rank, env, places());
    EXPECT_EQ(plan.timer_file, "/run/wd.3");
    EXPECT_EQ(plan.ranks[0].env.at("TORCHELASTIC_TIMER_FILE"), "/run/wd.3");
    EXPECT_EQ(plan.stacks_files, "/logs/rank_3/stacks.attempt_1.txt");
    EXPECT_FALSE(rank_watch_wanted(std::nullopt, {}));
    EXPECT_TRUE(rank_watch_wanted(5.0, {}));
    EXPECT_TRUE(rank_watch_wanted(std::nullopt, env));
}

}  // namespace
}  // namespace dlaunch
