// The group channel's sockets. The leader listens and welcomes each connection with a fresh nonce (a node
// late for the rendezvous on the same port reads it as "the nodes met"); each member says hello echoing it
// (admitted once); both sides send
// a heartbeat every `beat` and call a peer lost when nothing came from it for `lost_after` or its connection closed.
// Single-threaded: the owner calls poll() from its own loop and gets what happened as events, in order.
//
// Anyone who reaches the port may connect (README, "Security model"), so the leader bounds what a connection
// that has not proved itself can cost: its hello within kHelloSeconds and kHelloBytes, at most
// kMaxStrangers such connections, or the group's size when larger (a thousand members connect at once)
// (kMaxStrangersPerAddress from one address; a new one closes the oldest), at
// most kReadPerPoll bytes
// read from any connection per poll (nobody's beats wait for one peer's flood), lines of at most kLineBytes
// from members, and a stranger is told nothing of the group: only that it was not admitted. Refusals are
// reported once per address per kRefusalSeconds, with the count of those left unsaid.
#pragma once

#include <chrono>
#include <functional>
#include <list>
#include <set>
#include <string>
#include <vector>

#include "dlaunch/fd.hpp"
#include "dlaunch/group_protocol.hpp"
#include "dlaunch/refusal_log.hpp"
#include "dlaunch/result.hpp"

namespace dlaunch::group {

inline constexpr size_t kHelloBytes = 16 << 10;    // a hello's line (a MUNGE credential is ~0.5 KiB)
inline constexpr size_t kLineBytes = 4 << 20;      // any member's line (an ended attempt's failures)
inline constexpr size_t kReadPerPoll = 256 << 10;  // read from one connection in one poll
inline constexpr int kHelloSeconds = 5;            // a connection's time to say its hello (default)
inline constexpr int kMaxStrangers = 64;           // connections that have not said hello, in all
inline constexpr int kMaxStrangersPerAddress = 8;  // ... from one address
inline constexpr int kRefusalSeconds = 10;         // refusals from one address are reported once in this

struct ChannelTimes {
    std::chrono::milliseconds beat{1000};
    std::chrono::milliseconds lost_after{10000};
    std::chrono::milliseconds hello_within{kHelloSeconds * 1000};  // a connection's time to say its hello
    // A member: for how long it joins again when the leader closed its connection with nothing said after
    // the member's hello (a leader flooded by strangers closes the oldest connections that have not been
    // heard). 0: it does not; a closed connection is a lost leader.
    std::chrono::milliseconds rejoin_within{0};
    // A member: for how long after its connection it waits for the leader's welcome. Where node 0's leader takes
    // the rendezvous's socket over (Leader::adopt), a node answered connects into its backlog before the leader
    // serves it, and waits as long as it would have tried to connect. 0: lost_after, as any silence.
    std::chrono::milliseconds welcome_within{0};
};

struct Event {
    enum class Kind { Joined, Refused, Received, Lost } kind = Kind::Received;
    int member = -1;      // -1: the leader (seen by a member), or a connection that never said hello
    Message message;      // Received
    std::string detail;   // Refused: "refused a connection from 10.0.0.7: why" (the leader), the leader's
                          // reason (a member); Lost: why ("no heartbeat for 10 s")
    bool silent = false;  // Lost by silence (the peer's host may be dead), not by a closed connection
};

// One connection: the bytes not yet a line, and when it last heard and spoke.
struct Peer {
    Fd fd;
    int member = -1;  // -1 until its hello was admitted
    std::string inbox;
    std::string outbox;       // what the socket did not take yet: sent first on the next send or poll
    size_t outbox_taken = 0;  // the head of `outbox` the socket already took (dropped when it is most of it)
    Clock::time_point last_heard;
    Clock::time_point last_sent;
    std::string nonce;           // the leader's welcome to this connection (the leader's side)
    std::string address;         // the peer's IPv4 address (the leader's side)
    Clock::time_point hello_by;  // when a connection that has not said hello is dropped (the leader's side)
};

// The leader's answer to a hello (group_protocol.hpp's admission()).
using Admit = std::function<Admission(const Hello&)>;

class Leader {
public:
    // Listens on `ip` (an address of this host; "0.0.0.0": every interface) and `port` (0: any), for a
    // group of `members` (the strangers' bound grows with it).
    static Result<Leader> listen(const std::string& ip, int port, Admit admit, ChannelTimes times, int members = 0);
    // The same on a socket that listens already (node 0's rendezvous port, handed over): the connections in its
    // backlog, members that reached for the leader before it served, are served first.
    static Result<Leader> adopt(Fd listener, Admit admit, ChannelTimes times, int members = 0);
    int port() const { return port_; }
    std::vector<Event> poll(std::chrono::milliseconds wait);
    // Readable (an epoll descriptor) whenever poll() has something to read: for a caller's own wait.
    int wake_fd() const { return epoll_.get(); }
    void broadcast(const Message& message);
    // Several messages to every member, in one write each (a member reads them at one wake-up).
    void broadcast(const std::vector<Message>& messages);
    // The refusals counted and not said yet, whatever their interval: for when the leader stops.
    std::vector<std::string> unsaid_refusals();

private:
    void accept_new(std::vector<Event>& events);
    void on_line(Peer& peer, const std::string& line, std::vector<Event>& events);
    void serve(Peer& peer, bool readable, std::vector<Event>& events);
    std::chrono::milliseconds sweep_every() const;
    void make_room_for(const std::string& address, std::vector<Event>& events);
    void refuse(const std::string& address, const std::string& why, std::vector<Event>& events);
    void report_unsaid_refusals(std::vector<Event>& events);
    bool watch(int fd, Peer* peer);
    void close(Peer& peer);
    void tidy();
    Fd listener_;
    Fd epoll_;  // the listener and every connection
    int port_ = 0;
    int max_strangers_ = kMaxStrangers;
    Admit admit_;
    ChannelTimes times_;
    // Lists: each connection keeps its place (epoll's events point at it); closed ones go after a poll. A
    // connection moves from strangers_ to members_ (a splice) after the poll that admitted its hello, so that
    // making room for a new one looks at the strangers only (all of them made joining O(N²)).
    std::list<Peer> strangers_;
    std::list<Peer> members_;
    bool closed_ = false;           // a connection closed in this poll, not dropped yet
    bool admitted_now_ = false;     // a hello was admitted in this poll: its connection moves to members_
    Clock::time_point next_sweep_;  // when the clock is next read for every connection (beats, silence)
    std::set<int> admitted_;        // every member ever admitted: a second hello (a replay) is refused
    RefusalLog refusals_{std::chrono::seconds(kRefusalSeconds)};
};

// The hello's credential, made once the leader's welcome gave its nonce.
using Sign = std::function<Result<std::string>(const Hello&)>;

class Member {
public:
    // Connects (from the address `from` when given: the leader tells members apart by address), waiting at
    // most times.lost_after for the connection. The hello
    // goes once poll() read the leader's welcome: its nonce echoed, signed with `sign` (none: the credential
    // as given); what send() says before that waits for it.
    static Result<Member> join(const std::string& ip, int port, Hello hello, ChannelTimes times, Sign sign = {},
                               const std::string& from = "");
    // What the leader said within `wait` (at most a heartbeat; once the channel is lost, nothing, after the
    // wait). The wait ends early too when `also_wake` (the caller's: its signals, say; -1: none) is readable,
    // which the caller reads; not while the member joins again (a flooded leader turned it away unheard),
    // whose steps wait up to 200 ms.
    std::vector<Event> poll(std::chrono::milliseconds wait, int also_wake = -1);
    void send(const Message& message);
    // Readable whenever poll() has something to read. It changes only when the member joins again, before
    // the leader answered its hello (times.rejoin_within).
    int wake_fd() const { return leader_.fd.get(); }

private:
    std::chrono::milliseconds beat_due() const;
    std::chrono::milliseconds until_beat() const;
    std::string say_hello(const std::string& nonce);  // "" or why it could not
    void send(const std::string& line);
    bool start_rejoin(std::string& why);
    bool step_rejoin(std::chrono::milliseconds wait, std::string& why);
    Peer leader_;
    ChannelTimes times_;
    Hello hello_;
    Sign sign_;
    bool said_hello_ = false;
    std::vector<std::string> waiting_;  // lines sent before the hello
    bool lost_ = false;
    // Rejoining (times_.rejoin_within): where the leader is, until when, and what was said since the hello.
    std::string ip_, from_;
    int port_ = 0;
    Clock::time_point rejoin_by_, next_rejoin_;
    Clock::time_point welcome_by_{};  // times_.welcome_within after the first connection (epoch: none)
    bool heard_since_hello_ = false;
    std::vector<std::string> sent_since_hello_;  // again on a new connection if the leader closed it unheard
    bool rejoining_ = false;
    Fd connecting_;
    std::string rejoin_why_;
};

}  // namespace dlaunch::group
