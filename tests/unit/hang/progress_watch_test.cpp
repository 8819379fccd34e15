#include "dlaunch/progress_watch.hpp"

#include <gtest/gtest.h>

namespace dlaunch::hang {
namespace {

TEST(ProgressWatch, SilentPastTheTimeoutIsHung) {
    ProgressWatch w(5);
    w.start(0, 100);
    w.start(1, 100);
    w.output(1, 103);
    EXPECT_FALSE(w.hung(104.9));
    auto h = w.hung(105);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->local_rank, 0);
    EXPECT_DOUBLE_EQ(h->last_progress, 100);
    EXPECT_DOUBLE_EQ(h->silent_seconds, 5);
}

TEST(ProgressWatch, TheRankSilentTheLongestIsReported) {
    ProgressWatch w(5);
    w.start(0, 100);
    w.start(1, 100);
    w.output(0, 101);
    auto h = w.hung(110);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->local_rank, 1);
}

TEST(ProgressWatch, CpuUseIsProgressIdleIsNot) {
    ProgressWatch w(5);
    w.start(0, 100);
    w.cpu(0, 2.0, 101);  // first sample: a baseline only
    w.cpu(0, 2.9, 102);  // 90% of a core: computing
    EXPECT_EQ(w.last_progress(0), 102);
    w.cpu(0, 2.91, 103);  // 1%: a blocked rank (its main thread: HangMonitor)
    w.cpu(0, 2.92, 104);
    EXPECT_EQ(w.last_progress(0), 102);
    EXPECT_FALSE(w.hung(106.9));
    EXPECT_TRUE(w.hung(107));
}

TEST(ProgressWatch, ComputingForMinutesWithoutOutputIsNotHung) {
    ProgressWatch w(10);
    w.start(0, 0);
    double cpu = 0;
    for (int t = 1; t <= 300; ++t) {
        cpu += 0.95;
        w.cpu(0, cpu, t);
        EXPECT_FALSE(w.hung(t)) << "at " << t << " s";
    }
}

TEST(ProgressWatch, HeartbeatsAreProgressAndExitedRanksAreNotWatched) {
    ProgressWatch w(5);
    w.start(0, 100);
    w.start(1, 100);
    w.heartbeat(0, 104);
    w.stop(1);
    EXPECT_FALSE(w.hung(108));
    EXPECT_FALSE(w.last_progress(1));
    EXPECT_TRUE(w.hung(109));
}

TEST(ProgressWatch, ARankWithHeartbeatsIsJudgedByThemAlone) {
    ProgressWatch w(5);
    w.start(0, 100);
    w.heartbeat(0, 101);
    double cpu = 0;
    for (int t = 102; t <= 106; ++t) w.cpu(0, cpu += 1.0, t);  // spinning: CPU, but no heartbeat
    auto h = w.hung(106);
    ASSERT_TRUE(h);
    EXPECT_TRUE(h->by_heartbeat);
    EXPECT_DOUBLE_EQ(h->last_progress, 101);
    EXPECT_DOUBLE_EQ(h->timeout, 5);
}

TEST(ProgressWatch, WithoutAHangTimeoutOnlyLearnedHeartbeatTimeoutsApply) {
    ProgressWatch w(std::nullopt, LearnRule{3, 10, 5});
    w.start(0, 0);
    w.start(1, 0);  // never beats, never does anything: not judged without --hang-timeout
    for (int beat = 0; beat <= 4; ++beat) w.heartbeat(0, beat * 2.0);  // 4 intervals of 2 s
    EXPECT_FALSE(w.learned_timeout());
    EXPECT_FALSE(w.hung(1000)) << "nothing learned yet";
    w.heartbeat(0, 12);  // the 5th interval, 4 s
    ASSERT_TRUE(w.learned_timeout());
    EXPECT_DOUBLE_EQ(*w.learned_timeout(), 12);  // 4 s x 3
    EXPECT_FALSE(w.hung(23.9));
    auto h = w.hung(24);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->local_rank, 0);
    EXPECT_DOUBLE_EQ(h->timeout, 12);
}

TEST(ProgressWatch, TheLearnedTimeoutHasAFloorAndCarriesOverToTheNextAttempt) {
    ProgressWatch w(std::nullopt, LearnRule{3, 10, 5});
    w.carry_over(1.0);
    EXPECT_EQ(w.learned_timeout(), 10.0) << "1 s x 3 is below the floor";
    w.carry_over(20.0);
    EXPECT_EQ(w.learned_timeout(), 60.0);
    w.start(0, 0);
    w.heartbeat(0, 1);
    EXPECT_FALSE(w.hung(60.9));
    EXPECT_TRUE(w.hung(61));
}

}  // namespace
}  // namespace dlaunch::hang
