// The group channel's sockets. The leader listens and greets each connection with a beat (a node late for
// the rendezvous on the same port reads it as "the nodes met"); each member says hello (admitted once); both sides send
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

class Member {
public:
    static Result<Member> join(const std::string& ip, int port, const Hello& hello, ChannelTimes times);
    std::vector<Event> poll(std::chrono::milliseconds wait);
    void send(const Message& message);

private:
    Peer leader_;
    ChannelTimes times_;
    bool lost_ = false;
};

}  // namespace dlaunch::group
