#include "dlaunch/guardian.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <initializer_list>
#include <utility>

namespace dlaunch {
namespace {

constexpr int kMaxGroups = 16384;
// The agent's word that the pipe is full: read it. Ignored by default, should it reach another process.
constexpr int kKick = SIGURG;
constexpr int kKickEveryMs = 1000;  // while the pipe stays full (a guardian stopped, SIGSTOP)

// Between fork and _exit only system calls: the agent may hold locks in other threads.
void say(const char* text) {
    size_t n = 0;
    while (text[n]) ++n;
    (void)!::write(2, text, n);
}

void say_number(long value) {
    char digits[24];
    int i = sizeof digits;
    do {
        digits[--i] = static_cast<char>('0' + value % 10);
        value /= 10;
    } while (value > 0 && i > 0);
    (void)!::write(2, digits + i, sizeof digits - static_cast<size_t>(i));
}

// Reads the agent's events until the pipe closes; returns how many groups are still held then. Between reads it
// sleeps until the agent hangs up or kicks it (kKick, when the pipe is full): a write does not wake it (poll
// without POLLIN), so that the agent's starts and stops cost it a write each, not a wake-up of the guardian on
// every node in the middle of a launch or a group restart (perf showed both). What came meanwhile waits in the
// pipe and is read before the hang-up is acted on. The kick stays blocked but while the guardian sleeps (ppoll), so
// that one sent just before it sleeps is not lost.
int follow(int in, pid_t* groups, const sigset_t& kick_unblocked) {
    ::fcntl(in, F_SETFL, O_NONBLOCK);
    pollfd hangup{in, 0, 0};
    int held = 0;
    int32_t events[256];
    for (;;) {
        ssize_t got = ::read(in, events, sizeof events);
        const int error = got < 0 ? errno : 0;
        if (error == EAGAIN) ::ppoll(&hangup, 1, nullptr, &kick_unblocked);
        if (error == EAGAIN || error == EINTR) continue;
        if (got <= 0) return held;
        for (ssize_t i = 0; i < got / static_cast<ssize_t>(sizeof(int32_t)); ++i) {
            const int32_t v = events[i];
            if (v > 0 && held < kMaxGroups) groups[held++] = v;
            for (int j = 0; v < 0 && j < held; ++j) {
                if (groups[j] != -v) continue;
                groups[j] = groups[--held];
                break;
            }
        }
    }
}

void on_kick(int) {}

[[noreturn]] void guard(int in, pid_t agent) {
    // Its own process group: `kill -9 -AGENT_PGID` must not take the guardian along with the agent.
    ::setpgid(0, 0);
    ::prctl(PR_SET_NAME, "dlaunch-guard");
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU})
        ::signal(s, SIG_IGN);
    struct sigaction kick {};
    kick.sa_handler = on_kick;  // no SA_RESTART: it ends the ppoll
    ::sigaction(kKick, &kick, nullptr);
    sigset_t none, only_kick;
    sigemptyset(&none);
    sigemptyset(&only_kick);
    sigaddset(&only_kick, kKick);
    ::sigprocmask(SIG_SETMASK, &only_kick, nullptr);
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);  // stderr stays: the one line below is for whoever watched the agent
    if (in != 3) ::dup2(in, 3);
    if (::close_range(4, ~0U, 0) != 0) {  // kernels before 5.9
        rlimit limit{};
        const rlim_t top = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 ? std::min<rlim_t>(limit.rlim_cur, 1 << 20) : 1024;
        for (rlim_t fd = 4; fd < top; ++fd) ::close(static_cast<int>(fd));
    }
    static pid_t groups[kMaxGroups];
    const int held = follow(3, groups, none);
    for (int i = 0; i < held; ++i) ::kill(-groups[i], SIGKILL);
    if (held > 0) {
        say("dlaunch: guardian: the agent (pid ");
        say_number(agent);
        say(") ended without stopping its workers; killed what was left of ");
        say_number(held);
        say(held == 1 ? " worker's process group\n" : " workers' process groups\n");
    }
    ::_exit(0);
}

// Forks a guardian: its pipe's write end and its pid, or false (errno set).
bool fork_guardian(int& pipe, pid_t& pid) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;  // a full pipe: send()
    const pid_t agent = ::getpid();
    const pid_t child = ::fork();
    if (child < 0) {
        const int e = errno;
        ::close(fds[0]), ::close(fds[1]);
        errno = e;
        return false;
    }
    if (child == 0) {
        ::close(fds[1]);
        guard(fds[0], agent);
    }
    ::close(fds[0]);
    pipe = fds[1];
    pid = child;
    return true;
}

// The guardian fork_ahead() made, until a start() takes it.
int ahead_pipe = -1;
pid_t ahead_pid = -1;

}  // namespace

// One that cannot be forked now is forked by start(), which says so if it fails again.
void Guardian::fork_ahead() {
    if (ahead_pid < 0) fork_guardian(ahead_pipe, ahead_pid);
}

bool Guardian::start() {
    if (ahead_pid > 0) {
        pipe_ = std::exchange(ahead_pipe, -1);
        pid_ = std::exchange(ahead_pid, -1);
        if (!ended_unseen()) return true;  // else it ended meanwhile (killed by someone): fork another
    }
    return fork_guardian(pipe_, pid_);
}

// A full pipe (64 KiB, 16,384 events, unless the user is over fs.pipe-user-pages-soft: then 1,024) is read
// once the guardian is kicked; the guardian is this process's child, unreaped, so its pid is no one else's.
void Guardian::send(int value) {
    if (pipe_ < 0) return;
    const int32_t v = value;
    for (;;) {
        if (::write(pipe_, &v, sizeof v) == static_cast<ssize_t>(sizeof v)) return;
        if (errno == EINTR) continue;
        if (errno != EAGAIN) return;  // the guardian is gone (EPIPE): ended_unseen() says so
        ::kill(pid_, kKick);
        pollfd room{pipe_, POLLOUT, 0};
        ::poll(&room, 1, kKickEveryMs);
    }
}

void Guardian::hold(pid_t pgid) {
    send(pgid);
}
void Guardian::release(pid_t pgid) {
    send(-pgid);
}

void Guardian::forget() {
    if (pipe_ >= 0) ::close(pipe_);
    pipe_ = -1;
    pid_ = -1;
}

bool Guardian::ended_unseen() {
    if (pid_ <= 0 || ::waitpid(pid_, nullptr, WNOHANG) != pid_) return false;
    forget();
    return true;
}

void Guardian::hang_up() {
    if (pipe_ >= 0) ::close(pipe_);
    pipe_ = -1;
}

void Guardian::reap() {
    hang_up();
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
}

Guardian::~Guardian() {
    reap();
}

}  // namespace dlaunch
