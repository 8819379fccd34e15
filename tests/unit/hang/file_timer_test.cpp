#include "dlaunch/file_timer.hpp"

#include <gtest/gtest.h>

#include <map>

namespace dlaunch::hang {
namespace {

// What torch.distributed.elastic.timer.FileTimerClient writes (torch 1.13, FileTimerRequest.to_json).
TEST(FileTimer, ParsesTorchsRequestLine) {
    auto r = parse_timer_request(
        R"({"version": 1, "pid": 4242, "scope_id": "slow step", "expiration_time": 1732500000.5, "signal": 9})");
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, (TimerRequest{4242, "slow step", 1732500000.5, 9}));
    auto release = parse_timer_request(R"({"version": 1, "pid": 4242, "scope_id": "s", "expiration_time": -1,)"
                                       R"( "signal": 0})");
    ASSERT_TRUE(release);
    EXPECT_LT(release->expiration_time, 0);
}

TEST(FileTimer, RefusesWhatIsNotARequest) {
    EXPECT_FALSE(parse_timer_request("hello"));
    EXPECT_FALSE(parse_timer_request("[1, 2]"));
    EXPECT_FALSE(parse_timer_request(R"({"pid": 1, "scope_id": "s"})"));
    EXPECT_FALSE(parse_timer_request(R"({"pid": "x", "scope_id": "s", "expiration_time": 1, "signal": 9})"));
    EXPECT_FALSE(parse_timer_request(R"({"pid": 0, "scope_id": "s", "expiration_time": 1, "signal": 9})"));
}

// A process tree: 100 and 200 are ranks (children of the agent, 50); 101 is 100's child, 102 its grandchild;
// 300 is a stranger (a child of init); 400 loops back onto itself (a pid reused while walking up).
TEST(FileTimer, OnlyRanksAndTheirDescendantsMayBeSignalled) {
    const std::map<int, int> parent{{100, 50}, {200, 50}, {101, 100}, {102, 101}, {50, 1}, {300, 1}, {400, 400}};
    auto parent_of = [&](int pid) {
        auto it = parent.find(pid);
        return it == parent.end() ? 0 : it->second;
    };
    const std::vector<int> ranks{100, 200};
    struct Row {
        int pid;
        bool ours;
    };
    for (const Row& row : std::vector<Row>{{100, true},
                                           {200, true},
                                           {101, true},
                                           {102, true},
                                           {50, false},  // the agent itself
                                           {1, false},
                                           {300, false},
                                           {400, false},
                                           {999, false}})  // gone, or never was
        EXPECT_EQ(is_rank_or_descendant(row.pid, ranks, parent_of), row.ours) << "pid " << row.pid;
}

TEST(FileTimer, ReleasedTimersNeverExpire) {
    TimerTable t;
    t.apply({10, "a", 100, 9});
    t.apply({10, "a", -1, 0});
    EXPECT_TRUE(t.expire(200).empty());
    EXPECT_TRUE(t.empty());
}

TEST(FileTimer, TheEarliestExpiredTimerWithASignalIsSentAndThePidIsCleared) {
    TimerTable t;
    t.apply({10, "outer", 105, 15});
    t.apply({10, "inner", 101, 0});  // expired first, but asks for no signal
    t.apply({10, "later", 500, 9});  // not expired: dropped with the pid, as torch does
    t.apply({11, "other", 300, 9});
    EXPECT_TRUE(t.expire(100).empty());
    auto e = t.expire(106);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0], (Expiry{10, "outer", 15, {"inner", "outer"}}));
    EXPECT_TRUE(t.expire(600).size() == 1);  // only pid 11 is left
    EXPECT_TRUE(t.empty());
}

TEST(FileTimer, APidWhoseTimersAskForNoSignalIsLeftAlone) {
    TimerTable t;
    t.apply({10, "a", 100, 0});
    auto e = t.expire(101);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].signal, 0);
    EXPECT_TRUE(t.empty());
}

TEST(FileTimer, ARenewedScopeReplacesItsTimer) {
    TimerTable t;
    t.apply({10, "step", 100, 9});
    t.apply({10, "step", 200, 9});
    EXPECT_TRUE(t.expire(150).empty());
    t.forget(10);
    EXPECT_TRUE(t.empty());
}

}  // namespace
}  // namespace dlaunch::hang
