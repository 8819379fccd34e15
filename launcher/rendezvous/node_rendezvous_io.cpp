// The node rendezvous's sockets (the protocol and rank rules are in node_rendezvous.cpp, pure).
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>
#include <thread>

#include "dlaunch/clock.hpp"
#include "dlaunch/fd.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/ipv4.hpp"
#include "dlaunch/job_setup.hpp"
#include "dlaunch/node_rendezvous.hpp"
#include "dlaunch/nonce.hpp"
#include "dlaunch/plan.hpp"
#include "dlaunch/rdzv_auth.hpp"
#include "dlaunch/refusal_log.hpp"
#include "dlaunch/rendezvous_door.hpp"
#include "dlaunch/side_thread.hpp"
#include "dlaunch/stranger_room.hpp"
#include "hosting.hpp"

namespace dlaunch {
namespace rdzv_host {

sockaddr_in make_addr(const std::string& ip, int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
    return a;
}

// One line of at most `most` bytes before the deadline, else why not (`why`). Read in chunks: what follows
// the line stays in `rest` for the next call.
std::optional<std::string> read_line(int fd, Clock::time_point deadline, size_t most, std::string& rest, NoLine& why) {
    char buf[16 << 10];
    for (;;) {
        const auto nl = rest.find('\n');
        if (nl != std::string::npos && nl < most) {
            std::string line = rest.substr(0, nl + 1);
            rest.erase(0, nl + 1);
            return line;
        }
        if (nl != std::string::npos || rest.size() >= most) return why = NoLine::TooLong, std::nullopt;
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, ms_left(deadline)) <= 0) return why = NoLine::Timeout, std::nullopt;
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) return why = n == 0 || errno == ECONNRESET ? NoLine::Closed : NoLine::Timeout, std::nullopt;
        rest.append(buf, static_cast<size_t>(n));
    }
}

// The host's answer names every node (its address and share): its bound grows with the run.
size_t reply_bytes(const LaunchRequest& req) {
    return 4096 + static_cast<size_t>(req.nnodes.max) * 512;
}

void write_line(int fd, const std::string& line) {
    size_t off = 0;
    while (off < line.size()) {
        ssize_t n = ::send(fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
        if (n <= 0) return;
        off += static_cast<size_t>(n);
    }
}

std::string rendezvous_job(const LaunchRequest& req) {
    return req.paddle.layout ? req.paddle.job_id : req.rdzv_id;
}

// The IPv4 address of one end of a connection: this side's (getsockname) or the peer's (getpeername).
std::string address_of(int fd, int (*end)(int, sockaddr*, socklen_t*)) {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    char buf[INET_ADDRSTRLEN] = "?";
    if (end(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
    return buf;
}

Refusal refusal_for(const LaunchRequest& req, const JoinHello& hello, const std::vector<Joiner>& joiners) {
    const int want = req.nnodes.max;
    const std::string ranks = "give each node its own --node-rank from 0 to " + std::to_string(want - 1) + ", or none";
    if (hello.job != rendezvous_job(req))
        return {"this node is of job '" + hello.job + "', the host of job '" + rendezvous_job(req) + "'",
                std::string("give every node the same ") + (req.paddle.layout ? "--job_id" : "--rdzv-id")};
    if (const std::string shape = rendezvous_shape(req); hello.shape != shape)
        return {"this node asks for '" + hello.shape + "', the host for '" + shape + "'",
                "give every node the same worker options (nodes may differ in --nproc-per-node and --role)", true};
    if (hello.rank >= want)
        return {"rank " + std::to_string(hello.rank) + " is out of range for " + std::to_string(want) + " nodes", ranks,
                true};
    for (auto& j : joiners)
        if (hello.rank >= 0 && j.hello.rank == hello.rank)
            return {"rank " + std::to_string(hello.rank) + " is taken", ranks, true};
    if (req.node_rank && hello.rank == *req.node_rank)
        return {"rank " + std::to_string(hello.rank) + " is the host's", ranks, true};
    return {};
}

// Node ranks for everyone, each joiner told its own; this node's assignment.
// `at` is where the run stands (its assignment's node ranks and addresses are filled here).
Result<NodeAssignment> assign(const LaunchRequest& req, std::vector<Joiner>& joiners, const std::string& advertise,
                              int port, const NodeShare& own, const rdzv_auth::Proofs& proofs, Met at) {
    const int n = static_cast<int>(joiners.size()) + 1;
    std::vector<int> requested{req.node_rank.value_or(-1)};
    for (auto& j : joiners) requested.push_back(j.hello.rank);
    if (req.node_rank && *req.node_rank >= n) requested[0] = -1;
    auto ranks = assign_node_ranks(requested);
    if (!ranks) {
        for (auto& j : joiners) write_line(j.fd.get(), encode_refusal(ranks.error().what));
        return ranks.error();
    }
    NodeAssignment a{n,
                     (*ranks)[0],
                     advertise,
                     port,
                     std::vector<std::string>(static_cast<size_t>(n)),
                     at.assignment.rendezvous_port,
                     {}};
    a.node_addrs[static_cast<size_t>((*ranks)[0])] = advertise;
    for (size_t i = 0; i < joiners.size(); ++i)
        a.node_addrs[static_cast<size_t>((*ranks)[i + 1])] = joiners[i].hello.addr;
    a.master_addr = a.node_addrs[0];  // the static form's nodes keep their own --master-addr (make_plan)
    if (!req.paddle.ps) {             // Paddle's parameter-server layout fixes every node's processes itself
        a.shares.resize(static_cast<size_t>(n));
        a.shares[static_cast<size_t>((*ranks)[0])] = own;
        for (size_t i = 0; i < joiners.size(); ++i)
            a.shares[static_cast<size_t>((*ranks)[i + 1])] = joiners[i].hello.share;
    }
    // A host that is not node 0 does not lead: the socket it would have handed to its leader is closed before
    // any node hears its answer (node 0 then listens on that port, on this host too when it is the same one).
    // (`at` is a copy: the descriptor is closed through the pointer it shares with the caller's Met.)
    if ((*ranks)[0] != 0 && at.group_listener) at.group_listener->reset();
    // Every answer is proved before any is sent: a proof that cannot be made (munged busy) refuses them all,
    // so that no node starts its workers for a host that ends.
    std::vector<std::string> lines;
    at.assignment = a;
    // Node 0 leads the group and names its members by their addresses: a host that is not node 0 (it asked for
    // another --node-rank) tells every node every address.
    const Answers answers(at, tell_addresses(req) || a.node_rank != 0);
    for (size_t i = 0; i < joiners.size(); ++i) {
        auto line = answers.line((*ranks)[i + 1], proofs, joiners[i].hello.nonce);
        if (!line) {
            for (auto& j : joiners) write_line(j.fd.get(), encode_refusal(line.error().what));
            return line.error();
        }
        lines.push_back(std::move(*line));
    }
    for (size_t i = 0; i < joiners.size(); ++i) write_line(joiners[i].fd.get(), lines[i]);
    return a;
}

// When the host stops waiting: the timeout, or (with a last call) that long after MIN nodes are there.
// `min_reached` is when they were (the epoch: not yet, or no longer after a node left).
Clock::time_point closing_time(const LaunchRequest& req, int nodes, Clock::time_point deadline,
                               Clock::time_point& min_reached) {
    if (!req.rendezvous_last_call_seconds || nodes < req.nnodes.min) {
        min_reached = Clock::time_point{};
        return deadline;
    }
    if (min_reached == Clock::time_point{}) {
        min_reached = Clock::now();
        if (nodes < req.nnodes.max)
            spdlog::info("rdzv: {} node(s), the least asked for; waiting {:g} s more for up to {}", nodes,
                         *req.rendezvous_last_call_seconds, req.nnodes.max);
    }
    auto last_call = min_reached + seconds_ms(*req.rendezvous_last_call_seconds);
    return std::min(deadline, last_call);
}

// Drops the joiners whose connection closed while they waited (a node stopped or restarted by hand): a
// joiner sends nothing after its hello, so a readable socket is one at its end.
void drop_departed(std::vector<Joiner>& joiners, bool under_way) {
    std::vector<pollfd> fds;
    for (auto& j : joiners) fds.push_back({j.fd.get(), POLLIN, 0});
    if (fds.empty() || ::poll(fds.data(), fds.size(), 0) <= 0) return;
    for (size_t i = fds.size(); i-- > 0;) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (under_way)
            spdlog::info("rdzv: node at {} stopped waiting to join the run", joiners[i].hello.addr);
        else
            spdlog::warn("rdzv: node at {} left before the start; waiting for another", joiners[i].hello.addr);
        joiners.erase(joiners.begin() + static_cast<std::ptrdiff_t>(i));
    }
}

// Closes the oldest pending connection when a new one from `peer` would pass a bound: kMaxPending, or the
// run's node count when larger (a thousand nodes connect at once).
void make_room(Hosting& h, const std::string& address) {
    auto evict = stranger_to_close(h.pending.begin(), h.pending.end(), address, kMaxPendingPerAddress,
                                   std::max(kMaxPending, h.req.nnodes.max), [](const Pending&) { return true; });
    if (evict == h.pending.end()) return;
    h.refuse(evict->address, "closed unheard: newer connections came while it had not said hello");
    h.pending.erase(evict);
}

// Takes the connections waiting on the listener (a bounded number at a time) and sends each its nonce.
void accept_pending(Hosting& h, int listener) {
    for (int i = 0; i < kMaxPending; ++i) {
        Fd conn(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (conn.get() < 0) return;
        Pending p{std::move(conn), fresh_nonce(), "", "", Clock::now() + std::chrono::seconds(kHelloSeconds)};
        p.address = address_of(p.fd.get(), ::getpeername);
        make_room(h, p.address);
        const std::string challenge = encode_challenge(p.nonce);
        (void)::send(p.fd.get(), challenge.data(), challenge.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        h.pending.push_back(std::move(p));
    }
}

// A complete hello, checked (the secret first, so that a stranger learns nothing of the job): a joiner, or
// nothing when it was turned away (and told why, and logged once per address per 10 s).
std::optional<Joiner> admit(Hosting& h, Pending& p, const std::string& line) {
    auto hello = decode_hello(line + "\n");
    std::string refusal = hello ? h.terms.proofs.check(p.nonce, hello_text(*hello), hello->proof) : hello.error().what;
    Refusal of_run;
    // At node 0's door the ranks are node 0's to give: none asked for is taken or refused.
    static const std::vector<Joiner> none;
    if (refusal.empty()) {
        JoinHello asked = *hello;  // node 0 gives ranks: one asked for is not checked (a member's is its own)
        if (!h.ranks_asked && asked.met < 0) asked.rank = -1;
        of_run = refusal_for(h.req, asked, h.ranks_asked ? h.joiners : none);
    }
    if (!of_run.why.empty()) refusal = of_run.text();
    if (!refusal.empty()) {
        h.refuse(p.address, refusal);
        write_line(p.fd.get(), encode_refusal(refusal));
        if (of_run.of_this_run)
            h.ended = Error{"the node at " + hello->addr + " cannot join: " + of_run.why, of_run.hint};
        return std::nullopt;
    }
    // The assignment is written with blocking sends, each bounded: a joiner that does not read (its buffers
    // full) cannot hold the host, nor node 0's door while it serves the run.
    ::fcntl(p.fd.get(), F_SETFL, 0);
    const timeval bound{kSendSeconds, 0};
    ::setsockopt(p.fd.get(), SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
    return Joiner{std::move(p.fd), *hello};
}

// Reads what a pending connection sent (at most its bound). True when it is done with: joined, refused,
// gone, or over its bound.
bool serve_pending(Hosting& h, Pending& p) {
    char buf[kHelloBytes + 1];
    const ssize_t n = ::recv(p.fd.get(), buf, sizeof buf - p.inbox.size(), MSG_DONTWAIT);  // inbox <= kHelloBytes
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        h.refuse(p.address, "closed the connection without a hello", false);
        return true;
    }
    if (n < 0) return false;
    p.inbox.append(buf, static_cast<size_t>(n));
    const size_t nl = p.inbox.find('\n');
    if (nl == std::string::npos && p.inbox.size() <= kHelloBytes) return false;
    if (nl == std::string::npos || nl > kHelloBytes) {
        h.refuse(p.address, "sent more than " + std::to_string(kHelloBytes) + " bytes without a line end");
        return true;
    }
    if (auto joiner = admit(h, p, p.inbox.substr(0, nl))) {
        if (Clock::now() - h.departed_checked >= std::chrono::milliseconds(100)) {
            drop_departed(h.joiners, h.door);
            h.departed_checked = Clock::now();
        }
        if (h.door && joiner->hello.met >= 0)  // RendezvousDoor::meet_again
            spdlog::info("rdzv: node {} at {} is here to meet again", joiner->hello.rank, joiner->hello.addr);
        else if (h.door)
            spdlog::info("rdzv: node at {} waits to join the run at its next attempt ({} waiting)", joiner->hello.addr,
                         h.waiting() + 1);
        else
            spdlog::info("rdzv: node at {} joined ({} of {})", joiner->hello.addr, h.joiners.size() + 2,
                         h.req.nnodes.max);
        if (h.door && joiner->hello.met < 0)  // told at once that it is held, then every few seconds (the door)
            if (auto wait = encode_wait(h.terms.proofs, joiner->hello.nonce, ++joiner->waits_said))
                write_line(joiner->fd.get(), *wait);
        h.joiners.push_back(std::move(*joiner));
    }
    return true;
}

// One round of the host's loop: waits until `until` at most for a connection, a hello or a deadline, then
// serves what came. False when nothing came before `until`.
bool host_round(Hosting& h, int listener, Clock::time_point until) {
    std::vector<pollfd> fds{{listener, POLLIN, 0}};
    Clock::time_point wake = until;
    for (const Pending& p : h.pending) {
        fds.push_back({p.fd.get(), POLLIN, 0});
        wake = std::min(wake, p.hello_by);
    }
    const int ready = ::poll(fds.data(), fds.size(), ms_left(wake));
    if (ready < 0 && errno != EINTR) return false;
    const auto now = Clock::now();
    for (size_t i = h.pending.size(); i-- > 0;) {
        Pending& p = h.pending[i];
        bool done = (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) && serve_pending(h, p);
        if (!done && now >= p.hello_by) {
            h.refuse(p.address, "said no hello within " + std::to_string(kHelloSeconds) + " s");
            done = true;
        }
        if (done) h.pending.erase(h.pending.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (fds[0].revents & POLLIN) accept_pending(h, listener);
    h.say_unsaid();
    return ready > 0 || now < until;
}

// The nodes that met restart as a group (plan.cpp's group_capable, by hand): the group's leader then
// listens on this port.
bool group_follows(const LaunchRequest& req) {
    return req.launcher == Launcher::Agent && !req.paddle.ps &&
           (req.max_restarts > 0 || req.nnodes.min != req.nnodes.max);
}

// For the rest of the run, on a thread of its own: every connection to the rendezvous port is told the
// rendezvous is over (one short line, never waiting for the peer) and closed.
void answer_latecomers(Fd listener) {
    side_thread([fd = std::make_shared<Fd>(std::move(listener))] {
        const std::string over = encode_over();
        for (;;) {
            pollfd p{fd->get(), POLLIN, 0};
            if (::poll(&p, 1, -1) < 0 && errno != EINTR) return;
            for (int i = 0; i < 64; ++i) {
                Fd conn(::accept4(fd->get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
                if (conn.get() < 0) break;
                (void)::send(conn.get(), over.data(), over.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
            }
        }
    }).detach();
}

void warn_without_secret(const MeetingTerms& terms, const std::string& risk) {
    if (terms.proofs.anonymous)
        spdlog::warn("rdzv: no {}: {}; export the same secret on every node", rdzv_auth::kSecretVariable, risk);
}

// What to do when too few nodes came, in the words of the form the nodes were started with.
std::string too_few_hint(const LaunchRequest& req) {
    if (req.c10d_endpoint)
        return "start dlaunch with the same command on the other nodes, or raise --rdzv-conf join_timeout=SECONDS";
    if (auto p = static_form_placement(req); static_form_across_nodes(req) && p) {
        return "start every node with --nnodes " + std::to_string(p->nnodes) + ", its own --node-rank 0.." +
               std::to_string(p->nnodes - 1) + " and --master-addr " + p->master_addr + " --master-port " +
               std::to_string(p->master_port) + ", or raise --join-timeout";
    }
    return "start the other nodes with the printed command, or raise the timeout (--join-timeout; dlaunch-paddle: "
           "--elastic_timeout)";
}

// A node of this run could not join (Hosting::ended): the others are told, and the host ends too.
Error end_for_all(Hosting& h) {
    h.say_unsaid(true);
    for (auto& j : h.joiners)
        write_line(j.fd.get(), encode_refusal("the rendezvous ended: " + h.ended->what + "; " + h.ended->hint));
    return Error{"rdzv: " + h.ended->what, h.ended->hint};
}

// What becomes of the rendezvous's socket once `n` nodes met, in the Met the host starts from. With --nnodes
// MIN:MAX (and restarts) the door stays open for nodes that come late, and the group's leader listens on a port
// of its own. Without restarts nothing else listens here: a node that comes late is told the run started. With
// fixed --nnodes and restarts (hands_socket_to_leader()) the group's leader takes this socket over
// (Met::group_listener; when more nodes than this one met, and assign() closes it before any answer when this
// one is not node 0): a node answered connects to it at once and waits in its backlog
// (GroupSetup::leader_takes_socket; a node that came late to the rendezvous is welcomed as to a group, and told
// the run started). Closed here, with the leader listening anew, every node answered would be refused and try
// again until node 0 listened, and a big group's meeting would wait on those tries. In the static form the port
// is MASTER_PORT: rank 0's store binds it next.
Result<Met> met_from(const LaunchRequest& req, const MeetingTerms& terms, Fd listener, const std::string& advertise,
                     int port, int n) {
    Met met;
    if (keeps_door_open(req)) {
        auto group_port = host::pick_free_port();
        if (!group_port) return group_port.error();
        met.assignment.rendezvous_port = *group_port;
        met.door = RendezvousDoor::open(std::move(listener), req, terms, advertise);
        met.door_ip = advertise;
        met.door_port = port;
    } else if (hands_socket_to_leader(req) && n > 1) {
        met.group_listener = std::make_shared<Fd>(std::move(listener));
    } else if (static_form_across_nodes(req) || group_follows(req)) {
        listener.reset();  // the workers' store binds it next; or one node met, and no group listens
    } else {
        answer_latecomers(std::move(listener));
    }
    return met;
}

Result<Met> host_rendezvous(const LaunchRequest& asked, const MeetingTerms& terms, Fd listener,
                            const std::string& advertise, int port, Clock::time_point deadline, const NodeShare& own) {
    // With its rendezvous open for the run the host is node 0 (it leads the run and takes the nodes that come
    // late), and node ranks go in joining order, as at every later meeting: none asked for is kept.
    LaunchRequest req = asked;
    const bool door = keeps_door_open(asked);
    if (door && asked.node_rank)
        spdlog::warn(
            "rdzv: with --nnodes {}:{} the host of the rendezvous is node 0 and ranks go in joining order; "
            "--node-rank {} is not kept",
            asked.nnodes.min, asked.nnodes.max, *asked.node_rank);
    if (door) req.node_rank.reset();
    Hosting h{req, terms, {}, {}, RefusalLog{}, std::nullopt, {}};
    h.ranks_asked = !door;
    std::vector<Joiner>& joiners = h.joiners;
    const int want = req.nnodes.max, least = req.nnodes.min;
    // The static form's MASTER_PORT is this port, the workers' once the nodes met; otherwise a free one.
    const bool static_form = static_form_across_nodes(req);
    auto reserved = static_form ? Result<int>(port) : host::reserve_free_port();
    if (!reserved) return reserved.error();
    warn_without_secret(terms, "any process that reaches this port and knows the run id may join");
    spdlog::info("rdzv: waiting for {} more node(s) (up to {:.0f} s)", want - 1, req.rendezvous_timeout_seconds);
    ::fcntl(listener.get(), F_SETFL, O_NONBLOCK);
    Clock::time_point min_reached{};
    for (;;) {
        if (static_cast<int>(joiners.size()) + 1 >= want) {
            drop_departed(joiners);  // checked at most every 100 ms while they came: now, before the count counts
            if (static_cast<int>(joiners.size()) + 1 >= want) break;
        }
        const auto close = closing_time(req, static_cast<int>(joiners.size()) + 1, deadline, min_reached);
        if (Clock::now() >= close || !host_round(h, listener.get(), close)) break;  // the deadline, or last call
        if (h.ended) return end_for_all(h);
    }
    h.say_unsaid(true);
    drop_departed(joiners);
    const int n = static_cast<int>(joiners.size()) + 1;
    if (n < least) {
        std::string why = "only " + std::to_string(n) + " of " + std::to_string(least) + " nodes joined within " +
                          std::to_string(static_cast<int>(req.rendezvous_timeout_seconds)) + " s";
        for (auto& j : joiners) write_line(j.fd.get(), encode_refusal("the rendezvous gave up: " + why));
        return Error{"rdzv: " + why, terms.missing_hint.empty() ? too_few_hint(req) : terms.missing_hint};
    }
    auto started = met_from(req, terms, std::move(listener), advertise, port, n);
    if (!started) return started.error();
    Met met = std::move(*started);
    if (door)
        for (Joiner& j : joiners) j.hello.rank = -1;
    auto a = assign(req, joiners, advertise, *reserved, own, terms.proofs, met);
    if (!a) return a.error();
    if (a->node_rank != 0) {
        spdlog::warn("rdzv: this node asked for rank {}: node 0 (MASTER_ADDR {}) must reach port {} on itself",
                     a->node_rank, a->master_addr, a->master_port);
        met.group_listener.reset();  // closed in assign(), before any answer: node 0 leads the group
    }
    spdlog::info("rdzv: {} node(s) assembled; this node is node {}", n, a->node_rank);
    if (a->rendezvous_port == 0) a->rendezvous_port = port;
    if (met.door) met.door->met(0, *a);
    met.assignment = *a;
    return met;
}

// The joiner's side of one connection: the host's nonce in, the proved hello out, the proved answer in.
// `closed` is set when the connection ended before the deadline with no answer: a host with more
// connections waiting than it holds closes the oldest unheard (Hosting), and the joiner connects again.
Result<Met> exchange(const LaunchRequest& req, const MeetingTerms& terms, int fd, const std::string& where,
                     Clock::time_point deadline, const NodeShare& own, int met, bool& closed) {
    const rdzv_auth::Proofs& proofs = terms.proofs;
    ::fcntl(fd, F_SETFL, 0);
    std::string rest;
    NoLine why = NoLine::Timeout;
    // In the static form the port is the workers' store once the nodes met: a node that comes later is
    // answered by it, never by a host, and is told so after a while instead of at its join timeout.
    const bool static_form = static_form_across_nodes(req);
    const auto challenge_by = static_form ? std::min(deadline, Clock::now() + kStaticChallengeWait) : deadline;
    auto challenge = read_line(fd, challenge_by, 4096, rest, why);
    closed = !challenge && why == NoLine::Closed && ms_left(deadline) > 0;
    if (!challenge && static_form && why == NoLine::Timeout && ms_left(deadline) > 0)
        return Error{"rdzv: " + where + " accepted the connection but did not answer as dlaunch's rendezvous within " +
                         std::to_string(kStaticChallengeWait.count()) +
                         " s: the other nodes have probably started without this one" +
                         (terms.step ? std::string() : " (their workers' store holds that port now)"),
                     terms.step ? "see node 0's output"
                                : "start every node of the static form before the run starts; a started run takes no "
                                  "node"};
    if (!challenge)
        return Error{"rdzv: " + where + " accepted the connection but said nothing",
                     "check that the address and port are this run's rendezvous"};
    auto host_nonce = decode_challenge(*challenge);
    if (!host_nonce) return host_nonce.error();
    JoinHello hello{rendezvous_job(req), rendezvous_shape(req), req.node_rank.value_or(-1),
                    address_of(fd, ::getsockname), own};
    hello.nonce = fresh_nonce();
    hello.met = met;
    auto proof = proofs.prove(*host_nonce, hello_text(hello));
    if (!proof) return proof.error();
    hello.proof = *proof;
    write_line(fd, encode_hello(hello));
    spdlog::info("rdzv: joined {} as {}; waiting for the other nodes", where, hello.addr);
    auto line = read_line(fd, deadline, reply_bytes(req), rest, why);
    bool held = false;
    int waits = 0;
    for (bool said = false; line;) {  // a host that holds this node for its run's next attempt says so
        auto wait = decode_wait(*line, proofs, hello.nonce, waits);
        if (!wait) return wait.error();
        if (!*wait) break;
        if (!said && met < 0)  // (a member meeting the others again is held while they come)
            spdlog::info(
                "rdzv: the run at {} is under way: this node waits to be taken at its next attempt (or as "
                "a spare while the run has --nnodes MAX nodes)",
                where);
        said = held = true;
        deadline = std::max(deadline, Clock::now() + kDoorHoldsFor);
        line = read_line(fd, deadline, reply_bytes(req), rest, why);
    }
    if (!line && why == NoLine::TooLong)
        return Error{"rdzv: the rendezvous host at " + where + " sent an answer longer than " +
                         std::to_string(reply_bytes(req)) + " bytes for " + std::to_string(req.nnodes.max) + " nodes",
                     "check that the address and port are this run's rendezvous"};
    if (!line && held)  // the run it waited for is over, or its node 0 is gone: nothing to connect to again
        return Error{"rdzv: the run at " + where + " ended or lost its node 0 while this node waited to join it",
                     "see node 0's output; start every node again with the same command to run again"};
    closed = !line && why == NoLine::Closed && ms_left(deadline) > 0;
    if (closed)
        return Error{"rdzv: the rendezvous host at " + where + " closed the connection before it answered",
                     "check that the host is still running (this node connected again until the timeout)"};
    if (!line)
        return Error{"rdzv: no answer from the rendezvous host at " + where + " within the timeout",
                     "check that every node was started, and that the host is still running"};
    auto answer = decode_reply(*line, proofs, hello.nonce);
    if (!answer) return answer;
    const auto& every = answer->assignment.every_share;  // its shares are "every node like this one"
    if (every && *every != own)
        return Error{"rdzv: the rendezvous host at " + where + " answered that every node brings " +
                         std::to_string(every->procs) + " worker(s) of role '" + every->role + "'; this node said " +
                         std::to_string(own.procs) + " of '" + own.role + "'",
                     "run the same dlaunch version on every node"};
    if (auto own = own_addresses(answer->assignment, hello.addr, tell_addresses(req)); !own) return own.error();
    return answer;
}

Result<Met> join_rendezvous(const LaunchRequest& req, const MeetingTerms& terms, const std::string& master_ip, int port,
                            Clock::time_point deadline, const NodeShare& own, int met) {
    const std::string where = master_ip + ":" + std::to_string(port);
    warn_without_secret(terms, "any process that listens at " + where + " may answer as the rendezvous host");
    bool said = false;
    std::optional<Error> unanswered;  // the host closed this node's connection before answering
    // Nodes started together reach for the host before it listens: they try again after 10 ms, doubling up to
    // 250 ms, so that nodes started at once do not all wait the longest step.
    int retry_ms = 10;
    while (true) {
        Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (s.get() < 0) return Error{"rdzv: socket: " + std::string(std::strerror(errno)), ""};
        if (req.local_addr) {
            auto local = resolve_ipv4(*req.local_addr);
            sockaddr_in la = make_addr(local.value_or(*req.local_addr), 0);
            if (!local || ::bind(s.get(), reinterpret_cast<sockaddr*>(&la), sizeof la) != 0)
                return Error{"rdzv: --host/--local-addr " + *req.local_addr + ": not an address of this node",
                             "give this node's IP address"};
        }
        ::fcntl(s.get(), F_SETFL, O_NONBLOCK);
        sockaddr_in ma = make_addr(master_ip, port);
        int rc = ::connect(s.get(), reinterpret_cast<sockaddr*>(&ma), sizeof ma);
        bool connected = rc == 0;
        if (!connected && errno == EINPROGRESS) {
            pollfd p{s.get(), POLLOUT, 0};
            int err = 0;
            socklen_t len = sizeof err;
            if (::poll(&p, 1, std::min(ms_left(deadline), 2000)) > 0 &&
                ::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
                connected = true;
        }
        bool closed = false;
        if (connected) {
            auto a = exchange(req, terms, s.get(), where, deadline, own, met, closed);
            if (a && a->assignment.rendezvous_port == 0) a->assignment.rendezvous_port = port;
            if (a && keeps_door_open(req)) a->door_ip = master_ip, a->door_port = port;
            if (a || !closed) return a;
            spdlog::debug("rdzv: {} closed the connection unanswered; connecting again", where);
            unanswered = a.error();
        }
        if (ms_left(deadline) == 0 && unanswered) return *unanswered;
        if (ms_left(deadline) == 0)
            return Error{"rdzv: cannot reach the rendezvous host at " + where + " within " +
                             std::to_string(static_cast<int>(req.rendezvous_timeout_seconds)) + " s",
                         std::string(terms.step                      ? "see node 0's output (the step's first task)"
                                     : static_form_across_nodes(req) ? "start node 0 (--node-rank 0)"
                                                                     : "start the first node") +
                             ", check the address and that the port is open between the nodes"};
        if (!said && !closed) spdlog::info("rdzv: waiting for the rendezvous host at {}", where);
        said = said || !closed;
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(closed ? 50 : retry_ms, ms_left(deadline))));
        if (!closed) retry_ms = std::min(2 * retry_ms, 250);
    }
}

}  // namespace rdzv_host

using namespace rdzv_host;

std::vector<std::string> host::local_addresses() {
    std::vector<std::string> out;
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return out;
    for (ifaddrs* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
        char buf[INET_ADDRSTRLEN];
        ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
        // Non-loopback first: the first entry is the address other nodes are most likely to reach.
        if (i->ifa_flags & IFF_LOOPBACK)
            out.push_back(buf);
        else
            out.insert(out.begin(), buf);
    }
    ::freeifaddrs(list);
    return out;
}

std::string host::listen_address(const std::string& addr) {
    const auto ip = resolve_ipv4(addr);
    if (!ip) return "0.0.0.0";
    const auto mine = local_addresses();
    const bool held = ip->rfind("127.", 0) == 0 || std::find(mine.begin(), mine.end(), *ip) != mine.end();
    return held ? *ip : "0.0.0.0";
}

// Where the nodes meet: --master, c10d's endpoint, or (neither: ip "") here, on a free port, announced.
struct MeetingPlace {
    std::string ip;
    int port = 0;
    bool host_it = true;       // this node hosts the rendezvous
    bool by_own_name = false;  // the endpoint names this machine by its hostname (names_this_machine)
};

std::string endpoint_option(const LaunchRequest& req) {
    return req.rendezvous_master ? "--master" : "--rdzv-endpoint";
}

Result<std::string> resolve_meeting_host(const LaunchRequest& req) {
    const std::optional<std::string>& master = req.rendezvous_master ? req.rendezvous_master : req.c10d_endpoint;
    if (!master) return std::string();
    const std::string name = master->substr(0, master->rfind(':'));
    auto ip = resolve_ipv4(name);
    if (!ip)
        return Error{"rdzv: " + endpoint_option(req) + " '" + (req.rendezvous_master ? *master : req.rdzv_endpoint) +
                         "': host '" + name + "' has no IPv4 address here",
                     "give the hosting node's name or IP address"};
    return *ip;
}

Result<MeetingPlace> meeting_place(const LaunchRequest& req, const std::optional<std::string>& own,
                                   const std::vector<std::string>& local_addrs) {
    MeetingPlace p;
    auto ip = resolve_meeting_host(req);
    if (!ip) return ip.error();
    if (ip->empty()) return p;
    const std::string& m = req.rendezvous_master ? *req.rendezvous_master : *req.c10d_endpoint;
    const std::string name = m.substr(0, m.rfind(':'));
    p.ip = *ip;
    p.port = std::stoi(m.substr(m.rfind(':') + 1));
    p.by_own_name = !own && names_this_machine(name, p.ip);
    p.host_it = p.by_own_name ||
                (own ? *own == p.ip : std::find(local_addrs.begin(), local_addrs.end(), p.ip) != local_addrs.end());
    return p;
}

bool hosts_node_rendezvous(const LaunchRequest& req, const std::vector<std::string>& local_addrs) {
    if (static_form_across_nodes(req)) {
        auto placement = static_form_placement(req);
        return placement && placement->node_rank == 0;
    }
    std::optional<std::string> own;
    if (req.local_addr) own = resolve_ipv4(*req.local_addr);
    auto where = meeting_place(req, own, local_addrs);
    return where && where->host_it;
}

namespace {

// A listening socket on ip:port (SO_REUSEADDR); else why not, and its errno in `err`.
Result<Fd> listen_on(const std::string& ip, int port, int& err) {
    Fd l(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int one = 1;
    ::setsockopt(l.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a = make_addr(ip, port);
    err = 0;
    if (::bind(l.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l.get(), SOMAXCONN) != 0) {
        err = errno;
        return Error{"rdzv: cannot listen on " + ip + ":" + std::to_string(port) + ": " + std::strerror(err), ""};
    }
    return l;
}

int bound_port(const Fd& l) {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    ::getsockname(l.get(), reinterpret_cast<sockaddr*>(&a), &len);
    return ntohs(a.sin_port);
}

// Whether `name` has IPv6 addresses and no IPv4 one (the meeting is over IPv4: waiting would not help).
bool only_ipv6(const std::string& name) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    if (::getaddrinfo(name.c_str(), nullptr, &hints, &list) != 0) return false;
    bool v4 = false, v6 = false;
    for (addrinfo* i = list; i; i = i->ai_next) (i->ai_family == AF_INET ? v4 : v6) = true;
    ::freeaddrinfo(list);
    return v6 && !v4;
}

std::string master_option(const MeetingTerms& terms) {
    return terms.step ? "node 0's address" : "--master-addr";
}

// torchrun's static form (and the agents of a Slurm step, as it): node 0 hosts on every interface at the
// port, as torch's store listens; the others join the master, waiting for its name to resolve as torch's
// store client does.
Result<Met> static_meeting(const LaunchRequest& req, const MeetingTerms& terms, const std::string& advertise,
                           const NodeShare& share, Clock::time_point deadline) {
    auto placement = static_form_placement(req);
    if (!placement) return placement.error();
    const int port = placement->master_port;
    if (placement->node_rank == 0) {
        int err = 0;
        auto l = listen_on("0.0.0.0", port, err);
        if (!l)
            return Error{l.error().what, terms.step ? "another process holds the group's port on node 0 (derived from "
                                                      "MASTER_PORT); give dlaunch another --port-range"
                                                    : "give a free --master-port; on one machine, give each node its "
                                                      "own --node-rank (0 is the default)"};
        spdlog::info("rdzv: hosting the node rendezvous at {}:{} (node 0)", advertise, port);
        return host_rendezvous(req, terms, std::move(*l), advertise, port, deadline, share);
    }
    const std::string& name = placement->master_addr;
    auto ip = resolve_ipv4(name);
    if (!ip && only_ipv6(name))
        return Error{"rdzv: " + master_option(terms) + " '" + name +
                         "' has only IPv6 addresses here; dlaunch's agents meet at the master over IPv4",
                     "give node 0's IPv4 address, or a name that resolves to one"};
    for (bool said = false; !ip && ms_left(deadline) > 0; ip = resolve_ipv4(name)) {
        if (!said) spdlog::info("rdzv: {} '{}' does not resolve yet; waiting for it", master_option(terms), name);
        said = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(250, ms_left(deadline))));
    }
    if (!ip)
        return Error{"rdzv: " + master_option(terms) + " '" + name + "' had no IPv4 address here within " +
                         std::to_string(static_cast<int>(req.rendezvous_timeout_seconds)) + " s",
                     "give node 0's name or IPv4 address"};
    return join_rendezvous(req, terms, *ip, port, deadline, share);
}

}  // namespace

Result<Met> node_rendezvous(const LaunchRequest& req, const std::vector<std::string>& local_addrs,
                            const NodeShare& share, const MeetingTerms& terms,
                            const std::function<void(const std::string&)>& announce) {
    const auto deadline = Clock::now() + seconds_ms(req.rendezvous_timeout_seconds);
    std::optional<std::string> own;
    if (req.local_addr) {
        own = resolve_ipv4(*req.local_addr);
        if (!own)
            return Error{"rdzv: --host/--local-addr " + *req.local_addr + ": not an IPv4 address or name",
                         "give this node's IP address"};
    }
    std::string advertise = own ? *own : "127.0.0.1";
    if (!own)
        for (auto& a : local_addrs)
            if (a.rfind("127.", 0) != 0) {
                advertise = a;
                break;
            }
    if (static_form_across_nodes(req)) return static_meeting(req, terms, advertise, share, deadline);

    auto where = meeting_place(req, own, local_addrs);
    if (!where) return where.error();
    const auto& [master_ip, port, host_it, by_own_name] = *where;
    const bool master = !master_ip.empty();
    if (host_it) {
        const std::string bind_ip = master && !by_own_name ? master_ip : own.value_or("0.0.0.0");
        int err = 0;
        auto l = listen_on(bind_ip, port, err);
        if (l) {
            if (master && !by_own_name) advertise = master_ip;
            if (!master)
                announce(advertise + ":" + std::to_string(bound_port(*l)));
            else
                spdlog::info("rdzv: hosting the node rendezvous at {}:{}", advertise, port);
            return host_rendezvous(req, terms, std::move(*l), advertise, bound_port(*l), deadline, share);
        }
        if (!master || err != EADDRINUSE)
            return Error{l.error().what, master ? "give a free port in " + endpoint_option(req) : "check --host"};
        // Another dlaunch on this host holds it already: join that one.
    }
    return join_rendezvous(req, terms, master_ip, port, deadline, share);
}

}  // namespace dlaunch
