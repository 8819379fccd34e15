// run_output(): short helper programs (the health gate's site check, the doctor's probes), judged by exit.
#include "dlaunch/run_output.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>

namespace dlaunch::host {
namespace {

double seconds_of(const std::vector<std::string>& argv, int timeout_ms, Output& out) {
    const auto start = std::chrono::steady_clock::now();
    out = run_output(argv, timeout_ms, true);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(RunOutput, KeepsTheLastLineAndTheExitCode) {
    Output out;
    seconds_of({"sh", "-c", "echo first; echo last >&2; exit 3"}, 5000, out);
    EXPECT_EQ(out.exit_code, 3);
    EXPECT_FALSE(out.timed_out);
    EXPECT_EQ(out.text, "first\nlast\n");
}

TEST(RunOutput, AChildLeftRunningWithThePipeDoesNotHoldItUp) {
    Output out;
    const double took = seconds_of({"sh", "-c", "sleep 30 & echo done"}, 10000, out);
    EXPECT_EQ(out.exit_code, 0);
    EXPECT_EQ(out.text, "done\n");
    EXPECT_LT(took, 5) << "judged by its exit, not by the pipe";
}

TEST(RunOutput, OneThatClosedItsOutputButGoesOnTimesOutAndIsKilledWithItsGroup) {
    Output out;
    const double took = seconds_of({"sh", "-c", "exec >&- 2>&-; sleep 30"}, 300, out);
    EXPECT_TRUE(out.timed_out);
    EXPECT_EQ(out.exit_code, -1);
    EXPECT_LT(took, 5);
}

TEST(RunOutput, ItRunsWithDefaultSignalsWhateverTheCallerBlocks) {
    sigset_t term, old;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    ::sigprocmask(SIG_BLOCK, &term, &old);
    Output out;
    seconds_of({"sh", "-c", "kill -TERM $$; sleep 5; exit 0"}, 5000, out);
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    EXPECT_EQ(out.exit_code, -1) << "killed by its SIGTERM (not an exit)";
    EXPECT_FALSE(out.timed_out);
}

}  // namespace
}  // namespace dlaunch::host
