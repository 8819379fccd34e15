#include "dlaunch/group_channel.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <thread>

#include "dlaunch/ipv4.hpp"
#include "dlaunch/nonce.hpp"
#include "dlaunch/stranger_room.hpp"

namespace dlaunch::group {
namespace {

using std::chrono::milliseconds;

// The socket address of `host` (a name or a dotted IPv4 address).
Result<sockaddr_in> ipv4(const std::string& host, int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    auto ip = resolve_ipv4(host);
    if (!ip || inet_pton(AF_INET, ip->c_str(), &a.sin_addr) != 1)
        return Error{"group: '" + host + "' has no IPv4 address", "give the leader's address as a.b.c.d"};
    return a;
}

// What a peer that reads nothing may have waiting before it counts as lost (far more than a job says).
constexpr size_t kOutboxLimit = 64 << 20;

// Hands the peer's outbox to the socket without blocking, as far as it takes it. "" when all is well, else
// why the peer is lost: the connection failed, or it has not read for so long that its outbox is past the limit.
std::string flush(Peer& peer) {
    std::string& box = peer.outbox;
    while (peer.outbox_taken < box.size()) {
        ssize_t n = ::send(peer.fd.get(), box.data() + peer.outbox_taken, box.size() - peer.outbox_taken,
                           MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            peer.outbox_taken += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        return std::string("connection failed: ") + std::strerror(errno);
    }
    if (peer.outbox_taken * 2 >= box.size()) {  // dropping the head rarely keeps a long backlog linear
        box.erase(0, peer.outbox_taken);
        peer.outbox_taken = 0;
    }
    return box.size() - peer.outbox_taken <= kOutboxLimit ? "" : "it does not read what it is sent";
}

// Queues one line and sends what the socket takes now: whole lines arrive in order, none is dropped or cut,
// and a peer that reads nothing is found lost (by its silence or its outbox), not waited for.
void send_line(Peer& peer, const std::string& line) {
    if (peer.fd.get() < 0) return;
    peer.outbox += line;
    (void)flush(peer);  // a failure shows at the next poll
    peer.last_sent = Clock::now();
}

// What reading a connection found.
enum class Pumped { Open, Closed, TooLong };

// Reads what arrived, at most kReadPerPoll bytes; complete lines go to `lines`. Linear in the bytes read:
// the inbox holds no line end, so only new bytes are searched. TooLong: a line past the bound (kHelloBytes
// until the connection's first line, kLineBytes after).
Pumped pump(Peer& peer, std::vector<std::string>& lines, bool admitted) {
    char buf[16 << 10];
    for (size_t taken = 0; taken < kReadPerPoll;) {
        ssize_t n = ::recv(peer.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0) return Pumped::Closed;
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? Pumped::Open : Pumped::Closed;
        taken += static_cast<size_t>(n);
        peer.last_heard = Clock::now();
        const size_t old = peer.inbox.size();
        peer.inbox.append(buf, static_cast<size_t>(n));
        size_t start = 0;
        for (size_t nl = peer.inbox.find('\n', old); nl != std::string::npos; nl = peer.inbox.find('\n', start)) {
            if (nl - start > kLineBytes) return Pumped::TooLong;
            lines.push_back(peer.inbox.substr(start, nl - start));
            start = nl + 1;
        }
        peer.inbox.erase(0, start);
        if (peer.inbox.size() > (admitted || !lines.empty() ? kLineBytes : kHelloBytes)) return Pumped::TooLong;
    }
    return Pumped::Open;
}

// "no heartbeat for 10 s", "no heartbeat for 0.4 s"
constexpr std::string_view kSilence = "no heartbeat for ";

// "10 s", "0.4 s"
std::string seconds_text(milliseconds ms) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, ms.count() % 1000 == 0 ? "%.0f" : "%.1f",
                  static_cast<double>(ms.count()) / 1000);
    return std::string(seconds) + " s";
}

std::string silence(milliseconds ms) {
    return std::string(kSilence) + seconds_text(ms);
}

// Every word of the channel goes out at once, on both ends. With Nagle's algorithm a leader's stop that follows
// a heartbeat not yet acknowledged waits for the member's delayed ACK, and the group's restart with it.
void no_delay(int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// What the clock says about one peer: kept, lost (`why` says how), or silent past the bound.
enum class Kept { Yes, Lost, Silent };

// Beats due (`due` after this end's last word), silence past the bound.
Kept keep_time(Peer& peer, int attempt, const ChannelTimes& times, milliseconds due, std::string& why) {
    if (why = flush(peer); !why.empty()) return Kept::Lost;
    const auto now = Clock::now();
    if (now - peer.last_heard >= times.lost_after) {
        why = silence(times.lost_after);
        return Kept::Silent;
    }
    if (peer.member >= 0 && now - peer.last_sent >= due) send_line(peer, encode(Beat{peer.member, attempt}));
    return Kept::Yes;
}

// How many node ids a message names (a gate's or a decision's lists).
size_t ids_named(const Message& message) {
    if (const auto* gate = std::get_if<Gate>(&message)) return gate->members.size();
    if (const auto* decided = std::get_if<Decided>(&message))
        return decided->decision.next_members.size() + decided->decision.left_behind.size();
    return 0;
}

// The IPv4 address of a connection's peer.
std::string peer_address(const sockaddr_in& a) {
    char buf[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
    return buf;
}

}  // namespace

Result<Leader> Leader::listen(const std::string& ip, int port, Admit admit, ChannelTimes times, int members) {
    auto addr = ipv4(ip, port);
    if (!addr) return addr.error();
    Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    int one = 1;
    setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&*addr), sizeof *addr) != 0 ||
        ::listen(listener.get(), SOMAXCONN) != 0)
        return Error{"group: cannot listen on " + ip + ":" + std::to_string(port) + ": " + std::strerror(errno),
                     "choose a free port"};
    return adopt(std::move(listener), std::move(admit), times, members);
}

Result<Leader> Leader::adopt(Fd listener, Admit admit, ChannelTimes times, int members) {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        ::fcntl(listener.get(), F_SETFL, O_NONBLOCK) != 0)
        return Error{"group: the listening socket handed over: " + std::string(std::strerror(errno)), ""};
    Leader l;
    l.listener_ = std::move(listener);
    l.port_ = ntohs(addr.sin_port);
    l.admit_ = std::move(admit);
    l.times_ = times;
    l.max_strangers_ = std::max(kMaxStrangers, members);
    l.epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
    if (l.epoll_.get() < 0 || !l.watch(l.listener_.get(), nullptr))
        return Error{"group: epoll: " + std::string(std::strerror(errno)), "raise the open-file limit (ulimit -n)"};
    return l;
}

// Its events point at `peer` (nullptr: the listener); close() takes it out of the set.
bool Leader::watch(int fd, Peer* peer) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = peer;
    return ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) == 0;
}

// Closes a connection; it leaves its list at the end of the poll. Out of the epoll set first: a child forked
// meanwhile (the health gate's site check, a worker before its exec) may hold a copy of the descriptor, which
// would keep it there, its events pointing at a Peer no longer listed.
void Leader::close(Peer& peer) {
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, peer.fd.get(), nullptr);
    peer.fd.reset();
    closed_ = true;
}

// Closes the oldest connection that has not said hello when a new one from `address` would pass a bound
// (kMaxStrangersPerAddress from that address, max_strangers_ in all): strangers cannot hold the port, and a
// member, whose hello follows its connection within a round trip, is not turned away by them.
// The newest connection, the last in strangers_, is the one room is made for: it is not counted.
void Leader::make_room_for(const std::string& address, std::vector<Event>& events) {
    const auto newest = std::prev(strangers_.end());
    auto evict = stranger_to_close(strangers_.begin(), newest, address, kMaxStrangersPerAddress, max_strangers_,
                                   [](const Peer& p) { return p.member < 0 && p.fd.get() >= 0; });
    if (evict == newest) return;
    refuse(evict->address,
           "closed unheard: newer connections came while it had not said hello (at most " +
               std::to_string(kMaxStrangersPerAddress) + " such from one address, " + std::to_string(max_strangers_) +
               " in all)",
           events);
    close(*evict);
}

// Accepts what waits (a bounded number per poll) and welcomes each connection.
void Leader::accept_new(std::vector<Event>& events) {
    for (int i = 0; i < kMaxStrangers; ++i) {
        sockaddr_in from{};
        socklen_t len = sizeof from;
        int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        no_delay(fd);
        Peer& p = strangers_.emplace_back();
        p.fd = Fd(fd);
        if (!watch(fd, &p)) {  // out of memory for epoll: closed, as if refused by the kernel
            strangers_.pop_back();
            continue;
        }
        p.address = peer_address(from);
        make_room_for(p.address, events);
        p.last_heard = p.last_sent = Clock::now();
        p.hello_by = p.last_heard + times_.hello_within;
        // The nonce a hello must echo; a node that comes late to the rendezvous on this port reads it as "the
        // nodes met".
        p.nonce = fresh_nonce();
        send_line(p, encode(Welcome{p.nonce}));
    }
}

// Reports a refusal of a connection from `address`, or counts it when one from there was reported less than
// kRefusalSeconds ago (report_unsaid_refusals tells the count).
void Leader::refuse(const std::string& address, const std::string& why, std::vector<Event>& events) {
    if (auto line = refusals_.refused(address, why, Clock::now()))
        events.push_back({Event::Kind::Refused, -1, Message{}, *line});
}

void Leader::report_unsaid_refusals(std::vector<Event>& events) {
    for (std::string& line : refusals_.unsaid(Clock::now()))
        events.push_back({Event::Kind::Refused, -1, Message{}, std::move(line)});
}

std::vector<std::string> Leader::unsaid_refusals() {
    return refusals_.unsaid(Clock::now(), true);
}

void Leader::on_line(Peer& peer, const std::string& line, std::vector<Event>& events) {
    auto message = decode(line, peer.member < 0 ? From::Stranger : From::Member);
    if (peer.member >= 0) {
        // An admitted member that breaks the protocol is no longer heard: it is lost, not merely refused.
        if (message && !std::holds_alternative<Beat>(*message) && !std::holds_alternative<Hello>(*message))
            events.push_back({Event::Kind::Received, peer.member, *message, ""});
        if (!message || std::holds_alternative<Hello>(*message)) {
            events.push_back({Event::Kind::Lost, peer.member, Message{},
                              message ? "said hello twice" : "sent an unreadable line (" + message.error().what + ")"});
            close(peer);
        }
        return;
    }
    const Hello* hello = message ? std::get_if<Hello>(&*message) : nullptr;
    Admission verdict{!message ? message.error().what : hello == nullptr ? "the first message is not a hello" : ""};
    if (verdict.why.empty() && hello->nonce != peer.nonce)
        verdict.why = "the hello does not answer this connection's welcome (played again?)";
    if (verdict.why.empty()) verdict = admit_(*hello);
    // Only a sender that proved itself may learn about the group (who joined already).
    if (verdict.why.empty() && admitted_.contains(hello->member))
        verdict.why = "member " + std::to_string(hello->member) + " joined already; each member joins once";
    if (verdict.why.empty()) {
        peer.member = hello->member;
        admitted_.insert(peer.member);
        admitted_now_ = true;
        events.push_back({Event::Kind::Joined, peer.member, *message, ""});
        return;
    }
    send_line(peer, encode(Refused{verdict.proved ? verdict.why : "not admitted to this group"}));
    refuse(peer.address, verdict.why, events);
    close(peer);
}

// What one peer's socket says in this poll: its lines handled, and whether it is gone (its event given).
void Leader::serve(Peer& p, bool readable_now, std::vector<Event>& events) {
    std::vector<std::string> lines;
    const Pumped pumped = readable_now ? pump(p, lines, p.member >= 0) : Pumped::Open;
    for (const std::string& line : lines)
        if (p.fd.get() >= 0) on_line(p, line, events);
    if (p.fd.get() < 0) return;
    std::string why =
        pumped == Pumped::TooLong
            ? "sent a line longer than " + std::to_string((p.member >= 0 ? kLineBytes : kHelloBytes) >> 10) + " KiB"
            : "connection closed";
    const bool late = p.member < 0 && Clock::now() >= p.hello_by;
    if (late) why = "said no hello within " + seconds_text(times_.hello_within);
    const Kept kept = pumped == Pumped::Open && !late ? keep_time(p, 0, times_, times_.beat, why) : Kept::Lost;
    if (kept == Kept::Yes) return;
    // A connection that never said hello was no member: it is refused, not lost.
    if (p.member >= 0)
        events.push_back({Event::Kind::Lost, p.member, Message{}, why, kept == Kept::Silent});
    else
        refuse(p.address, why, events);
    close(p);
}

// How often the clock is read for every connection: a tenth of the shortest of its times (100 ms with the
// defaults), so that beats go and silence is found that much late at most.
milliseconds Leader::sweep_every() const {
    const milliseconds shortest = std::min({times_.beat, times_.lost_after, times_.hello_within});
    return std::clamp(shortest / 10, milliseconds(1), milliseconds(100));
}

// epoll: a wake-up costs what is ready, not what is connected; the clock visits every connection once per
// sweep_every(), not on every wake-up (N members beating each second would otherwise cost N² visits a
// second: docs/scale.md).
std::vector<Event> Leader::poll(milliseconds wait) {
    auto now = Clock::now();
    const auto to_sweep = std::chrono::ceil<milliseconds>(std::max(next_sweep_ - now, Clock::duration::zero()));
    std::array<epoll_event, 256> ready{};
    std::vector<Event> events;
    bool accept = false;
    // A full batch is followed by another without waiting, up to 4,096 connections (a caller waiting
    // edge-triggered on wake_fd() is not woken again for what is left; its tick would find it).
    for (int batch = 0, n = static_cast<int>(ready.size()); batch < 16 && n == static_cast<int>(ready.size());
         ++batch) {
        n = ::epoll_wait(epoll_.get(), ready.data(), static_cast<int>(ready.size()),
                         batch > 0 ? 0 : static_cast<int>(std::min(wait, to_sweep).count()));
        for (int i = 0; i < n; ++i) {
            auto* p = static_cast<Peer*>(ready[static_cast<size_t>(i)].data.ptr);
            if (p == nullptr)
                accept = true;
            else if (p->fd.get() >= 0)
                serve(*p, true, events);
        }
    }
    if (now = Clock::now(); now >= next_sweep_) {
        next_sweep_ = now + sweep_every();
        for (auto* list : {&strangers_, &members_})
            for (Peer& p : *list)
                if (p.fd.get() >= 0) serve(p, false, events);
    }
    tidy();
    if (accept) accept_new(events);
    report_unsaid_refusals(events);
    return events;
}

// After a poll: closed connections dropped, admitted ones moved to the members (a look at the strangers only).
void Leader::tidy() {
    if (closed_) {
        for (auto* list : {&strangers_, &members_}) std::erase_if(*list, [](const Peer& p) { return p.fd.get() < 0; });
        closed_ = false;
    }
    if (!admitted_now_) return;
    for (auto it = strangers_.begin(); it != strangers_.end();) {
        auto next = std::next(it);
        if (it->member >= 0) members_.splice(members_.end(), strangers_, it);
        it = next;
    }
    admitted_now_ = false;
}

void Leader::broadcast(const Message& message) {
    broadcast(std::vector<Message>{message});
}

void Leader::broadcast(const std::vector<Message>& messages) {
    std::string lines;
    for (const Message& m : messages) lines += encode(m);
    for (Peer& p : members_) send_line(p, lines);
}

namespace {

// Starts a connection to the leader at ip:port, from `from` when given, without waiting for it: the socket
// is non-blocking (every read and write of the channel is), and connected() says when it is made.
Result<Fd> start_connect(const std::string& ip, int port, const std::string& from) {
    auto addr = ipv4(ip, port);
    if (!addr) return addr.error();
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!from.empty()) {
        auto local = ipv4(from, 0);
        if (!local) return Error{"group: cannot connect from " + from + ": " + local.error().what, ""};
        if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*local), sizeof *local) != 0)
            return Error{"group: cannot connect from " + from + ": " + std::strerror(errno),
                         "give this node's own address in --local-addr"};
    }
    no_delay(fd.get());
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0 && errno != EINPROGRESS)
        return Error{"group: cannot reach the group's leader at " + ip + ":" + std::to_string(port) + ": " +
                         std::strerror(errno),
                     "is the agent of node 0 running?"};
    return fd;
}

// Whether the connection `fd` started is made, waiting at most `wait`: 0 made, EINPROGRESS not yet, else
// why it failed (an errno).
int connected(int fd, milliseconds wait) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return EINPROGRESS;
    int error = 0;
    socklen_t len = sizeof error;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) return errno;
    return error;
}

// A connection to the leader, made within the channel's bound for silence (the leader may be flooded).
Result<Fd> connect_to_leader(const std::string& ip, int port, const std::string& from, milliseconds bound) {
    auto fd = start_connect(ip, port, from);
    if (!fd) return fd;
    if (const int e = connected(fd->get(), bound); e != 0)
        return Error{"group: cannot reach the group's leader at " + ip + ":" + std::to_string(port) + ": " +
                         (e == EINPROGRESS ? "no answer within " + seconds_text(bound) : std::strerror(e)),
                     "is the agent of node 0 running?"};
    return fd;
}

constexpr milliseconds kRejoinEvery{200};  // a member turned away unheard connects again this often

}  // namespace

Result<Member> Member::join(const std::string& ip, int port, Hello hello, ChannelTimes times, Sign sign,
                            const std::string& from) {
    auto fd = connect_to_leader(ip, port, from, times.lost_after);
    if (!fd) return fd.error();
    Member m;
    m.times_ = times;
    m.ip_ = ip, m.port_ = port, m.from_ = from;
    m.rejoin_by_ = Clock::now() + times.rejoin_within;
    if (times.welcome_within.count() > 0) m.welcome_by_ = Clock::now() + times.welcome_within;
    m.leader_.fd = std::move(*fd);
    m.leader_.last_heard = m.leader_.last_sent = Clock::now();  // no beats (member -1) before the hello
    m.hello_ = std::move(hello);
    m.sign_ = std::move(sign);
    return m;
}

// The leader closed the connection before a word after this node's hello (it welcomes every connection,
// then may close it unheard when strangers flood it): the hello and what followed it go again, on a new
// connection. False when the rejoin window is over (`why` then says so).
bool Member::start_rejoin(std::string& why) {
    if (Clock::now() >= rejoin_by_) return false;
    waiting_.insert(waiting_.begin(), sent_since_hello_.begin(), sent_since_hello_.end());
    sent_since_hello_.clear();
    said_hello_ = false;
    leader_.fd.reset();
    leader_.member = -1;
    leader_.inbox.clear();
    leader_.outbox.clear();
    leader_.outbox_taken = 0;
    rejoin_why_ = why;
    next_rejoin_ = Clock::now();
    return true;
}

// One step of the rejoin, within `wait`: a connection started, or made. False once the window is over.
bool Member::step_rejoin(milliseconds wait, std::string& why) {
    const auto now = Clock::now();
    if (now >= rejoin_by_) {
        why = "the leader closed the connection before answering this node's hello, and joining again for " +
              seconds_text(times_.rejoin_within) + " did not help (last: " + rejoin_why_ + ")";
        return false;
    }
    if (connecting_.get() < 0) {
        if (now < next_rejoin_) {
            std::this_thread::sleep_for(std::min(wait, std::chrono::ceil<milliseconds>(next_rejoin_ - now)));
            return true;
        }
        next_rejoin_ = now + kRejoinEvery;
        auto fd = start_connect(ip_, port_, from_);
        if (!fd) {
            rejoin_why_ = fd.error().what;
            return true;
        }
        connecting_ = std::move(*fd);
    }
    const int e = connected(connecting_.get(), std::min(wait, kRejoinEvery));
    if (e == EINPROGRESS && Clock::now() < next_rejoin_ + times_.lost_after) return true;
    if (e != 0) {
        rejoin_why_ = "the leader at " + ip_ + ":" + std::to_string(port_) + ": " +
                      (e == EINPROGRESS ? "no answer to a connection" : std::strerror(e));
        connecting_.reset();
        return true;
    }
    leader_.fd = std::move(connecting_);
    leader_.last_heard = leader_.last_sent = Clock::now();
    welcome_by_ = {};  // a leader that serves turned it away: its silence is lost_after's, as ever
    rejoining_ = false;
    return true;
}

std::string Member::say_hello(const std::string& nonce) {
    hello_.nonce = nonce;
    if (sign_) {
        auto credential = sign_(hello_);
        if (!credential) return credential.error().what;
        hello_.credential = *credential;
    }
    said_hello_ = true;
    heard_since_hello_ = false;
    leader_.member = hello_.member;
    send_line(leader_, encode(hello_));
    for (const std::string& line : waiting_) send(line);
    waiting_.clear();
    return "";
}

std::vector<Event> Member::poll(milliseconds wait, int also_wake) {
    std::vector<Event> events;
    if (lost_) {  // nothing more comes, yet a caller's wait is a wait (a loop around it must not spin)
        pollfd fd{also_wake, POLLIN, 0};
        ::poll(&fd, 1, static_cast<int>(std::min(wait, times_.beat).count()));
        return events;
    }
    std::string why;
    if (rejoining_) {
        if (!step_rejoin(wait, why)) {
            events.push_back({Event::Kind::Lost, -1, Message{}, why, false});
            lost_ = true;
        }
        return events;
    }
    std::array<pollfd, 2> fds{{{leader_.fd.get(), POLLIN, 0}, {also_wake, POLLIN, 0}}};
    ::poll(fds.data(), fds.size(), static_cast<int>(std::min(wait, until_beat()).count()));
    const pollfd& fd = fds[0];
    std::vector<std::string> lines;
    const Pumped pumped = (fd.revents & (POLLIN | POLLHUP | POLLERR)) == 0 ? Pumped::Open : pump(leader_, lines, true);
    const bool open = pumped == Pumped::Open;
    why = pumped == Pumped::TooLong ? "the leader sent a line longer than " + std::to_string(kLineBytes >> 10) + " KiB"
                                    : "connection closed";
    bool refused = false;
    size_t listed = 0;  // node ids the lines of this read named: a whole group's at most, as a leader says them
    for (const std::string& line : lines) {
        auto message = decode(line, From::Leader);
        if (!message) continue;
        if ((listed += ids_named(*message)) > kMaxListed) {
            why = "the leader named more than " + std::to_string(kMaxListed) + " nodes in one read", lost_ = true;
            break;
        }
        if (auto* welcome = std::get_if<Welcome>(&*message); welcome && !said_hello_) {
            if (std::string e = say_hello(welcome->nonce); !e.empty()) why = e, lost_ = true;
            continue;
        }
        if (said_hello_) heard_since_hello_ = true, sent_since_hello_.clear();
        if (auto* r = std::get_if<Refused>(&*message))
            events.push_back({Event::Kind::Refused, -1, {}, r->reason}), refused = true;
        else if (!std::holds_alternative<Beat>(*message))
            events.push_back({Event::Kind::Received, -1, *message, ""});
    }
    // Closed with nothing said after the hello (nor a refusal): turned away unheard, as a flooded leader does.
    const bool unheard = pumped == Pumped::Closed && !lost_ && !refused && !heard_since_hello_;
    if (unheard && times_.rejoin_within.count() > 0 && start_rejoin(why)) {
        rejoining_ = true;
        return events;
    }
    // Connected into the backlog of node 0's port before its leader serves it (Leader::adopt), a member waits
    // for the welcome until welcome_by_; past it, a leader that never welcomed it is named for that.
    const bool unwelcomed = !said_hello_ && welcome_by_ != Clock::time_point{};
    const bool awaiting_welcome = unwelcomed && Clock::now() < welcome_by_;
    if (unwelcomed && !awaiting_welcome && !lost_ && open)
        why = "the leader at " + ip_ + ":" + std::to_string(port_) +
              " accepted this node's connection but sent no "
              "welcome within " +
              seconds_text(times_.welcome_within),
        lost_ = true;
    const Kept kept = lost_ || !open     ? Kept::Lost
                      : awaiting_welcome ? Kept::Yes
                                         : keep_time(leader_, 0, times_, beat_due(), why);
    if (kept != Kept::Yes) {
        events.push_back({Event::Kind::Lost, -1, Message{}, why, kept == Kept::Silent});
        leader_.fd.reset();
        lost_ = true;
    }
    return events;
}

// An eighth of a beat early: a member's wait wakes once a beat (Following::tick) and each such wake sends
// one; with a whole beat the timer's jitter would skip every other wake (a wake per half beat cost a third
// more wake-ups), with half a beat the leader's words during a restart would bring beats too.
milliseconds Member::beat_due() const {
    return times_.beat - times_.beat / 8;
}

// How long a wait in poll() may last: until this member's next beat is due, a beat at most (a wait that began
// just before it was due would otherwise hold it back another beat). No beat before the hello: a beat.
milliseconds Member::until_beat() const {
    if (leader_.member < 0) return times_.beat;
    const auto left = std::chrono::ceil<milliseconds>(leader_.last_sent + beat_due() - Clock::now());
    return std::clamp(left, milliseconds(0), times_.beat);
}

void Member::send(const Message& message) {
    send(encode(message));
}

void Member::send(const std::string& line) {
    if (!said_hello_) {
        waiting_.push_back(line);
        return;
    }
    if (!heard_since_hello_ && times_.rejoin_within.count() > 0) sent_since_hello_.push_back(line);
    send_line(leader_, line);
}

}  // namespace dlaunch::group
