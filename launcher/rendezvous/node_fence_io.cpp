// The node-local fence for a job whose ranks all run on this node (mpirun on one machine): the same
// agreement as PMIx's put/fence/get on MASTER_ADDR/PORT, through one abstract Unix socket named after the
// job, without a PMIx client connection per rank (PMIx_Init and PMIx_Finalize alone are most of a small
// mpirun's start; bench/README.md).
//
// Whoever binds the socket first gathers: it reserves the port, accepts one connection per other rank
// (each sends its rank), and answers everybody with "ADDR PORT IFNAME" once all have arrived (IFNAME: the
// interface that routes to ADDR, looked up once for the node), or reports the
// missing ranks when --fence-timeout passes. The others connect, send their rank and read the answer.
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "dlaunch/clock.hpp"
#include "dlaunch/fd.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/job_setup.hpp"

namespace dlaunch {
namespace {

// Abstract namespace: nothing on disk to clean up, gone with the last descriptor. `label` comes before the
// job's id, so that a name cut to the socket's limit loses the end of the id, never the label.
socklen_t socket_address(const SchedulerInfo& info, sockaddr_un* addr, const std::string& label = "") {
    std::memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    std::string name = "dlaunch-mpi." + std::to_string(::getuid()) + "." + label + info.job_id +
                       (info.step_id.empty() ? "" : "." + info.step_id);
    name.resize(std::min(name.size(), sizeof addr->sun_path - 2));
    std::memcpy(addr->sun_path + 1, name.data(), name.size());
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

std::string prefix(int rank) {
    return "job: rank " + std::to_string(rank) + ": fence: ";
}

// Whether the process at the other end of a Unix socket runs as this user. Anyone may bind or connect to an
// abstract socket: another user could pose as the gatherer (and hand out a MASTER_ADDR of its choosing) or
// as a task (and break the fence); the kernel's word on the peer's uid tells them apart.
bool peer_is_this_user(int fd) {
    ucred cred{};
    socklen_t len = sizeof cred;
    return ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == ::getuid();
}

std::string missing_list(const std::set<int>& arrived, int size, int gatherer) {
    std::string out;
    int shown = 0, missing = 0;
    for (int r = 0; r < size; ++r) {
        if (r == gatherer || arrived.contains(r)) continue;
        ++missing;
        if (shown < 8) out += (shown++ ? ", " : "") + std::to_string(r);
    }
    if (missing > shown) out += ", ... (" + std::to_string(missing) + " in all)";
    return out;
}

bool write_all(int fd, const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
        ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

// One line ending in '\n' from fd before the deadline; nullopt on EOF, error or timeout.
std::optional<std::string> read_line(int fd, Clock::time_point deadline) {
    std::string line;
    char buf[128];
    while (true) {
        pollfd p{fd, POLLIN, 0};
        int rc = ::poll(&p, 1, ms_left(deadline));
        if (rc < 0 && errno == EINTR) continue;
        if (rc <= 0) return std::nullopt;
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return std::nullopt;
        line.append(buf, static_cast<size_t>(n));
        if (auto nl = line.find('\n'); nl != std::string::npos) return line.substr(0, nl);
        if (line.size() > 4096) return std::nullopt;
    }
}

// The variable each source takes a rank from, for messages about two ranks that say the same.
const char* rank_variable(const std::string& source) {
    if (source == "slurm") return "SLURM_PROCID";
    if (source == "pals") return "PALS_RANKID";
    if (source == "mvapich") return "MV2_COMM_WORLD_RANK";
    return "OMPI_COMM_WORLD_RANK";
}

// A joiner's "RANK LOCAL_RANK" line: another rank of this node's, each distinct, or the world is not one.
Status take_peer(const std::string& line, const SchedulerInfo& info, std::set<int>& ranks, std::set<int>& locals) {
    int rank = -1, local = -1;
    std::istringstream(line) >> rank >> local;
    auto not_one_world = [&](const std::string& what) {
        return Error{prefix(info.rank) + info.source + ": not one world: " + what,
                     "every rank must be started by the launcher itself (srun, mpirun, mpiexec), not by a script "
                     "that starts several from one task's variables; two jobs may also share the id " +
                         info.job_id};
    };
    if (rank < 0 || rank >= info.size || local < 0 || local >= info.local_size)
        return not_one_world("a rank on this node announced '" + line.substr(0, 40) + "', not a rank below " +
                             std::to_string(info.size) + " with a local rank below " + std::to_string(info.local_size));
    if (rank == info.rank || ranks.contains(rank))
        return not_one_world("two ranks on this node say they are rank " + std::to_string(rank) + " (" +
                             rank_variable(info.source) + ")");
    if (local == info.local_rank || locals.contains(local))
        return not_one_world("two ranks on this node say they are local rank " + std::to_string(local));
    ranks.insert(rank);
    locals.insert(local);
    return Ok{};
}

// Who did not arrive: ranks when the whole job is on this node, else this node's local ranks.
Error missing_error(const SchedulerInfo& info, const LaunchRequest& req, const std::set<int>& ranks,
                    const std::set<int>& locals) {
    const bool whole_job = info.local_size == info.size;
    return Error{prefix(info.rank) + "not every one of the " + std::to_string(info.local_size) +
                     (whole_job ? " tasks" : " tasks of this node") + " arrived within " +
                     std::to_string(static_cast<int>(req.fence_timeout_seconds + 0.5)) + " s (missing: " +
                     (whole_job ? "rank " + missing_list(ranks, info.size, info.rank)
                                : "local rank " + missing_list(locals, info.local_size, info.local_rank)) +
                     ")",
                 "every task must run dlaunch-mpi; check that none failed to start (raise --fence-timeout "
                 "for slow starts)"};
}

Result<AgreedMaster> gather(Fd listener, const SchedulerInfo& info, const LaunchRequest& req, bool choose_master) {
    AgreedMaster master;
    if (choose_master) {
        auto chosen = master_on_this_host(req);
        if (!chosen) return chosen.error();
        master = *chosen;
    }
    const auto deadline = Clock::now() + seconds_ms(req.fence_timeout_seconds);
    std::vector<Fd> peers;
    std::set<int> arrived, locals;
    std::vector<pollfd> fds;
    std::vector<std::string> partial;  // bytes read so far from peers[i]
    auto stop = [&peers](Error e) {    // the ranks waiting here stop at once too, not at their deadline
        for (auto& p : peers)
            if (p.get() >= 0) (void)write_all(p.get(), "stop\n");
        return e;
    };
    while (static_cast<int>(arrived.size()) < info.local_size - 1) {
        fds.assign(1, pollfd{listener.get(), POLLIN, 0});
        for (auto& p : peers) fds.push_back(pollfd{p.get(), POLLIN, 0});
        int rc = ::poll(fds.data(), fds.size(), ms_left(deadline));
        if (rc < 0 && errno == EINTR) continue;
        if (rc == 0) return stop(missing_error(info, req, arrived, locals));
        if (rc < 0)
            return Error{prefix(info.rank) + "poll: " + std::strerror(errno), "report this with the command line"};
        for (size_t i = 1; i < fds.size(); ++i) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[64];
            ssize_t n = ::recv(peers[i - 1].get(), buf, sizeof buf, 0);
            if (n <= 0 || partial[i - 1].size() > 48) {  // gone, or more than a rank's line: not counted
                peers[i - 1] = Fd();
                continue;
            }
            partial[i - 1].append(buf, static_cast<size_t>(n));
            if (auto nl = partial[i - 1].find('\n'); nl != std::string::npos)
                if (auto s = take_peer(partial[i - 1].substr(0, nl), info, arrived, locals); !s) return stop(s.error());
        }
        if (fds[0].revents & POLLIN) {
            Fd c(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
            if (c.get() >= 0 && !peer_is_this_user(c.get()))
                spdlog::warn("{}closed a connection from another user", prefix(info.rank));
            else if (c.get() >= 0) {
                peers.push_back(std::move(c));
                partial.emplace_back();
            }
        }
    }
    listener = Fd();                      // nobody else may join
    std::string answer = "census - -\n";  // only this node's ranks were counted: the master is agreed elsewhere
    if (choose_master) {
        // Every task here is on this node: one interface lookup serves them all.
        master.ifname = host::interface_for(master.addr);
        master.ifname_known = true;
        answer = master.addr + " " + std::to_string(master.port) + " " + master.ifname.value_or("-") + "\n";
    }
    for (auto& p : peers)
        if (p.get() >= 0 && !write_all(p.get(), answer))
            return Error{prefix(info.rank) + "a task left before it got MASTER_ADDR/PORT",
                         "see that task's error above"};
    return master;
}

Result<AgreedMaster> join(const sockaddr_un& addr, socklen_t len, const SchedulerInfo& info, const LaunchRequest& req) {
    // The gatherer has bound but not yet listened: refused for a moment. Bounded by the fence timeout.
    const auto deadline = Clock::now() + seconds_ms(req.fence_timeout_seconds);
    Fd sock;
    for (auto pause = std::chrono::microseconds(100);; pause = std::min(pause * 2, std::chrono::microseconds(1000))) {
        // Non-blocking: a listener whose queue is full (one that never accepts) is retried, not waited on.
        sock = Fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
        if (::connect(sock.get(), reinterpret_cast<const sockaddr*>(&addr), len) == 0) break;
        if ((errno != ECONNREFUSED && errno != EAGAIN) || Clock::now() >= deadline)
            return Error{
                prefix(info.rank) + "cannot reach the task that gathers this node's ranks: " + std::strerror(errno),
                "every task must run dlaunch-mpi; check that none failed to start"};
        std::this_thread::sleep_for(pause);
    }
    if (!peer_is_this_user(sock.get()))
        return Error{prefix(info.rank) + "the socket of this job's fence is held by another user",
                     "another user squats the job's name (" + info.job_id +
                         "): start the job with another id, and report that user"};
    if (!write_all(sock.get(), std::to_string(info.rank) + " " + std::to_string(info.local_rank) + "\n"))
        return Error{prefix(info.rank) + "the gathering task went away", "see its error above"};
    // The gatherer answers once everybody arrived, or gives up at its own deadline: a little slack here.
    auto line = read_line(sock.get(), deadline + std::chrono::seconds(5));
    if (!line)
        return Error{
            prefix(info.rank) + "no MASTER_ADDR/PORT from the gathering task (it reports which tasks did not arrive)",
            "every task must run dlaunch-mpi; check that none failed to start (raise --fence-timeout "
            "for slow starts)"};
    AgreedMaster master;                       // "ADDR PORT IFNAME", IFNAME "-" when no interface routes to ADDR
    if (*line == "census - -") return master;  // the node's ranks were counted; the master comes from elsewhere
    if (*line == "stop")
        return Error{prefix(info.rank) + "the rank that gathers this node's ranks stopped", "its error above says why"};
    std::istringstream fields(*line);
    std::string ifname;
    fields >> master.addr >> master.port >> ifname;
    if (!ifname.empty()) {
        master.ifname_known = true;
        if (ifname != "-") master.ifname = ifname;
    }
    if (master.addr.empty() || master.port <= 0 || !master.ifname_known)
        return Error{prefix(info.rank) + "garbled answer '" + *line + "'", "two jobs share the id " + info.job_id};
    return master;
}

// Whoever binds the job's socket first gathers this node's ranks, the others join it.
Result<AgreedMaster> meet_on_this_node(const SchedulerInfo& info, const LaunchRequest& req, bool choose_master) {
    sockaddr_un addr;
    socklen_t len = socket_address(info, &addr);
    Fd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (listener.get() < 0)
        return Error{prefix(info.rank) + "socket: " + std::strerror(errno), "report this with the command line"};
    if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&addr), len) == 0) {
        if (::listen(listener.get(), std::max(16, info.local_size)) != 0)
            return Error{prefix(info.rank) + "listen: " + std::strerror(errno), "report this with the command line"};
        spdlog::debug("rank {} gathers the {} tasks of job {} on this node", info.rank, info.local_size, info.job_id);
        return gather(std::move(listener), info, req, choose_master);
    }
    if (errno != EADDRINUSE)
        return Error{prefix(info.rank) + "bind: " + std::strerror(errno), "report this with the command line"};
    return join(addr, len, info, req);
}

}  // namespace

Result<AgreedMaster> agree_on_this_node(const SchedulerInfo& info, const LaunchRequest& req) {
    if (info.size == 1) {
        AgreedMaster master;
        master.addr = req.master_addr.value_or(host::hostname());
        master.port = req.master_port.value_or(0);
        if (!req.master_port) {
            auto port = host::reserve_free_port();
            if (!port) return port.error();
            master.port = *port;
        }
        return master;
    }
    return meet_on_this_node(info, req, true);
}

Status claim_on_this_node(const SchedulerInfo& info, Claim what, bool keep_across_exec) {
    const bool rank = what == Claim::Rank;
    const int n = rank ? info.rank : info.local_rank;
    sockaddr_un addr;
    socklen_t len = socket_address(info, &addr, (rank ? "rank." : "local.") + std::to_string(n) + ".");
    int fd = ::socket(AF_UNIX, SOCK_STREAM | (keep_across_exec ? 0 : SOCK_CLOEXEC), 0);
    if (fd < 0)
        return Error{prefix(info.rank) + "socket: " + std::strerror(errno), "report this with the command line"};
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), len) == 0 && ::listen(fd, 1) == 0) return Ok{};
    const int bind_errno = errno;
    ::close(fd);
    if (bind_errno != EADDRINUSE)
        return Error{prefix(info.rank) + "bind: " + std::strerror(bind_errno), "report this with the command line"};
    // Non-blocking: a holder that never accepts must not hold this rank up.
    Fd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), len) == 0 && !peer_is_this_user(probe.get()))
        return Error{prefix(info.rank) + "another user holds this rank's name on the node",
                     "another user squats the job's name (" + info.job_id + "): report that user"};
    const std::string who = rank ? "rank " + std::to_string(n) + " (" + rank_variable(info.source) + ")"
                                 : "local rank " + std::to_string(n) + " (" + info.source + "'s placement)";
    return Error{prefix(info.rank) + info.source + ": not one world: two processes on this node say they are " + who,
                 rank ? "every rank must be started by the launcher itself (srun, mpirun, mpiexec), not by a script "
                        "that starts several from one task's variables"
                      : "the launcher placed two of its nodes on this one host (a host list that names it twice, "
                        "e.g. as localhost and by its name): name each host once"};
}

Status count_this_nodes_ranks(const SchedulerInfo& info, const LaunchRequest& req) {
    if (req.launcher != Launcher::PerRank) return Ok{};  // an agent: one per node, which its plan checks
    if (auto s = claim_on_this_node(info, Claim::Rank, true); !s) return s;
    if (info.local_size <= 1) return Ok{};
    auto met = meet_on_this_node(info, req, false);
    if (!met) return met.error();
    return Ok{};
}

}  // namespace dlaunch
