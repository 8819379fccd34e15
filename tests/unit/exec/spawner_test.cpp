#include "dlaunch/spawner.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "dlaunch/text.hpp"

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

TEST(ExecImage, NamesAreComparedWholeNotAsRenderedText) {
    // '1' and '_' sort below and above '=': comparing "A=..." with "A1=..." would put A1 in twice.
    const RenderedEnv inherited({{"A", "a"}, {"A1", "stale"}, {"A_B", "b"}});
    const std::vector<std::string> argv{"x"};
    ExecImage image(argv, inherited, {{"A1", "new"}});
    EXPECT_EQ(strings(image.envp()), (std::vector<std::string>{"A=a", "A1=new", "A_B=b"}));
}

std::vector<std::string> environment_of(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ");
    std::string all{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    auto entries = split(all, '\0');
    if (!entries.empty() && entries.back().empty()) entries.pop_back();
    return entries;
}

// The environment of an exec'd process, once the kernel has laid it out: a vfork parent resumes when
// execve releases the child's old memory, before the new image's environment is placed, and
// /proc/PID/environ reads empty until then (CI saw it). Waits at most 10 s.
std::vector<std::string> environment_after_exec(pid_t pid) {
    std::vector<std::string> entries = environment_of(pid);
    for (int tries = 0; entries.empty() && tries < 1000; ++tries) {
        ::usleep(10'000);
        entries = environment_of(pid);
    }
    return entries;
}

TEST(ForkExecSpawner, TheWorkerLeadsItsOwnProcessGroupWithTheRanksVariablesOverTheAgents) {
    auto spawner = fork_exec_spawner({{"DLAUNCH_TEST_KEPT", "kept"}, {"DLAUNCH_TEST_RANK", "stale"}}, nullptr);
    RankPlan rp;
    rp.argv = {"/bin/sleep", "30"};
    rp.env = {{"DLAUNCH_TEST_RANK", "3"}};
    const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    ASSERT_GE(null, 0);
    auto pid = spawner->spawn(rp, 0, SpawnIo{null, null, null});
    ::close(null);
    ASSERT_TRUE(pid) << pid.error().describe();
    // spawn() returns once the worker is past the point of no return of its execve: it leads its group.
    EXPECT_EQ(::getpgid(*pid), *pid);
    EXPECT_EQ(environment_after_exec(*pid),
              (std::vector<std::string>{"DLAUNCH_TEST_KEPT=kept", "DLAUNCH_TEST_RANK=3"}));
    ::kill(*pid, SIGKILL);
    ::waitpid(*pid, nullptr, 0);
}

}  // namespace
}  // namespace dlaunch
