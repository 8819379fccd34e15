#include "dlaunch/heartbeat.hpp"

#include <gtest/gtest.h>

namespace dlaunch::heartbeat {
namespace {

TEST(Heartbeat, OneLineEachWayWithAnOptionalNote) {
    EXPECT_EQ(format(3, ""), "beat 3\n");
    EXPECT_EQ(format(3, "step 12\nnext"), "beat 3 step 12 next\n");
    EXPECT_EQ(parse("beat 3"), (Beat{3, ""}));
    EXPECT_EQ(parse("beat 12 step 1200"), (Beat{12, "step 1200"}));
    auto line = format(7, "epoch 2");
    line.pop_back();
    EXPECT_EQ(parse(line), (Beat{7, "epoch 2"}));
    EXPECT_EQ(format(1, std::string(1000, 'x')).size(), std::string("beat 1 ").size() + kMaxNote + 1);
}

TEST(Heartbeat, RefusesWhatIsNotAHeartbeat) {
    for (auto bad : {"", "beat", "beat ", "beat x", "beat -1", "beat 3x", "heartbeat 3", "BEAT 3"})
        EXPECT_FALSE(parse(bad)) << bad;
}

}  // namespace
}  // namespace dlaunch::heartbeat
