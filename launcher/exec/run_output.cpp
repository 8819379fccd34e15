#include "dlaunch/run_output.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>

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

// Reads the child's output until it has exited and nothing more is there to read, or the deadline: a
// child that closed its output but goes on, or whose own children keep the pipe open after it exited, is
// judged by its exit, not by the pipe. Returns whether it exited (`status`) in time.
bool read_until_exit(pid_t pid, int fd, Clock::time_point deadline, std::string& text, int& status) {
    pollfd p{fd, POLLIN, 0};
    char buf[4096];
    bool exited = false;
    for (;;) {
        const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return false;
        const int ready = ::poll(&p, 1, static_cast<int>(std::min(left, milliseconds(50)).count()));
        if (ready < 0 && errno != EINTR) return false;
        if (ready > 0) {
            const ssize_t n = ::read(fd, buf, sizeof buf);
            if (n > 0) text.append(buf, static_cast<size_t>(n));
            if (n <= 0) p.fd = -1;  // end of output: poll() now only waits
        }
        if (!exited) exited = ::waitpid(pid, &status, WNOHANG) == pid;
        if (exited && ready <= 0) return true;  // gone, and nothing more came in this round
        if (exited && p.fd < 0) return true;
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
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        return result;
    }
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    return result;
}

}  // namespace dlaunch::host
