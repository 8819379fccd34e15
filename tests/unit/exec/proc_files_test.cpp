#include "dlaunch/proc_files.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <thread>

namespace dlaunch {
namespace {

TEST(ProcFiles, StatGivesTheParentAndTheCpuTime) {
    auto self = read_proc_stat(::getpid());
    ASSERT_TRUE(self);
    EXPECT_EQ(self->ppid, ::getppid());
    const std::clock_t start = std::clock();  // this process's CPU time: spin for 100 ms of it
    while (std::clock() - start < CLOCKS_PER_SEC / 10) {
    }
    auto later = read_proc_stat(::getpid());
    ASSERT_TRUE(later);
    EXPECT_GE(later->cpu_seconds, self->cpu_seconds + 0.05) << "100 ms of spinning shows as CPU time";
}

TEST(ProcFiles, TheMainThreadsStatLeavesOutTheOtherThreadsCpuTime) {
    const auto main_start = read_main_thread_stat(::getpid());
    const auto process_start = read_proc_stat(::getpid());
    ASSERT_TRUE(main_start && process_start);
    const double main_before = main_start->cpu_seconds, process_before = process_start->cpu_seconds;
    std::thread([] {  // this thread's CPU time: spin for 200 ms of it while the main thread waits
        timespec start{}, now{};
        ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
        do ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
        while ((now.tv_sec - start.tv_sec) * 1e9 + static_cast<double>(now.tv_nsec - start.tv_nsec) < 2e8);
    })
        .join();
    auto main_thread = read_main_thread_stat(::getpid());
    ASSERT_TRUE(main_thread);
    EXPECT_EQ(main_thread->ppid, ::getppid());
    EXPECT_GE(read_proc_stat(::getpid())->cpu_seconds, process_before + 0.15) << "the process counts the thread";
    EXPECT_LT(main_thread->cpu_seconds, main_before + 0.1) << "the main thread only waited";
    EXPECT_LT(main_thread_cpu_seconds(::getpid()).value_or(1e9), main_before + 0.1) << "the hang monitor's measure";
}

void* spin_for_ever(void*) {
    volatile unsigned long n = 0;
    for (;;) {
        const unsigned long next = n + 1;
        n = next;
    }
    return nullptr;
}

// A main thread that ended before its process (pthread_exit) is a zombie thread: its CPU time stands still,
// so the process's is counted, which includes the thread left spinning.
TEST(ProcFiles, AfterTheMainThreadEndedTheProcesssCpuTimeCounts) {
    const pid_t child = ::fork();
    if (child == 0) {
        pthread_t spinner;
        ::pthread_create(&spinner, nullptr, spin_for_ever, nullptr);
        ::syscall(SYS_exit, 0);  // this thread alone, as pthread_exit would without unwinding through gtest
    }
    ASSERT_GT(child, 0);
    auto main_ended = [&] {
        auto stat = read_main_thread_stat(child);
        return stat && stat->state == 'Z';
    };
    for (int i = 0; i < 300 && !main_ended(); ++i) ::usleep(10000);
    EXPECT_TRUE(main_ended()) << "the main thread of the child ended within 3 s";
    const std::optional<double> start = main_thread_cpu_seconds(child);
    std::optional<double> later = start;
    for (int i = 0; i < 300 && start && later && *later < *start + 0.05; ++i) {
        ::usleep(10000);
        later = main_thread_cpu_seconds(child);
    }
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    ASSERT_TRUE(start && later);
    EXPECT_GE(*later, *start + 0.05) << "the spinning thread's CPU time counts once the main thread ended";
}

TEST(ProcFiles, StatSaysAnExitedChildIsAZombieUntilReaped) {
    EXPECT_EQ(read_proc_stat(::getpid())->state, 'R');
    pid_t child = ::fork();
    if (child == 0) ::_exit(3);
    siginfo_t info{};
    ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);  // exited, not reaped
    auto zombie = read_proc_stat(child);
    ASSERT_TRUE(zombie);
    EXPECT_EQ(zombie->state, 'Z');
    ::waitpid(child, nullptr, 0);
}

TEST(ProcFiles, StatOfAProcessThatIsGoneIsNothing) {
    pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    ::waitpid(child, nullptr, 0);
    EXPECT_FALSE(read_proc_stat(child));
    EXPECT_FALSE(read_main_thread_stat(child));
}

TEST(ProcFiles, ReadsAFileFromAnOffset) {
    const std::string path = ::testing::TempDir() + "/proc_files_test.txt";
    std::ofstream(path) << "header\nbody\n";
    EXPECT_EQ(read_file_from(path), "header\nbody\n");
    EXPECT_EQ(read_file_from(path, 7), "body\n");
    EXPECT_EQ(read_file_from(path + ".absent"), "");
    std::remove(path.c_str());
}

}  // namespace
}  // namespace dlaunch
