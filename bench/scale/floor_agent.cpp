// The floor for bench/scale/c10d_agents.py: the least a group of N agents can do, on the same command line.
//
//   bench/scale/c10d_agents.py floor --agents 4,16,...    (builds it: g++ -O2, in its temporary directory)
//
// It takes dlaunch's c10d options (--nnodes N --rdzv-endpoint HOST:PORT --local-addr ADDR ... --no-python
// WORKER; the others are read and ignored) and does only what every agent must: the agent whose --local-addr
// is HOST listens on PORT (the leader, rank 0); the others connect to it from their own address. Once N-1 have
// connected the leader sends each one its rank (4 bytes) and every agent fork+execs WORKER with RANK,
// LOCAL_RANK=0, WORLD_SIZE and TORCHELASTIC_RESTART_COUNT. A worker that fails makes its agent send 'F'; the
// leader then sends 'R' to every member, and each agent stops its worker (SIGTERM, waited for) and starts the
// next attempt's. A worker that ends well: 'D'; once every rank's has in one attempt, the leader closes the
// connections and every agent exits 0. Each message is two bytes, its kind and the attempt (mod 256): the
// leader passes over words of an earlier attempt (a worker that failed as the restart began). No authentication, no
// logs, no health checks, no hang detection, no store, no second attempt at anything: a floor, not a launcher. One
// epoll at the leader (no O(N) poll), two bytes per member per event. Exit status: 0, or 1 on any error (said on
// stderr). No heartbeats, unless --floor-beats: then it keeps dlaunch's heartbeat duty with dlaunch's defaults
// (group_channel.cpp, group_run.cpp), the least a launcher that finds lost nodes does while nothing happens: a
// member wakes once a second and beats ('B'), the leader looks at every connection every 100 ms and beats each
// member it has said nothing to for a second; either end that hears nothing for 10 s gives up.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "floor_agent: %s: %s\n", what, std::strerror(errno));
    std::exit(1);
}

struct Options {
    int nnodes = 0;
    std::string host, local;
    int port = 0;
    char** worker = nullptr;  // WORKER [ARGS...], null-terminated (argv's tail)
    bool beats = false;       // --floor-beats
};

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
constexpr milliseconds kBeat{1000}, kSweep{100}, kLostAfter{10000};

Options parse(int argc, char** argv) {
    Options o;
    int end = 1;
    while (end < argc && std::string(argv[end]) != "--no-python") ++end;
    if (end + 1 < argc) o.worker = argv + end + 1;
    for (int i = 1; i < end; ++i) o.beats = o.beats || std::string(argv[i]) == "--floor-beats";
    for (int i = 1; i + 1 < end; ++i) {  // only these take a value; other options are passed over
        std::string a = argv[i], v = argv[i + 1];
        if (a == "--nnodes") o.nnodes = std::atoi(v.c_str());
        if (a == "--local-addr") o.local = v;
        if (a == "--rdzv-endpoint") {
            o.host = v.substr(0, v.rfind(':'));
            o.port = std::atoi(v.substr(v.rfind(':') + 1).c_str());
        }
    }
    if (o.nnodes < 1 || o.host.empty() || o.local.empty() || !o.worker || !*o.worker) {
        std::fprintf(stderr, "floor_agent: needs --nnodes, --rdzv-endpoint, --local-addr and --no-python WORKER\n");
        std::exit(1);
    }
    return o;
}

sockaddr_in address(const std::string& ip, int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (::inet_pton(AF_INET, ip.c_str(), &a.sin_addr) != 1) die("address");
    return a;
}

int signal_fd() {  // SIGCHLD read from a descriptor, in the same wait as the sockets
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    if (::sigprocmask(SIG_BLOCK, &set, nullptr) != 0) die("sigprocmask");
    int fd = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd < 0) die("signalfd");
    return fd;
}

// Every word goes out at once (as dlaunch's channel, group_channel.cpp): under Nagle's algorithm a word that
// follows a beat not acknowledged yet would wait for the peer's delayed ACK.
int no_delay(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

void say(int fd, char kind, int attempt) {
    const char word[2] = {kind, static_cast<char>(attempt & 0xff)};
    if (::send(fd, word, 2, MSG_NOSIGNAL) != 2) die("send");
}

// One agent's worker: started, stopped, and how its last one ended.
class Worker {
public:
    Worker(char** argv, int rank, int world) : argv_(argv), rank_(rank), world_(world) {}

    void start(int attempt) {
        std::string env[] = {"RANK=" + std::to_string(rank_), "GROUP_RANK=" + std::to_string(rank_), "LOCAL_RANK=0",
                             "WORLD_SIZE=" + std::to_string(world_),
                             "TORCHELASTIC_RESTART_COUNT=" + std::to_string(attempt)};
        pid_ = ::fork();
        if (pid_ < 0) die("fork");
        if (pid_ == 0) {
            sigset_t none;
            sigemptyset(&none);
            ::sigprocmask(SIG_SETMASK, &none, nullptr);
            for (auto& e : env) ::putenv(e.data());
            ::execv(argv_[0], argv_);
            _exit(127);
        }
    }

    void stop() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGTERM);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

    // After SIGCHLD: 'F' when the worker failed, 'D' when it ended well, 0 while it runs.
    char reap() {
        int status = 0;
        if (pid_ <= 0 || ::waitpid(pid_, &status, WNOHANG) != pid_) return 0;
        pid_ = -1;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 'D' : 'F';
    }

private:
    char** argv_;
    int rank_, world_;
    pid_t pid_ = -1;
};

void drain(int sfd) {
    signalfd_siginfo si;
    while (::read(sfd, &si, sizeof si) == sizeof si) {
    }
}

// Each connection's clock (--floor-beats): when it last said and heard something.
struct Peer {
    int fd = -1;
    Clock::time_point sent, heard;
};

void say(Peer& p, char kind, int attempt) {
    say(p.fd, kind, attempt);
    p.sent = Clock::now();
}

// Reads one word from a peer that is readable; false when it left.
bool hear(Peer& p, char (&word)[2]) {
    if (::recv(p.fd, word, 2, MSG_WAITALL) != 2) return false;
    p.heard = Clock::now();
    return true;
}

// The leader's sweep (--floor-beats): a beat to each member told nothing for kBeat; none silent for kLostAfter.
void sweep(std::vector<Peer>& members, int attempt) {
    const auto now = Clock::now();
    for (Peer& m : members) {
        if (now - m.heard >= kLostAfter) die("a member fell silent");
        if (now - m.sent >= kBeat) say(m, 'B', attempt);
    }
}

int lead(const Options& o) {
    int ls = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int on = 1;
    ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    sockaddr_in a = address(o.host, o.port);
    if (ls < 0 || ::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(ls, 4096) != 0) die("listen");
    std::vector<Peer> members;
    while (static_cast<int>(members.size()) < o.nnodes - 1) {
        int c = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) die("accept");
        members.push_back({no_delay(c), Clock::now(), Clock::now()});
    }
    for (size_t i = 0; i < members.size(); ++i) {
        uint32_t rank = htonl(static_cast<uint32_t>(i + 1));
        if (::send(members[i].fd, &rank, sizeof rank, MSG_NOSIGNAL) != sizeof rank) die("send");
    }
    int sfd = signal_fd(), ep = ::epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{EPOLLIN, {}};
    ev.data.u64 = 0;  // the signal descriptor; member i is i + 1
    ::epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
    for (size_t i = 0; i < members.size(); ++i) {
        ev.data.u64 = i + 1;
        ::epoll_ctl(ep, EPOLL_CTL_ADD, members[i].fd, &ev);
    }
    Worker worker(o.worker, 0, o.nnodes);
    int attempt = 0, done = 0;
    worker.start(attempt);
    auto restart = [&] {
        ++attempt;
        done = 0;
        for (Peer& m : members) say(m, 'R', attempt);
        worker.stop();
        worker.start(attempt);
    };
    std::vector<epoll_event> ready(256);
    auto next_sweep = Clock::now() + kSweep;
    while (done < o.nnodes) {
        const int wait = o.beats ? static_cast<int>(std::max<int64_t>(
                                       0, std::chrono::ceil<milliseconds>(next_sweep - Clock::now()).count()))
                                 : -1;
        int k = ::epoll_wait(ep, ready.data(), static_cast<int>(ready.size()), wait);
        if (k < 0 && errno != EINTR) die("epoll_wait");
        for (int i = 0; i < k; ++i) {
            char word[2] = {0, static_cast<char>(attempt & 0xff)};
            const uint64_t who = ready[i].data.u64;
            if (who == 0) {
                drain(sfd);
                word[0] = worker.reap();
            } else if (!hear(members[who - 1], word)) {
                std::fprintf(stderr, "floor_agent: a member left\n");
                return 1;
            }
            if (word[0] == 'B' || word[1] != static_cast<char>(attempt & 0xff)) continue;  // a beat, an old word
            if (word[0] == 'F') restart();
            if (word[0] == 'D') ++done;
        }
        if (o.beats && Clock::now() >= next_sweep) {
            sweep(members, attempt);
            next_sweep = Clock::now() + kSweep;
        }
    }
    return 0;  // the members see the connection close and exit
}

// A descriptor readable once a beat (--floor-beats), as dlaunch's attempt wait ticks; -1 without beats.
int beat_timer(bool beats) {
    if (!beats) return -1;
    int fd = ::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    const itimerspec every{{1, 0}, {1, 0}};
    if (fd < 0 || ::timerfd_settime(fd, 0, &every, nullptr) != 0) die("timerfd");
    return fd;
}

int follow(const Options& o) {
    int s = -1;
    sockaddr_in local = address(o.local, 0), leader = address(o.host, o.port);
    for (;;) {  // the leader may not listen yet
        s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) die("bind");
        if (::connect(s, reinterpret_cast<sockaddr*>(&leader), sizeof leader) == 0) break;
        if (errno != ECONNREFUSED) die("connect");
        ::close(s);
        ::usleep(10000);
    }
    uint32_t rank = 0;
    if (::recv(s, &rank, sizeof rank, MSG_WAITALL) != sizeof rank) die("no rank from the leader");
    Peer lead{no_delay(s), Clock::now(), Clock::now()};
    int sfd = signal_fd(), tfd = beat_timer(o.beats);
    Worker worker(o.worker, static_cast<int>(ntohl(rank)), o.nnodes);
    int attempt = 0;
    worker.start(attempt);
    pollfd fds[3] = {{s, POLLIN, 0}, {sfd, POLLIN, 0}, {tfd, POLLIN, 0}};
    for (;;) {
        if (::poll(fds, tfd < 0 ? 2 : 3, -1) < 0) {
            if (errno == EINTR) continue;
            die("poll");
        }
        if (fds[0].revents) {  // first: a restart stops (and reaps) a worker that failed meanwhile
            char word[2];
            if (!hear(lead, word)) break;  // the leader closed: the job is over
            if (word[0] == 'R') {
                worker.stop();
                worker.start(++attempt);
            }
        }
        if (fds[1].revents) {
            drain(sfd);
            if (char c = worker.reap()) say(lead, c, attempt);
        }
        if (tfd >= 0 && fds[2].revents) {  // an eighth of a beat early, as dlaunch's member (Member::poll)
            uint64_t ticks = 0;
            (void)::read(tfd, &ticks, sizeof ticks);
            if (Clock::now() - lead.heard >= kLostAfter) die("the leader fell silent");
            if (Clock::now() - lead.sent >= kBeat - kBeat / 8) say(lead, 'B', attempt);
        }
    }
    worker.stop();
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o = parse(argc, argv);
    return o.local == o.host ? lead(o) : follow(o);
}
