#include "dlaunch/bootstrap.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "dlaunch/fd.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/pmix/job_source.hpp"

namespace dlaunch::bootstrap {
namespace {

std::optional<int> int_var(const EnvMap& env, const char* name) {
    auto it = env.find(name);
    if (it == env.end() || it->second.empty()) return std::nullopt;
    char* end = nullptr;
    long v = std::strtol(it->second.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v > (1L << 30)) return std::nullopt;
    return static_cast<int>(v);
}

std::string rank_label(const Peer& p) {
    return "bootstrap: rank " + std::to_string(p.rank);
}

// Every exchange of this process gets the next number, so that a rank that runs ahead into its next
// exchange cannot be mistaken for a late one of the previous exchange.
std::atomic<std::uint32_t> g_sequence{0};

// ---- PMIx ------------------------------------------------------------------------------------------

std::string to_hex(const std::string& bytes) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char c : bytes) {
        out += digits[c >> 4];
        out += digits[c & 15];
    }
    return out;
}

std::optional<std::string> from_hex(const std::string& hex) {
    if (hex.size() % 2) return std::nullopt;
    std::string out;
    for (size_t i = 0; i < hex.size(); i += 2) {
        auto nibble = [](char c) -> int {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            return -1;
        };
        int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
        if (hi < 0 || lo < 0) return std::nullopt;
        out += static_cast<char>(hi << 4 | lo);
    }
    return out;
}

// One PMIx connection per process, opened on first use and closed at exit: a second PMIx_Init after a
// PMIx_Finalize in the same process loses data of later fences (seen with PMIx 4.2 under mpirun).
Result<pmix::Session*> shared_session() {
    static std::mutex lock;
    static std::unique_ptr<pmix::Session> session;  // its destructor finalizes at exit
    std::lock_guard<std::mutex> hold(lock);
    if (session) return session.get();
    auto connected = pmix::Session::connect_if_available(host::environment());
    if (!connected) return connected.error();
    if (!*connected)
        return Error{"bootstrap: PMIx was chosen but PMIX_NAMESPACE/PMIX_RANK are not set",
                     "start the program under dlaunch-mpi, mpirun or srun --mpi=pmix"};
    session = std::move(*connected);
    return session.get();
}

Result<std::vector<std::string>> exchange_pmix(const Peer& peer, const std::vector<int>& roots, const std::string& mine,
                                               double timeout, std::uint32_t seq) {
    auto session = shared_session();
    if (!session) return Error{rank_label(peer) + ": " + session.error().what, session.error().hint};
    pmix::Session& s = **session;
    const std::string key = "dlaunch.bootstrap." + std::to_string(seq);
    if (std::find(roots.begin(), roots.end(), peer.rank) != roots.end())
        if (auto put = s.put(key, to_hex(mine)); !put)
            return Error{rank_label(peer) + ": put: " + put.error().what, put.error().hint};
    if (auto fenced = s.fence(timeout); !fenced)
        return Error{rank_label(peer) + ": fence: " + fenced.error().what,
                     "every rank must call the bootstrap (dlaunch::nccl::init) the same number of times"};
    std::vector<std::string> blobs;
    for (int root : roots) {
        auto value = s.get(root, key);
        if (!value) return Error{rank_label(peer) + ": get: " + value.error().what, value.error().hint};
        auto bytes = from_hex(*value);
        if (!bytes)
            return Error{rank_label(peer) + ": get: root rank " + std::to_string(root) + " published a malformed value",
                         "every rank must run the same dlaunch version"};
        blobs.push_back(std::move(*bytes));
    }
    return blobs;
}

// ---- TCP through rank 0 ----------------------------------------------------------------------------
// A client sends a hello (magic, sequence, rank, size, blob length) and its blob (roots only); rank 0
// answers every client with the count and the roots' blobs (length-prefixed) once all of them arrived.

constexpr std::array<char, 8> kMagic{'D', 'L', 'B', 'O', 'O', 'T', '0', '1'};

struct Hello {
    std::array<char, 8> magic = kMagic;
    std::uint32_t seq = 0;
    std::uint32_t rank = 0;
    std::uint32_t size = 0;
    std::uint32_t blob_len = 0;
};

// Reads or writes exactly `len` bytes before the deadline; false on timeout, EOF or error.
bool transfer(int fd, char* buf, size_t len, bool writing, Clock::time_point deadline) {
    size_t done = 0;
    while (done < len) {
        pollfd p{fd, static_cast<short>(writing ? POLLOUT : POLLIN), 0};
        int ready = ::poll(&p, 1, ms_left(deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) return false;
        ssize_t n = writing ? ::send(fd, buf + done, len - done, MSG_NOSIGNAL) : ::recv(fd, buf + done, len - done, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

std::string endpoint(const Peer& p) {
    return p.master_addr + ":" + std::to_string(p.master_port);
}

std::string encode_blobs(const std::vector<std::string>& blobs) {
    std::string out;
    auto put32 = [&out](std::uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put32(static_cast<std::uint32_t>(blobs.size()));
    for (auto& b : blobs) {
        put32(static_cast<std::uint32_t>(b.size()));
        out += b;
    }
    return out;
}

// Rank 0's listening socket on MASTER_PORT (IPv6 with v4-mapped addresses, else IPv4).
Result<Fd> listen_on_master_port(const Peer& peer) {
    Fd listener(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
    bool v6 = listener.get() >= 0;
    if (!v6) listener = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (listener.get() < 0) return Error{rank_label(peer) + ": socket: " + std::strerror(errno), ""};
    int one = 1, zero = 0;
    ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc;
    if (v6) {
        ::setsockopt(listener.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_addr = in6addr_any;
        a.sin6_port = htons(static_cast<std::uint16_t>(peer.master_port));
        rc = ::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
    } else {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_ANY);
        a.sin_port = htons(static_cast<std::uint16_t>(peer.master_port));
        rc = ::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    if (rc != 0 || ::listen(listener.get(), 1024) != 0) {
        int e = errno;
        return Error{rank_label(peer) + ": listen on port " + std::to_string(peer.master_port) +
                         " (MASTER_PORT): " + std::strerror(e),
                     e == EADDRINUSE ? "another program on this node holds MASTER_PORT (a torch TCPStore of the same "
                                       "job?); the NCCL bootstrap and a store cannot share the port"
                                     : "check MASTER_PORT"};
    }
    return listener;
}

// "3,5,9,..." for the first ranks that never arrived.
std::string missing_ranks(const std::vector<bool>& seen, int still_missing) {
    std::string missing;
    int shown = 0;
    for (size_t r = 0; r < seen.size() && shown < 8; ++r)
        if (!seen[r]) missing += (shown++ ? "," : "") + std::to_string(r);
    if (still_missing > shown) missing += ",...";
    return missing;
}

Result<std::vector<std::string>> serve(const Peer& peer, const std::vector<int>& roots, const std::string& mine,
                                       double timeout, std::uint32_t seq) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long>(timeout * 1000));
    auto listening = listen_on_master_port(peer);
    if (!listening) return listening.error();
    Fd listener = std::move(*listening);
    std::vector<std::optional<std::string>> blobs(roots.size());
    blobs[0] = mine;  // roots[0] is rank 0
    std::vector<Fd> clients;
    std::vector<bool> seen(static_cast<size_t>(peer.size), false);
    seen[0] = true;
    int arrived = 1;
    while (arrived < peer.size) {
        pollfd p{listener.get(), POLLIN, 0};
        int ready = ::poll(&p, 1, ms_left(deadline));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) {
            const std::string missing = missing_ranks(seen, peer.size - arrived);
            return Error{rank_label(peer) + ": " + std::to_string(peer.size - arrived) + " of " +
                             std::to_string(peer.size) + " ranks did not arrive within " +
                             std::to_string(static_cast<int>(timeout)) + " s (missing: " + missing + ")",
                         "every rank must call the bootstrap; check that none failed to start"};
        }
        Fd c(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (c.get() < 0) continue;
        // A connection that sends nothing (a port scanner, a stray client) may not hold up the others.
        const auto hello_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(5));
        Hello h;
        if (!transfer(c.get(), reinterpret_cast<char*>(&h), sizeof h, false, hello_deadline) || h.magic != kMagic)
            continue;                // not one of ours: drop it
        if (h.seq != seq) continue;  // a rank already in its next exchange: it reconnects
        if (h.size != static_cast<std::uint32_t>(peer.size) || h.rank >= h.size)
            return Error{rank_label(peer) + ": rank " + std::to_string(h.rank) + " says the job has " +
                             std::to_string(h.size) + " ranks, this one " + std::to_string(peer.size),
                         "every rank must see the same WORLD_SIZE and MASTER_ADDR:MASTER_PORT"};
        if (seen[h.rank])
            return Error{rank_label(peer) + ": rank " + std::to_string(h.rank) + " arrived twice",
                         "two processes have the same RANK; check the launch"};
        if (h.blob_len > (1u << 20))
            return Error{rank_label(peer) + ": rank " + std::to_string(h.rank) + " sent a " +
                             std::to_string(h.blob_len) + "-byte blob (at most 1 MiB)",
                         "every rank must run the same program"};
        std::string blob(h.blob_len, '\0');
        if (!transfer(c.get(), blob.data(), blob.size(), false, hello_deadline))
            return Error{rank_label(peer) + ": rank " + std::to_string(h.rank) + " sent a truncated message", ""};
        auto root = std::find(roots.begin(), roots.end(), static_cast<int>(h.rank));
        if (root != roots.end()) blobs[static_cast<size_t>(root - roots.begin())] = std::move(blob);
        seen[h.rank] = true;
        ++arrived;
        clients.push_back(std::move(c));
    }
    std::vector<std::string> out;
    for (auto& b : blobs) out.push_back(std::move(*b));  // every root arrived, rank 0 included
    std::string reply = encode_blobs(out);
    for (auto& c : clients)
        if (!transfer(c.get(), reply.data(), reply.size(), true, deadline))
            return Error{rank_label(peer) + ": a rank left before it received the bootstrap data",
                         "check that no rank failed"};
    return out;
}

// A non-blocking connect bounded by the deadline (a blocking one can take minutes on a dropped SYN).
bool connect_before(int fd, const addrinfo* a, Clock::time_point deadline) {
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) return true;
    if (errno != EINPROGRESS) return false;
    pollfd p{fd, POLLOUT, 0};
    int ready;
    do ready = ::poll(&p, 1, std::min(ms_left(deadline), 1000));
    while (ready < 0 && errno == EINTR);
    if (ready <= 0) return false;
    int err = 0;
    socklen_t len = sizeof err;
    return ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
}

Result<std::vector<std::string>> fetch(const Peer& peer, bool is_root, const std::string& mine, double timeout,
                                       std::uint32_t seq) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long>(timeout * 1000));
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (int rc = ::getaddrinfo(peer.master_addr.c_str(), std::to_string(peer.master_port).c_str(), &hints, &found); rc)
        return Error{rank_label(peer) + ": MASTER_ADDR " + peer.master_addr + ": " + ::gai_strerror(rc),
                     "MASTER_ADDR must name rank 0's node"};
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addrs(found, ::freeaddrinfo);

    Hello h;
    h.seq = seq;
    h.rank = static_cast<std::uint32_t>(peer.rank);
    h.size = static_cast<std::uint32_t>(peer.size);
    h.blob_len = is_root ? static_cast<std::uint32_t>(mine.size()) : 0;
    std::string hello(reinterpret_cast<const char*>(&h), sizeof h);
    if (is_root) hello += mine;

    // Rank 0 may not listen yet, or may still be busy with this rank's previous exchange: retry.
    while (true) {
        for (addrinfo* a = addrs.get(); a; a = a->ai_next) {
            Fd s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
            if (s.get() < 0 || !connect_before(s.get(), a, deadline)) continue;
            if (!transfer(s.get(), hello.data(), hello.size(), true, deadline)) continue;
            std::uint32_t count = 0;
            if (!transfer(s.get(), reinterpret_cast<char*>(&count), sizeof count, false, deadline)) continue;
            std::vector<std::string> blobs;
            bool complete = count < 1u << 20;
            for (std::uint32_t i = 0; complete && i < count; ++i) {
                std::uint32_t len = 0;
                complete =
                    transfer(s.get(), reinterpret_cast<char*>(&len), sizeof len, false, deadline) && len <= 1u << 20;
                std::string b(complete ? len : 0, '\0');
                complete = complete && transfer(s.get(), b.data(), b.size(), false, deadline);
                blobs.push_back(std::move(b));
            }
            if (complete) return blobs;
        }
        if (Clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return Error{rank_label(peer) + ": rank 0 did not answer at " + endpoint(peer) +
                     " (MASTER_ADDR:MASTER_PORT) within " + std::to_string(static_cast<int>(timeout)) + " s",
                 "rank 0 must call the bootstrap too; check that it started and did not fail"};
}

}  // namespace

std::string to_string(Via via) {
    return via == Via::Pmix ? "pmix" : "tcp";
}

Result<Peer> identify(const EnvMap& env) {
    Peer p;
    // PMIx only for programs that no dlaunch front-end started (a plain mpirun or srun --mpi=pmix): an
    // application that connects to PMIx after dlaunch-mpi's own connection as the same rank saw its
    // fences hang or return PARTIAL_SUCCESS under load, and an
    // agent's workers inherit the agent's PMIx identity. dlaunch's environment always has the TCP way.
    const bool pmix = env.contains("PMIX_RANK") && env.contains("PMIX_NAMESPACE");
    const bool from_dlaunch = env.contains("MASTER_ADDR") && env.contains("MASTER_PORT") && env.contains("RANK");
    p.via = pmix && !from_dlaunch ? Via::Pmix : Via::Tcp;
    auto rank = int_var(env, "RANK"), size = int_var(env, "WORLD_SIZE"), local = int_var(env, "LOCAL_RANK");
    if (p.via == Via::Pmix && !rank && !size) {  // a plain mpirun: this_rank() asks PMIx
        p.size = 0;
        return p;
    }
    if (!rank || !size || *size < 1 || *rank >= *size)
        return Error{"bootstrap: RANK and WORLD_SIZE are missing or invalid (RANK=" +
                         (env.contains("RANK") ? env.at("RANK") : std::string("unset")) + ", WORLD_SIZE=" +
                         (env.contains("WORLD_SIZE") ? env.at("WORLD_SIZE") : std::string("unset")) + ")",
                     "start the program with dlaunch, dlaunch-mpi or srun --dist-launch"};
    p.rank = *rank;
    p.size = *size;
    p.local_rank = local.value_or(0);
    if (p.via == Via::Tcp && p.size > 1) {
        auto port = int_var(env, "MASTER_PORT");
        if (!env.contains("MASTER_ADDR") || env.at("MASTER_ADDR").empty() || !port || *port < 1 || *port > 65535)
            return Error{"bootstrap: rank " + std::to_string(p.rank) +
                             ": no PMIx for this rank and MASTER_ADDR/MASTER_PORT are missing or invalid",
                         "start the program with dlaunch, dlaunch-mpi or srun --dist-launch"};
        p.master_addr = env.at("MASTER_ADDR");
        p.master_port = *port;
    }
    return p;
}

Result<Peer> this_rank() {
    auto p = identify(host::environment());
    if (!p || p->size > 0) return p;
    auto session = shared_session();
    if (!session) return session.error();
    auto job = (*session)->job();
    if (!job) return job.error();
    p->rank = job->rank;
    p->size = job->size;
    p->local_rank = job->local_rank;
    return p;
}

std::vector<int> roots(int size, int per_root) {
    if (size < 1) return {};
    per_root = std::max(1, per_root);
    int n = (size + per_root - 1) / per_root;
    std::vector<int> out;
    // Evenly spread: root i is the first rank of the i-th of n blocks.
    for (int i = 0; i < n; ++i) out.push_back(static_cast<int>(static_cast<long long>(i) * size / n));
    return out;
}

Result<int> ranks_per_root(const EnvMap& env) {
    if (!env.contains("DLAUNCH_NCCL_RANKS_PER_ROOT")) return kDefaultRanksPerRoot;
    auto v = int_var(env, "DLAUNCH_NCCL_RANKS_PER_ROOT");
    if (!v || *v < 1)
        return Error{"bootstrap: DLAUNCH_NCCL_RANKS_PER_ROOT=" + env.at("DLAUNCH_NCCL_RANKS_PER_ROOT") +
                         " is not a positive integer",
                     "set it to the number of ranks each NCCL bootstrap root serves (default " +
                         std::to_string(kDefaultRanksPerRoot) + "), or unset it"};
    return *v;
}

Result<double> timeout_seconds(const EnvMap& env) {
    auto it = env.find("DLAUNCH_BOOTSTRAP_TIMEOUT");
    if (it == env.end()) return kDefaultTimeoutSeconds;
    char* end = nullptr;
    double v = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end != '\0' || !(v > 0) || v > 1e6)
        return Error{"bootstrap: DLAUNCH_BOOTSTRAP_TIMEOUT=" + it->second + " is not a positive number of seconds",
                     "set it to how long ranks may wait for each other (default " +
                         std::to_string(static_cast<int>(kDefaultTimeoutSeconds)) + "), or unset it"};
    return v;
}

Result<std::vector<std::string>> exchange(const Peer& peer, const std::vector<int>& roots, const std::string& mine,
                                          double timeout_seconds) {
    const std::uint32_t seq = g_sequence++;
    if (roots.empty() || roots.front() != 0)
        return Error{rank_label(peer) + ": the first root must be rank 0", "this is a bug in the caller"};
    if (peer.size == 1) return std::vector<std::string>{mine};
    if (peer.via == Via::Pmix) return exchange_pmix(peer, roots, mine, timeout_seconds, seq);
    if (peer.rank == 0) return serve(peer, roots, mine, timeout_seconds, seq);
    const bool is_root = std::find(roots.begin(), roots.end(), peer.rank) != roots.end();
    return fetch(peer, is_root, mine, timeout_seconds, seq);
}

}  // namespace dlaunch::bootstrap
