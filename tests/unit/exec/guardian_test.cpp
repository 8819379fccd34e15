#include "dlaunch/guardian.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

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

// Events still unread when the agent hangs up are read before the guardian acts on the hang-up: a group held at
// the end is killed, however soon after it was told.
TEST(Guardian, AGroupStillHeldWhenTheAgentHangsUpIsKilled) {
    const pid_t worker = start_group_leader();
    ASSERT_GT(worker, 0);
    Guardian guardian;
    ASSERT_TRUE(guardian.start());
    guardian.hold(worker);
    guardian.reap();  // hangs up with the group held, as an agent that ended without stopping its workers
    int status = 0;
    ASSERT_EQ(::waitpid(worker, &status, 0), worker);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
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
