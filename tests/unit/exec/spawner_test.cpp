#include "dlaunch/spawner.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dlaunch {
namespace {

std::vector<std::string> strings(char** array) {
    std::vector<std::string> out;
    for (; *array; ++array) out.emplace_back(*array);
    return out;
}

TEST(ExecImage, TheRanksVariablesOverlayTheInheritedOnesInNameOrder) {
    const RenderedEnv inherited({{"HOME", "/root"}, {"PATH", "/bin"}, {"RANK", "stale"}, {"Z", "last"}});
    const std::vector<std::string> argv{"/bin/true", "--flag"};
    ExecImage image(argv, inherited, {{"A", "first"}, {"RANK", "3"}, {"WORLD_SIZE", "8"}, {"ZZ", "after"}});
    EXPECT_EQ(strings(image.envp()), (std::vector<std::string>{"A=first", "HOME=/root", "PATH=/bin", "RANK=3",
                                                               "WORLD_SIZE=8", "Z=last", "ZZ=after"}));
    EXPECT_EQ(strings(image.argv()), argv);
}

TEST(ExecImage, OneSideEmptyGivesTheOther) {
    const RenderedEnv none({});
    const RenderedEnv inherited({{"A", "1"}, {"B", ""}});
    const std::vector<std::string> argv{"x"};
    ExecImage only_inherited(argv, inherited, {});
    EXPECT_EQ(strings(only_inherited.envp()), (std::vector<std::string>{"A=1", "B="}));
    ExecImage only_overlay(argv, none, {{"B", "2"}});
    EXPECT_EQ(strings(only_overlay.envp()), (std::vector<std::string>{"B=2"}));
}

TEST(ExecImage, ANameThatIsAPrefixOfAnotherIsItsOwnVariable) {
    const RenderedEnv inherited({{"CUDA", "a"}, {"CUDA_VISIBLE_DEVICES", "0,1"}});
    const std::vector<std::string> argv{"x"};
    ExecImage image(argv, inherited, {{"CUDA_VISIBLE_DEVICES", "1"}});
    EXPECT_EQ(strings(image.envp()), (std::vector<std::string>{"CUDA=a", "CUDA_VISIBLE_DEVICES=1"}));
}

}  // namespace
}  // namespace dlaunch
