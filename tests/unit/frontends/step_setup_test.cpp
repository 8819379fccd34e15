#include "dlaunch/step_setup.hpp"

#include <gtest/gtest.h>

#include <set>

namespace dlaunch {
namespace {

TEST(StepHelpers, AMissingHelperIsNamedWithThePluginArgumentThatFixesIt) {
    const TaskHelpers helpers{"/opt/d/dlaunch-python", "/opt/d/dlaunch-watch"};
    std::set<std::string> present{"/opt/d/dlaunch-watch"};
    auto executable = [&](const std::string& p) { return present.contains(p); };
    auto missing = check_step_helpers(true, false, helpers, executable);
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().what,
              "--dist-launch: /opt/d/dlaunch-python (the helper that starts a .py program under Python) "
              "is not an executable");
    EXPECT_NE(missing.error().hint.find("plugin's pyexec= argument (plugstack.conf)"), std::string::npos);
    EXPECT_TRUE(check_step_helpers(false, true, helpers, executable)) << "a program that is not Python needs none";
    present = {"/opt/d/dlaunch-python"};
    auto unwatched = check_step_helpers(true, true, helpers, executable);
    ASSERT_FALSE(unwatched);
    EXPECT_NE(unwatched.error().what.find("/opt/d/dlaunch-watch (the helper that watches"), std::string::npos);
}

}  // namespace
}  // namespace dlaunch
