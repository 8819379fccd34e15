#include "dlaunch/run_output.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>

namespace dlaunch::host {
namespace {

void exec_child(const std::vector<std::string>& argv, int out, bool with_stderr) {
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // dup2 makes stdin inheritable
    if (null >= 0) ::dup2(null, 0);
    ::dup2(out, 1);
    if (with_stderr) ::dup2(out, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
}

}  // namespace

Output run_output(const std::vector<std::string>& argv, int timeout_ms, bool with_stderr) {
    Output result;
    int out[2];
    if (argv.empty() || ::pipe2(out, O_CLOEXEC) != 0) return result;
    const pid_t pid = ::fork();
    if (pid == 0) exec_child(argv, out[1], with_stderr);
    ::close(out[1]);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    char buf[4096];
    pollfd p{out[0], POLLIN, 0};
    while (pid > 0) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        const int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) {
            result.timed_out = ready == 0;
            break;
        }
        const ssize_t n = ::read(out[0], buf, sizeof buf);
        if (n <= 0) break;
        result.text.append(buf, static_cast<size_t>(n));
    }
    ::close(out[0]);
    if (pid <= 0) return result;
    if (result.timed_out) ::kill(pid, SIGKILL);
    int status = 0;
    pid_t reaped = 0;
    while ((reaped = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    if (reaped == pid && !result.timed_out && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    return result;
}

}  // namespace dlaunch::host
