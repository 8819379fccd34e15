// Refusals are said once per address per interval, the rest counted and said when the interval is over.
#include "dlaunch/refusal_log.hpp"

#include <gtest/gtest.h>

namespace dlaunch {
namespace {

using namespace std::chrono_literals;

TEST(RefusalLog, OncePerAddressPerIntervalThenTheCount) {
    RefusalLog log(10s);
    const Clock::time_point t0{};
    const auto t = t0 + 1000s;
    EXPECT_EQ(log.refused("10.0.0.7", "said no hello within 5 s", t),
              "refused a connection from 10.0.0.7: said no hello within 5 s");
    for (int i = 0; i < 1290; ++i) EXPECT_EQ(log.refused("10.0.0.7", "x", t + 1s), std::nullopt);
    EXPECT_EQ(log.refused("10.0.0.8", "y", t + 2s), "refused a connection from 10.0.0.8: y")
        << "another address is said at once";
    EXPECT_TRUE(log.unsaid(t + 9s).empty()) << "not before the interval is over";
    EXPECT_EQ(log.unsaid(t + 10s),
              std::vector<std::string>{"refused 1290 more connection(s) from 10.0.0.7 in the last 10 s"});
    EXPECT_TRUE(log.unsaid(t + 30s).empty()) << "10.0.0.8 had nothing unsaid; both are forgotten";
    EXPECT_EQ(log.refused("10.0.0.7", "z", t + 31s), "refused a connection from 10.0.0.7: z");
    EXPECT_EQ(log.refused("10.0.0.7", "z", t + 32s), std::nullopt);
    EXPECT_EQ(log.unsaid(t + 33500ms, true),
              std::vector<std::string>{"refused 1 more connection(s) from 10.0.0.7 in the last 3 s"})
        << "all: what a server that stops has not said yet";
}

}  // namespace
}  // namespace dlaunch
