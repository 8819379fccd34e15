#include "dlaunch/guardian.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <set>
#include <string>
#include <thread>

namespace dlaunch {
namespace {

// A process leading its own process group, as a worker does.
pid_t start_group_leader() {
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::setpgid(0, 0);
        ::execl("/bin/sleep", "sleep", "30", nullptr);
        ::_exit(127);
    }
    ::setpgid(pid, pid);
    return pid;
}

// Reaps `worker` and says whether SIGKILL ended it (the guardian's doing).
::testing::AssertionResult killed_by_sigkill(pid_t worker) {
    int status = 0;
    if (::waitpid(worker, &status, 0) != worker)
        return ::testing::AssertionFailure() << "worker " << worker << " not reaped";
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "status " << status;
}

// Events still unread when the agent hangs up are read before the guardian acts on the hang-up: a group held at
// the end is killed, however soon after it was told.
TEST(Guardian, AGroupStillHeldWhenTheAgentHangsUpIsKilled) {
    const pid_t worker = start_group_leader();
    ASSERT_GT(worker, 0);
    Guardian guardian;
    ASSERT_TRUE(guardian.start());
    guardian.hold(worker);
    guardian.reap();  // hangs up with the group held, as an agent that ended without stopping its workers
    EXPECT_TRUE(killed_by_sigkill(worker));
}

// How often `pid` gave up its CPU of its own accord so far (proc(5)): each wake-up of a sleeping process adds one.
long voluntary_switches(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stol(line.substr(line.find(':') + 1));
    return -1;
}

// The agent's events do not wake the guardian, nor does time (a thousand guardians woken on every stop shared
// the machine with a group restart): it reads them when the agent hangs up, and acts on them.
TEST(Guardian, SleepsThroughTheAgentsEventsAndActsOnThemAtTheHangUp) {
    const pid_t worker = start_group_leader();
    ASSERT_GT(worker, 0);
    Guardian guardian;
    ASSERT_TRUE(guardian.start());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // asleep by now
    const long before = voluntary_switches(guardian.pid());
    ASSERT_GE(before, 0);
    for (int i = 0; i < 100; ++i) guardian.hold(worker + 100000 + i), guardian.release(worker + 100000 + i);
    guardian.hold(worker);
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    EXPECT_EQ(voluntary_switches(guardian.pid()), before) << "the guardian woke";
    guardian.reap();
    EXPECT_TRUE(killed_by_sigkill(worker));
}

// This process's children now (proc(5): /proc/PID/task/TID/children, of its main thread, which forks them).
std::set<pid_t> children() {
    const std::string pid = std::to_string(::getpid());
    std::ifstream list("/proc/" + pid + "/task/" + pid + "/children");
    std::set<pid_t> out;
    for (pid_t child = 0; list >> child;) out.insert(child);
    return out;
}

// The one child fork_ahead() forks.
pid_t fork_ahead_child() {
    const std::set<pid_t> before = children();
    Guardian::fork_ahead();
    std::set<pid_t> added = children();
    for (pid_t p : before) added.erase(p);
    return added.size() == 1 ? *added.begin() : -1;
}

// The guardian forked ahead is the first start()'s, and guards as one forked then does; the next start() forks its own.
TEST(Guardian, TheOneForkedAheadGuardsTheFirstStartsWorkers) {
    const pid_t ahead = fork_ahead_child();
    ASSERT_GT(ahead, 0) << "fork_ahead() forked one child";
    const pid_t worker = start_group_leader();
    ASSERT_GT(worker, 0);
    Guardian first, second;
    ASSERT_TRUE(first.start());
    ASSERT_TRUE(second.start());
    EXPECT_EQ(first.pid(), ahead) << "the first start forked a guardian instead of taking the one forked ahead";
    EXPECT_NE(second.pid(), ahead);
    first.hold(worker);
    first.reap();
    EXPECT_TRUE(killed_by_sigkill(worker));
}

// One that ended before it was taken (killed by someone) is not handed out: start() forks another.
TEST(Guardian, OneForkedAheadThatEndedIsReplaced) {
    const pid_t ahead = fork_ahead_child();
    ASSERT_GT(ahead, 0) << "fork_ahead() forked one child";
    ASSERT_EQ(::kill(ahead, SIGKILL), 0);
    siginfo_t info{};
    ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(ahead), &info, WEXITED | WNOWAIT), 0);  // a zombie now, unreaped
    Guardian guardian;
    ASSERT_TRUE(guardian.start());
    EXPECT_NE(guardian.pid(), ahead);
    EXPECT_EQ(::kill(guardian.pid(), 0), 0) << "the guardian handed out is not alive";
    EXPECT_EQ(::kill(ahead, 0), -1) << "the dead one forked ahead was not reaped";
}

// More events than the pipe holds: the agent kicks the guardian to read them, and none is lost.
TEST(Guardian, AFullPipeIsReadAndNoEventIsLost) {
    const pid_t worker = start_group_leader();
    ASSERT_GT(worker, 0);
    Guardian guardian;
    ASSERT_TRUE(guardian.start());
    for (int i = 0; i < 40000; ++i) guardian.hold(worker + 100000 + i), guardian.release(worker + 100000 + i);
    guardian.hold(worker);
    guardian.reap();
    EXPECT_TRUE(killed_by_sigkill(worker));
}

TEST(Guardian, AReleasedGroupIsLeftAloneAndTheGuardianEndsOnTheHangUp) {
    const pid_t worker = start_group_leader();
    ASSERT_GT(worker, 0);
    Guardian guardian;
    ASSERT_TRUE(guardian.start());
    const pid_t guardian_pid = guardian.pid();
    guardian.hold(worker);
    guardian.release(worker);
    guardian.hang_up();
    int status = -1;
    ASSERT_EQ(::waitpid(guardian_pid, &status, 0), guardian_pid) << "the guardian ends by itself";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    guardian.forget();
    EXPECT_EQ(::kill(worker, 0), 0) << "the released group was killed";
    ::kill(worker, SIGKILL);
    ::waitpid(worker, nullptr, 0);
}

}  // namespace
}  // namespace dlaunch
