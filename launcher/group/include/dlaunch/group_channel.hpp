// The group channel's sockets. The leader listens and welcomes each connection with a fresh nonce (a node
// late for the rendezvous on the same port reads it as "the nodes met"); each member says hello echoing it
// (admitted once); both sides send
// a heartbeat every `beat` and call a peer lost when nothing came from it for `lost_after` or its connection closed.
// Single-threaded: the owner calls poll() from its own loop and gets what happened as events, in order.
#pragma once

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "dlaunch/fd.hpp"
#include "dlaunch/group_protocol.hpp"
#include "dlaunch/result.hpp"

namespace dlaunch::group {

struct ChannelTimes {
    std::chrono::milliseconds beat{1000};
    std::chrono::milliseconds lost_after{10000};
};

struct Event {
    enum class Kind { Joined, Refused, Received, Lost } kind = Kind::Received;
    int member = -1;      // -1: the leader (seen by a member), or a connection that never said hello
    Message message;      // Received
    std::string detail;   // Refused: the reason; Lost: why ("no heartbeat for 10 s", "connection closed")
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
    std::string nonce;  // the leader's welcome to this connection (the leader's side)
};

// "" admits the hello; otherwise why not (refusal() with a verified credential).
using Admit = std::function<std::string(const Hello&)>;

class Leader {
public:
    static Result<Leader> listen(const std::string& ip, int port, Admit admit, ChannelTimes times);
    int port() const { return port_; }
    std::vector<Event> poll(std::chrono::milliseconds wait);
    void broadcast(const Message& message);

private:
    void accept_new();
    void on_line(Peer& peer, const std::string& line, std::vector<Event>& events);
    Fd listener_;
    int port_ = 0;
    Admit admit_;
    ChannelTimes times_;
    std::vector<Peer> peers_;
    std::set<int> admitted_;  // every member ever admitted: a second hello (a replay) is refused
};

// The hello's credential, made once the leader's welcome gave its nonce.
using Sign = std::function<Result<std::string>(const Hello&)>;

class Member {
public:
    // Connects. The hello goes once poll() read the leader's welcome: its nonce echoed, signed with `sign`
    // (none: the credential as given); what send() says before that waits for it.
    static Result<Member> join(const std::string& ip, int port, Hello hello, ChannelTimes times, Sign sign = {});
    std::vector<Event> poll(std::chrono::milliseconds wait);
    void send(const Message& message);

private:
    std::string say_hello(const std::string& nonce);  // "" or why it could not
    Peer leader_;
    ChannelTimes times_;
    Hello hello_;
    Sign sign_;
    bool said_hello_ = false;
    std::vector<std::string> waiting_;  // lines sent before the hello
    bool lost_ = false;
};

}  // namespace dlaunch::group
