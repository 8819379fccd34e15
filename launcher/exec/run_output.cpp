#include "dlaunch/run_output.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <thread>

namespace dlaunch::host {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The helper starts as a fresh program would: its own process group (a timeout kills all it started),
// no blocked signals, default dispositions (the agent blocks its stop signals and ignores SIGPIPE).
void exec_child(char* const* args, int out, bool with_stderr) {
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // dup2 makes stdin inheritable
    if (null >= 0) ::dup2(null, 0);
    ::dup2(out, 1);
    if (with_stderr) ::dup2(out, 2);
    ::execvp(args[0], args);
    ::_exit(127);
}

// What is in the pipe now, without waiting for more.
void drain(int fd, std::string& text) {
    pollfd p{fd, POLLIN, 0};
    char buf[4096];
    while (::poll(&p, 1, 0) > 0) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) return;
        text.append(buf, static_cast<size_t>(n));
    }
}

// Reads the child's output until it has exited (then what is left in the pipe), or the deadline: a child
// that closed its output but goes on counts as running, one whose own children keep the pipe open (or go on
// writing) after it exited as ended. Returns whether it exited (`status`) in time.
bool read_until_exit(pid_t pid, int fd, Clock::time_point deadline, std::string& text, int& status) {
    pollfd p{fd, POLLIN, 0};
    char buf[4096];
    for (;;) {
        if (::waitpid(pid, &status, WNOHANG) == pid) {
            if (p.fd >= 0) drain(fd, text);
            return true;
        }
        const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return false;
        // At most 50 ms: the exit is noticed by waitpid, not by the pipe.
        if (::poll(&p, 1, static_cast<int>(std::min(left, milliseconds(50)).count())) > 0) {
            const ssize_t n = ::read(fd, buf, sizeof buf);
            if (n > 0) text.append(buf, static_cast<size_t>(n));
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) p.fd = -1;  // end of output: only wait
        }
    }
}

// After SIGKILL: reaped within a few seconds, or left (a process stuck in the kernel cannot die; the caller
// must not hang on it).
void reap_killed(pid_t pid, int& status) {
    for (int i = 0; i < 50; ++i) {
        if (::waitpid(pid, &status, WNOHANG) != 0) return;
        std::this_thread::sleep_for(milliseconds(100));
    }
}

}  // namespace

Output run_output(const std::vector<std::string>& argv, int timeout_ms, bool with_stderr) {
    Output result;
    int out[2];
    if (argv.empty() || ::pipe2(out, O_CLOEXEC) != 0) return result;
    std::vector<char*> args;  // built before fork(): the child only calls async-signal-safe functions
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) exec_child(args.data(), out[1], with_stderr);
    ::close(out[1]);
    if (pid < 0) {
        ::close(out[0]);
        return result;
    }
    int status = 0;
    const bool exited = read_until_exit(pid, out[0], Clock::now() + milliseconds(timeout_ms), result.text, status);
    ::close(out[0]);
    if (!exited) {
        result.timed_out = true;
        ::kill(-pid, SIGKILL);
        reap_killed(pid, status);
        return result;
    }
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    return result;
}

}  // namespace dlaunch::host
