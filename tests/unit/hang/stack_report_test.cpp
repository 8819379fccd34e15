#include "dlaunch/stack_report.hpp"

#include <gtest/gtest.h>

namespace dlaunch::hang {
namespace {

// As faulthandler wrote them for a 4-rank DDP job whose rank 2 sleeps before all_reduce (torch 1.13,
// Python 3.11), with a second thread added to rank 0.
constexpr const char* kWaiting =
    "# dlaunch-stacks pid=8905 signal=40\n"
    "Thread 0x00007f7200001000 (most recent call first):\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 324 in wait\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 995 in _bootstrap\n"
    "\n"
    "Current thread 0x00007f72165ab040 (most recent call first):\n"
    "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1541 in all_reduce\n"
    "  File \"/tmp/hang/ddp_hang.py\", line 11 in <module>\n";
constexpr const char* kSleeping =
    "# dlaunch-stacks pid=8907 signal=40\n"
    "Current thread 0x00007fa41b727040 (most recent call first):\n"
    "  File \"/tmp/hang/ddp_hang.py\", line 10 in <module>\n";

std::string fake_source(const std::string& file, int line) {
    if (file != "/tmp/hang/ddp_hang.py") return "";
    return line == 10 ? "    time.sleep(3600)\n" : line == 11 ? "dist.all_reduce(t)" : "";
}

TEST(StackReport, ParsesEveryThreadOfAFaulthandlerDump) {
    auto threads = parse_faulthandler(kWaiting);
    ASSERT_EQ(threads.size(), 2u);
    EXPECT_EQ(threads[0].id, "0x00007f7200001000");
    EXPECT_FALSE(threads[0].current);
    EXPECT_TRUE(threads[1].current);
    ASSERT_EQ(threads[1].frames.size(), 2u);
    EXPECT_EQ(threads[1].frames[0],
              (Frame{"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", 1541, "all_reduce"}));
    EXPECT_EQ(threads[1].frames[1], (Frame{"/tmp/hang/ddp_hang.py", 11, "<module>"}));
    EXPECT_EQ(main_thread(threads), &threads[1]);
    EXPECT_TRUE(parse_faulthandler("").empty());
    EXPECT_TRUE(parse_faulthandler("garbage\n  File \"x\", line y in z\n").empty());
}

TEST(StackReport, TheRankOutsideTheCollectiveIsTheCulprit) {
    std::vector<RankStacks> ranks;
    for (int r = 0; r < 4; ++r)
        ranks.push_back({r, "node1", 100.0 + r, parse_faulthandler(r == 2 ? kSleeping : kWaiting)});
    ranks[2].last_progress = 101.5;
    Culprit c = find_culprit(ranks, fake_source);
    EXPECT_EQ(c.ranks, std::vector<int>{2});
    EXPECT_EQ(c.reason, "the other ranks wait in a collective for rank 2");
    ASSERT_EQ(c.evidence.size(), 2u);
    EXPECT_EQ(c.evidence[0],
              "ranks 0,1,3 wait in all_reduce (/tmp/hang/ddp_hang.py:11 in <module>: dist.all_reduce(t))");
    EXPECT_EQ(c.evidence[1],
              "rank 2 is not in a collective: at /tmp/hang/ddp_hang.py:10 in <module>: time.sleep(3600)");
}

TEST(StackReport, MismatchedCollectivesNameTheRarerOne) {
    const std::string barrier =
        "Current thread 0x1 (most recent call first):\n"
        "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 3000 in barrier\n"
        "  File \"train.py\", line 30 in <module>\n";
    std::vector<RankStacks> ranks{{0, "a", 100, parse_faulthandler(kWaiting)},
                                  {1, "a", 100, parse_faulthandler(kWaiting)},
                                  {2, "b", 100, parse_faulthandler(barrier)}};
    Culprit c = find_culprit(ranks, {});
    EXPECT_EQ(c.ranks, std::vector<int>{2});
    EXPECT_EQ(c.reason, "the ranks wait in different collectives; rank 2 in barrier");
}

TEST(StackReport, WhenEveryRankHereWaitsInTheSameCollectiveTheCulpritIsOnAnotherNode) {
    std::vector<RankStacks> ranks{{0, "a", 100, parse_faulthandler(kWaiting)},
                                  {1, "a", 90, parse_faulthandler(kWaiting)}};
    Culprit c = find_culprit(ranks, {}, true);
    EXPECT_TRUE(c.elsewhere);
    EXPECT_TRUE(c.ranks.empty());
    EXPECT_EQ(c.reason, "every rank of this node waits in all_reduce: the culprit is on another node");
    Culprit alone = find_culprit(ranks, {}, false);
    EXPECT_FALSE(alone.elsewhere);
    EXPECT_EQ(alone.ranks, std::vector<int>{1});
    EXPECT_EQ(alone.reason, "silent the longest; every rank waits in all_reduce");
}

TEST(StackReport, ARankWatchedAloneIsAVictimInACollectiveAndTheCulpritOutsideOne) {
    Culprit victim = find_culprit({{0, "a", 100, parse_faulthandler(kWaiting)}}, {}, true);
    EXPECT_TRUE(victim.elsewhere);
    EXPECT_EQ(victim.reason, "rank 0 waits in all_reduce: the culprit is another rank");
    Culprit culprit = find_culprit({{2, "a", 100, parse_faulthandler(kSleeping)}}, fake_source, true);
    EXPECT_FALSE(culprit.elsewhere);
    EXPECT_EQ(culprit.ranks, std::vector<int>{2});
    EXPECT_EQ(culprit.reason, "it is not in a collective: the job's other ranks may wait for it");
    ASSERT_EQ(culprit.evidence.size(), 1u);
    EXPECT_EQ(culprit.evidence[0],
              "rank 2 is not in a collective: at /tmp/hang/ddp_hang.py:10 in <module>: time.sleep(3600)");
}

// dlaunch's sitecustomize dumps from a thread of its own (sigwait): that thread is never the program's.
TEST(StackReport, DlaunchsSignalThreadIsNeverTheMainThread) {
    auto threads = parse_faulthandler(
        "Current thread 0x00007f1 (most recent call first):\n"
        "  File \"/usr/lib/dlaunch/python/sitecustomize.py\", line 38 in _dlaunch_stack_signal_thread\n"
        "  File \"/usr/lib/python3.11/threading.py\", line 975 in run\n"
        "\n"
        "Thread 0x00007f2 (most recent call first):\n"
        "  File \"/usr/lib/python3.11/runpy.py\", line 88 in _run_code\n"
        "  File \"/usr/lib/python3.11/runpy.py\", line 198 in _run_module_as_main\n");
    ASSERT_EQ(threads.size(), 2u);
    EXPECT_EQ(main_thread(threads), &threads[1]);
    EXPECT_EQ(main_thread({threads[0]}), nullptr);
}

TEST(StackReport, WithoutStacksTheRankSilentTheLongestIsNamed) {
    std::vector<RankStacks> ranks{{0, "a", 120, {}}, {1, "a", 110, {}}};
    Culprit c = find_culprit(ranks, {});
    EXPECT_EQ(c.ranks, std::vector<int>{1});
    EXPECT_EQ(c.reason, "silent the longest");
    ASSERT_EQ(c.evidence.size(), 1u);
    EXPECT_EQ(c.evidence[0], "ranks 0,1: no Python stack (not a Python process, or Python run with -S or -I)");
}

TEST(StackReport, BackwardCountsAsDdpsCollective) {
    const std::string backward =
        "Current thread 0x1 (most recent call first):\n"
        "  File \"/usr/lib/python3/dist-packages/torch/autograd/__init__.py\", line 197 in backward\n"
        "  File \"/usr/lib/python3/dist-packages/torch/_tensor.py\", line 487 in backward\n"
        "  File \"train.py\", line 40 in step\n"
        "  File \"train.py\", line 50 in <module>\n";
    std::vector<RankStacks> ranks{{0, "a", 100, parse_faulthandler(backward)},
                                  {1, "a", 90, parse_faulthandler(kSleeping)}};
    Culprit c = find_culprit(ranks, {});
    EXPECT_EQ(c.ranks, std::vector<int>{1});
    EXPECT_EQ(c.evidence[0], "rank 0 waits in backward (train.py:40 in step)");
}

}  // namespace
}  // namespace dlaunch::hang
