// The group channel over loopback TCP: joining, refusing, messages both ways, and a lost member found by
// its silence or its closed connection. One thread: the test polls each side in turn.
#include "dlaunch/group_channel.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <thread>

namespace dlaunch::group {
namespace {

using namespace std::chrono_literals;

// A bound a loaded 2-core CI machine cannot miss by descheduling the test for a moment.
const ChannelTimes kFast{50ms, 1000ms};

// For tests about order, not time: a sanitizer build on a loaded machine may be silent for seconds.
const ChannelTimes kPatient{50ms, 30000ms};

Leader leader(
    Admit admit = [](const Hello&) { return Admission{}; }, ChannelTimes times = kFast) {
    auto l = Leader::listen("127.0.0.1", 0, std::move(admit), times);
    EXPECT_TRUE(l) << l.error().message();
    return std::move(*l);
}

Member member_at(int port, ChannelTimes times, int id = 1) {
    auto m = Member::join("127.0.0.1", port, Hello{"812", id, "node" + std::to_string(id + 1), "cred", 0, ""}, times);
    EXPECT_TRUE(m) << m.error().message();
    return std::move(*m);
}

Member member(const Leader& l, int id, ChannelTimes times = kFast) {
    return member_at(l.port(), times, id);
}

class GroupChannel : public ::testing::Test {
protected:
    // Polls the leader (and keeps `members` beating) until an event of `kind` comes, for at most `bound`.
    // Events of one poll that are not returned stay for the next call.
    std::optional<Event> next(Leader& l, Event::Kind kind, std::vector<Member*> members = {},
                              std::chrono::milliseconds bound = 2000ms) {
        auto& queue = pending_[l.port()];
        const auto deadline = Clock::now() + bound;
        for (;;) {
            for (auto it = queue.begin(); it != queue.end(); ++it)
                if (it->kind == kind) {
                    Event e = *it;
                    queue.erase(it);
                    return e;
                }
            if (Clock::now() >= deadline) return std::nullopt;
            for (Member* m : members) (void)m->poll(0ms);
            for (Event& e : l.poll(10ms)) queue.push_back(e);
        }
    }

private:
    std::map<int, std::deque<Event>> pending_;
};

TEST_F(GroupChannel, MembersJoinAndMessagesGoBothWays) {
    Leader l = leader();
    Member a = member(l, 1);
    auto joined = next(l, Event::Kind::Joined, {&a});
    ASSERT_TRUE(joined);
    EXPECT_EQ(joined->member, 1);
    a.send(Ended{1, 0, MemberEnd::Succeeded, {}, {}});
    auto got = next(l, Event::Kind::Received);
    ASSERT_TRUE(got);
    EXPECT_EQ(got->message, Message(Ended{1, 0, MemberEnd::Succeeded, {}, {}}));
    Decided decided;
    decided.decision.summary = "every node finished";
    l.broadcast(decided);
    std::optional<Event> back;
    for (int i = 0; i < 100 && !back; ++i)
        for (Event& e : a.poll(10ms))
            if (e.kind == Event::Kind::Received) back = e;
    ASSERT_TRUE(back);
    EXPECT_EQ(back->message, Message(decided));
}

// A restart's decision and the next attempt's gate go in one write: the member reads both at one wake-up.
TEST_F(GroupChannel, MessagesBroadcastTogetherArriveTogether) {
    Leader l = leader();
    Member a = member(l, 1);
    ASSERT_TRUE(next(l, Event::Kind::Joined, {&a}));
    Decided decided;
    decided.decision.kind = GroupDecision::Kind::Restart;
    const Gate gate{1, {0, 1}, {}};
    l.broadcast(std::vector<Message>{decided, gate});
    std::vector<Event> got;
    for (int i = 0; i < 100 && got.empty(); ++i)
        for (Event& e : a.poll(10ms))
            if (e.kind == Event::Kind::Received && !std::holds_alternative<Beat>(e.message)) got.push_back(e);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].message, Message(decided));
    EXPECT_EQ(got[1].message, Message(gate));
}

// What a refused agent is told.
std::optional<Event> told(Member& m) {
    for (int i = 0; i < 100; ++i)
        for (Event& e : m.poll(10ms))
            if (e.kind == Event::Kind::Refused) return e;
    return std::nullopt;
}

TEST_F(GroupChannel, AForeignHelloIsRefusedAndNeverJoins) {
    // A sender that proved it is the job's user (another run of it) is told why.
    Leader l = leader([](const Hello& h) { return h.run_id == "812" ? Admission{} : Admission{"wrong run", true}; });
    auto m = Member::join("127.0.0.1", l.port(), Hello{"999", 1, "intruder", "cred", 0, ""}, kFast);
    ASSERT_TRUE(m);
    auto refused = next(l, Event::Kind::Refused, {&*m});
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->detail, "refused a connection from 127.0.0.1: wrong run");
    auto why = told(*m);
    ASSERT_TRUE(why) << "the refused agent is told why";
    EXPECT_EQ(why->detail, "wrong run");
    EXPECT_FALSE(next(l, Event::Kind::Joined, {}, 200ms));
}

TEST_F(GroupChannel, AStrangerLearnsNothingOfTheGroup) {
    Leader l = leader([](const Hello&) {
        return Admission{"the credential is of uid 1001, not the job's (0)", false};
    });
    Member first = member(l, 1);  // member 1 joins first: a stranger's hello as member 1 must not hear that
    auto stranger = Member::join("127.0.0.1", l.port(), Hello{"812", 1, "node2", "forged", 0, ""}, kFast);
    ASSERT_TRUE(stranger);
    auto refused = next(l, Event::Kind::Refused, {&first, &*stranger});
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->detail, "refused a connection from 127.0.0.1: the credential is of uid 1001, not the job's (0)");
    auto why = told(*stranger);
    ASSERT_TRUE(why);
    EXPECT_EQ(why->detail, "not admitted to this group");
}

TEST_F(GroupChannel, ASecondHelloOfAnAdmittedMemberIsRefused) {
    Leader l = leader();
    Member first = member(l, 1);
    ASSERT_TRUE(next(l, Event::Kind::Joined, {&first}));
    // The same hello again (a copy of the first, played by whoever saw it go by) joins nothing.
    auto again = Member::join("127.0.0.1", l.port(), Hello{"812", 1, "node2", "cred", 0, ""}, kFast);
    ASSERT_TRUE(again);
    auto refused = next(l, Event::Kind::Refused, {&first, &*again});
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->detail, "refused a connection from 127.0.0.1: member 1 joined already; each member joins once");
    EXPECT_FALSE(next(l, Event::Kind::Joined, {&first}, 200ms));
}

TEST_F(GroupChannel, ASilentMemberIsLostAfterTheBoundAndABeatingOneIsNot) {
    Leader l = leader();
    Member quiet = member(l, 1);
    Member busy = member(l, 2);
    ASSERT_TRUE(next(l, Event::Kind::Joined, {&busy, &quiet}));  // polled until it said hello
    ASSERT_TRUE(next(l, Event::Kind::Joined, {&busy, &quiet}));
    const auto start = Clock::now();
    auto lost = next(l, Event::Kind::Lost, {&busy});  // `quiet` is never polled, so it never beats
    ASSERT_TRUE(lost);
    EXPECT_EQ(lost->member, 1);
    EXPECT_EQ(lost->detail, "no heartbeat for 1 s");
    EXPECT_TRUE(lost->silent) << "lost by silence: its host may be dead";
    EXPECT_GE(Clock::now() - start, 900ms) << "not before the bound";
    EXPECT_FALSE(next(l, Event::Kind::Lost, {&busy}, 1500ms)) << "a member that beats stays";
}

TEST_F(GroupChannel, AClosedConnectionIsLostAtOnceOnBothSides) {
    Leader l = leader();
    std::optional<Member> m = member(l, 1);
    ASSERT_TRUE(next(l, Event::Kind::Joined, {&*m}));
    m.reset();
    auto lost = next(l, Event::Kind::Lost, {}, 900ms);
    ASSERT_TRUE(lost) << "a closed connection does not wait for the heartbeat bound";
    EXPECT_EQ(lost->detail, "connection closed");
    EXPECT_FALSE(lost->silent) << "a closed connection is not silence";

    Leader l2 = leader();
    Member orphan = member(l2, 1);
    ASSERT_TRUE(next(l2, Event::Kind::Joined, {&orphan}));
    l2 = leader();  // the old leader is gone: its sockets closed
    std::optional<Event> gone;
    for (int i = 0; i < 30 && !gone; ++i)
        for (Event& e : orphan.poll(10ms))
            if (e.kind == Event::Kind::Lost) gone = e;
    ASSERT_TRUE(gone);
    EXPECT_EQ(gone->member, -1);
    EXPECT_EQ(gone->detail, "connection closed");
    EXPECT_FALSE(gone->silent);
}

// A member's wait ends early when the caller's own descriptor (its signals) is readable; once the leader is
// gone nothing more comes, yet the wait is still a wait (a loop around it does not spin).
TEST_F(GroupChannel, AMembersWaitEndsOnTheCallersDescriptorAndStillWaitsOnceTheLeaderIsGone) {
    const ChannelTimes slow{20000ms, 60000ms};  // beats far apart: only the descriptor can end a wait early
    std::optional<Leader> l = leader([](const Hello&) { return Admission{}; }, slow);
    Member m = member_at(l->port(), slow);
    ASSERT_TRUE(next(*l, Event::Kind::Joined, {&m}));
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    ASSERT_EQ(::write(fds[1], "x", 1), 1);
    auto started = Clock::now();
    EXPECT_TRUE(m.poll(15000ms, fds[0]).empty());
    EXPECT_LT(Clock::now() - started, 10000ms) << "the readable descriptor did not end the wait";
    l.reset();  // the leader is gone: its sockets closed
    std::optional<Event> gone;
    for (int i = 0; i < 30 && !gone; ++i)
        for (Event& e : m.poll(10ms))
            if (e.kind == Event::Kind::Lost) gone = e;
    ASSERT_TRUE(gone);
    char c = 0;
    ASSERT_EQ(::read(fds[0], &c, 1), 1);
    started = Clock::now();
    EXPECT_TRUE(m.poll(300ms, fds[0]).empty());
    EXPECT_GE(Clock::now() - started, 250ms) << "a lost member's poll returned at once";
    ASSERT_EQ(::write(fds[1], "x", 1), 1);
    started = Clock::now();
    EXPECT_TRUE(m.poll(15000ms, fds[0]).empty());
    EXPECT_LT(Clock::now() - started, 10000ms) << "the readable descriptor did not end a lost member's wait";
    ::close(fds[0]);
    ::close(fds[1]);
}

// A raw connection to the leader's port that has said nothing yet.
int raw_socket(const Leader& l) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(l.port()));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
}

// A raw connection that says what the test wants, bytes and all, once the leader (polled meanwhile)
// welcomed it: `say` gets the welcome's nonce.
int raw_connect(Leader& l, const std::function<std::string(const std::string& nonce)>& say) {
    int fd = raw_socket(l);
    std::string welcome;
    char c = 0;
    for (int i = 0; i < 200 && welcome.find('\n') == std::string::npos; ++i) {
        (void)l.poll(10ms);
        while (::recv(fd, &c, 1, MSG_DONTWAIT) == 1 && (welcome += c, c != '\n')) {
        }
    }
    auto message = decode(welcome);
    EXPECT_TRUE(message && std::holds_alternative<Welcome>(*message)) << welcome;
    const std::string bytes = say(message ? std::get<Welcome>(*message).nonce : "");
    EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
    return fd;
}

Hello hello_of(int member, const std::string& nonce) {
    return Hello{"812", member, "node" + std::to_string(member + 1), "cred", 0, nonce};
}

TEST_F(GroupChannel, AnAdmittedMemberThatBreaksTheProtocolIsLostNotJustRefused) {
    Leader l = leader();
    int garbled = raw_connect(l, [](const std::string& n) { return encode(hello_of(1, n)) + "{not json\n"; });
    auto joined = next(l, Event::Kind::Joined);
    ASSERT_TRUE(joined);
    auto lost = next(l, Event::Kind::Lost);
    ASSERT_TRUE(lost) << "the group must count it out, or it would wait for its end";
    EXPECT_EQ(lost->member, 1);
    EXPECT_EQ(lost->detail.rfind("sent an unreadable line (", 0), 0u) << lost->detail;

    int twice = raw_connect(l, [](const std::string& n) { return encode(hello_of(2, n)) + encode(hello_of(2, n)); });
    ASSERT_TRUE(next(l, Event::Kind::Joined));
    lost = next(l, Event::Kind::Lost);
    ASSERT_TRUE(lost);
    EXPECT_EQ(lost->member, 2);
    EXPECT_EQ(lost->detail, "said hello twice");
    ::close(garbled);
    ::close(twice);
}

TEST_F(GroupChannel, AHelloPlayedAgainOnAnotherConnectionIsRefused) {
    Leader l = leader();
    std::string seen;  // the hello as it went over the network, welcome nonce and all
    int first = raw_connect(l, [&](const std::string& n) { return seen = encode(hello_of(1, n)); });
    ASSERT_TRUE(next(l, Event::Kind::Joined));
    ::close(first);
    ASSERT_TRUE(next(l, Event::Kind::Lost));
    int replay = raw_connect(l, [&](const std::string&) { return seen; });
    auto refused = next(l, Event::Kind::Refused);
    ASSERT_TRUE(refused);
    EXPECT_EQ(
        refused->detail,
        "refused a connection from 127.0.0.1: the hello does not answer this connection's welcome (played again?)");
    ::close(replay);
}

TEST_F(GroupChannel, ALongLineFromAStrangerIsCutOffAtTheHelloBoundAndMembersKeepBeating) {
    Leader l = leader();
    Member m = member(l, 1);
    ASSERT_TRUE(next(l, Event::Kind::Joined, {&m}));
    int flood = raw_socket(l);
    const std::string chunk(1 << 20, 'x');  // no line end: 1 MiB, then more while the leader reads
    size_t sent = 0;
    std::optional<Event> refused;
    for (int i = 0; i < 400 && !refused; ++i) {
        ssize_t n = ::send(flood, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) sent += static_cast<size_t>(n);
        (void)m.poll(0ms);
        for (Event& e : l.poll(5ms))
            if (e.kind == Event::Kind::Refused)
                refused = e;
            else
                EXPECT_NE(e.kind, Event::Kind::Lost) << e.detail;
    }
    ASSERT_TRUE(refused) << sent << " bytes sent";
    EXPECT_EQ(refused->detail, "refused a connection from 127.0.0.1: sent a line longer than 16 KiB");
    EXPECT_FALSE(next(l, Event::Kind::Lost, {&m}, 300ms)) << "the member is heard all along";
    ::close(flood);
}

TEST_F(GroupChannel, ALongLineFromAMemberLosesIt) {
    Leader l = leader([](const Hello&) { return Admission{}; }, kPatient);
    int fd = raw_connect(l, [](const std::string& n) { return encode(hello_of(1, n)); });
    ASSERT_TRUE(next(l, Event::Kind::Joined));
    const std::string chunk(1 << 20, 'x');
    std::optional<Event> lost;
    for (int i = 0; i < 100 && !lost; ++i) {
        (void)::send(fd, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        for (Event& e : l.poll(5ms))
            if (e.kind == Event::Kind::Lost) lost = e;
    }
    ASSERT_TRUE(lost);
    EXPECT_EQ(lost->detail, "sent a line longer than 4096 KiB");
    ::close(fd);
}

TEST_F(GroupChannel, AConnectionThatSaysNoHelloInTimeIsClosed) {
    ChannelTimes times = kFast;
    times.hello_within = 200ms;
    Leader l = leader([](const Hello&) { return Admission{}; }, times);
    int silent = raw_socket(l);
    auto refused = next(l, Event::Kind::Refused);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->detail, "refused a connection from 127.0.0.1: said no hello within 0.2 s");
    ::close(silent);
}

TEST_F(GroupChannel, StrangersHoldAtMostTheirShareAndAMemberStillJoinsAmongThem) {
    Leader l = leader([](const Hello&) { return Admission{}; }, kPatient);
    std::vector<int> strangers;
    for (int i = 0; i < kMaxStrangersPerAddress + 3; ++i) strangers.push_back(raw_socket(l));
    // The leader keeps the newest ones; the oldest are closed, and refusals from one address are said once.
    auto refused = next(l, Event::Kind::Refused);
    ASSERT_TRUE(refused);
    EXPECT_NE(refused->detail.find("closed unheard: newer connections came"), std::string::npos) << refused->detail;
    EXPECT_FALSE(next(l, Event::Kind::Refused, {}, 200ms)) << "two more were refused, said once per 10 s";
    Member m = member(l, 1, kPatient);
    EXPECT_TRUE(next(l, Event::Kind::Joined, {&m}));
    int closed = 0;
    for (int fd : strangers) {
        char buf[4096];
        ssize_t n;
        while ((n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {  // the welcome, then the end if closed
        }
        closed += n == 0;
        ::close(fd);
    }
    EXPECT_GE(closed, 3);
}

TEST_F(GroupChannel, ManyMessagesArriveWholeAndInOrderWhileTheReaderLags) {
    Leader l = leader([](const Hello&) { return Admission{}; }, kPatient);
    Member m = member(l, 1, kPatient);
    ASSERT_TRUE(next(l, Event::Kind::Joined, {&m}));
    Stop big{0, std::string(4000, 'x')};
    for (int i = 0; i < 5000; ++i) {  // 20 MB: more than loopback socket buffers take at once
        big.attempt = i;
        l.broadcast(big);
    }
    int expected = 0;
    const auto deadline = Clock::now() + 60s;
    while (expected < 5000 && Clock::now() < deadline) {
        for (Event& e : m.poll(10ms)) {
            ASSERT_EQ(e.kind, Event::Kind::Received) << e.detail;
            EXPECT_EQ(std::get<Stop>(e.message).attempt, expected++);
        }
        (void)l.poll(0ms);  // the leader sends the rest as the member reads
    }
    EXPECT_EQ(expected, 5000);
}

// A listening socket on a free loopback port, and that port.
std::pair<Fd, int> raw_listener() {
    Fd fd(::socket(AF_INET, SOCK_STREAM, 0));
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(::listen(fd.get(), 4), 0);
    EXPECT_EQ(getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
    return {std::move(fd), ntohs(a.sin_port)};
}

// A member that joins again for `rejoin_within` when the leader closes it unheard.
Member rejoining_member(int port, std::chrono::milliseconds rejoin_within) {
    ChannelTimes times = kPatient;
    times.rejoin_within = rejoin_within;
    return member_at(port, times);
}

class Rejoin : public GroupChannel {
protected:
    // The member joins `l` (again) with id 1, and none of its polls, `seen` included, said the leader lost.
    void expect_joined_never_lost(Leader& l, Member& m, std::vector<Event> seen) {
        auto joined = next(l, Event::Kind::Joined, {&m}, 5000ms);
        ASSERT_TRUE(joined) << "the member never joined";
        EXPECT_EQ(joined->member, 1);
        for (int i = 0; i < 5; ++i)
            for (Event& e : m.poll(10ms)) seen.push_back(e);
        for (const Event& e : seen) EXPECT_NE(e.kind, Event::Kind::Lost) << e.detail;
    }
};

TEST_F(Rejoin, AMemberTurnedAwayBeforeTheWelcomeConnectsAgainAndJoins) {
    // The leader's port first drops the connection unheard (as a leader flooded by strangers does), then a
    // real leader listens there: the member joins it, and nobody sees the leader lost.
    auto [raw, port] = raw_listener();
    Member m = rejoining_member(port, 10000ms);
    ::close(::accept(raw.get(), nullptr, nullptr));
    raw.reset();
    std::vector<Event> seen = m.poll(50ms);  // the close: it connects again, refused until the leader listens
    auto l = Leader::listen(
        "127.0.0.1", port, [](const Hello&) { return Admission{}; }, kPatient);
    ASSERT_TRUE(l) << l.error().message();
    expect_joined_never_lost(*l, m, seen);
}

TEST_F(Rejoin, AMemberAFloodedLeaderClosedUnheardJoinsAgainAmongTheStrangers) {
    // The member connects first; strangers from its own address then flood the leader, which welcomes
    // the member and closes it as the oldest connection not heard yet. The member joins again.
    Leader l = leader([](const Hello&) { return Admission{}; }, kPatient);
    Member m = rejoining_member(l.port(), 10000ms);
    std::vector<int> strangers;
    for (int i = 0; i < kMaxStrangersPerAddress + 1; ++i) strangers.push_back(raw_socket(l));
    ASSERT_TRUE(next(l, Event::Kind::Refused)) << "the member's first connection was not closed unheard";
    expect_joined_never_lost(l, m, m.poll(50ms));
    for (int fd : strangers) ::close(fd);
}

TEST_F(Rejoin, AMemberInTheBacklogOfNodeZerosPortWaitsForTheLeaderThatTakesItOver) {
    // Node 0's rendezvous socket, handed to its leader (Leader::adopt): a member answered first connects into
    // its backlog and, silent past lost_after while within its welcome window, is not lost; the leader that
    // takes the socket over serves it.
    auto [raw, port] = raw_listener();
    ChannelTimes times = kFast;
    times.rejoin_within = times.welcome_within = 10000ms;
    Member m = member_at(port, times);
    std::vector<Event> seen;
    for (const auto until = Clock::now() + times.lost_after + 300ms; Clock::now() < until;)
        for (Event& e : m.poll(20ms)) seen.push_back(e);
    auto l = Leader::adopt(
        std::move(raw), [](const Hello&) { return Admission{}; }, kPatient);
    ASSERT_TRUE(l) << l.error().message();
    EXPECT_EQ(l->port(), port);
    expect_joined_never_lost(*l, m, seen);
}

TEST_F(Rejoin, ALeaderThatNeverWelcomesIsLostAfterLostAfterOrTheWelcomeWindow) {
    // A socket that listens and never speaks: without a welcome window the member finds it lost by its
    // silence (lost_after), whatever its rejoin window; with one, once that window is over, named for it.
    for (const auto welcome : {0ms, 1500ms}) {
        auto [raw, port] = raw_listener();
        ChannelTimes times = kFast;
        times.rejoin_within = 10000ms;
        times.welcome_within = welcome;
        const auto start = Clock::now();
        Member m = member_at(port, times);
        std::optional<Event> lost;
        for (int i = 0; i < 300 && !lost; ++i)
            for (Event& e : m.poll(20ms))
                if (e.kind == Event::Kind::Lost) lost = e;
        ASSERT_TRUE(lost) << "never lost, welcome window " << welcome.count() << " ms";
        const auto after = Clock::now() - start;
        EXPECT_GE(after, std::max(times.lost_after, welcome)) << welcome.count();
        if (welcome.count() == 0)
            EXPECT_EQ(lost->detail, "no heartbeat for 1 s");
        else
            EXPECT_EQ(lost->detail, "the leader at 127.0.0.1:" + std::to_string(port) +
                                        " accepted this node's connection but sent no welcome within 1.5 s");
    }
}

TEST_F(Rejoin, AMemberTurnedAwayWithNoLeaderComingSaysSoOnceTheRejoinWindowIsOver) {
    auto [raw, port] = raw_listener();
    Member m = rejoining_member(port, 1000ms);
    ::close(::accept(raw.get(), nullptr, nullptr));
    raw.reset();
    std::optional<Event> lost;
    for (int i = 0; i < 200 && !lost; ++i)
        for (Event& e : m.poll(20ms))
            if (e.kind == Event::Kind::Lost) lost = e;
    ASSERT_TRUE(lost) << "the member never gave up";
    EXPECT_EQ(lost->detail,
              "the leader closed the connection before answering this node's hello, and joining again "
              "for 1 s did not help (last: the leader at 127.0.0.1:" +
                  std::to_string(port) + ": Connection refused)");
}

TEST_F(GroupChannel, AMemberSayingTheLeadersMessagesIsLost) {
    Leader l = leader();
    int fd = raw_connect(l, [](const std::string& n) {
        return encode(hello_of(1, n)) + R"({"v":6,"type":"gate","attempt":0,"left_out":[],"members":[[0,1048575]]})" +
               "\n";
    });
    ASSERT_TRUE(next(l, Event::Kind::Joined));
    auto lost = next(l, Event::Kind::Lost);
    ASSERT_TRUE(lost);
    EXPECT_EQ(lost->detail, R"(sent an unreadable line (a member does not send "gate"))");
    ::close(fd);
}

// Runs name many ids in few bytes: what one read from the leader may name is bounded (a whole group's).
TEST_F(GroupChannel, ALeaderNamingMoreNodesThanAGroupHasIsLost) {
    auto [raw, port] = raw_listener();
    Member m = member_at(port, kPatient);
    Fd leader_side(::accept(raw.get(), nullptr, nullptr));
    ASSERT_GE(leader_side.get(), 0);
    std::string say = encode(Welcome{"n"});
    for (int i = 0; i < 3; ++i)
        say += R"({"v":6,"type":"gate","attempt":0,"left_out":[],"members":[[0,524287]]})"
               "\n";
    ASSERT_EQ(::send(leader_side.get(), say.data(), say.size(), 0), static_cast<ssize_t>(say.size()));
    std::optional<Event> lost;
    int gates = 0;
    for (int i = 0; i < 200 && !lost; ++i)
        for (Event& e : m.poll(10ms)) {
            if (e.kind == Event::Kind::Lost) lost = e;
            gates += e.kind == Event::Kind::Received;
        }
    ASSERT_TRUE(lost) << "a leader's lines naming 1.5 M ids must not all be taken";
    EXPECT_EQ(lost->detail, "the leader named more than 1048576 nodes in one read");
    EXPECT_LE(gates, 2);
}

TEST_F(GroupChannel, NoLeaderThereIsAClearError) {
    // A port that is bound but not listening: a connection to it is refused, and nobody can take it meanwhile.
    Fd bound(::socket(AF_INET, SOCK_STREAM, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ASSERT_EQ(::bind(bound.get(), reinterpret_cast<sockaddr*>(&a), len), 0);
    ASSERT_EQ(getsockname(bound.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
    auto m = Member::join("127.0.0.1", ntohs(a.sin_port), Hello{"812", 1, "node2", "c", 0, ""}, kFast);
    ASSERT_FALSE(m);
    EXPECT_NE(m.error().what.find("cannot reach the group's leader at 127.0.0.1:"), std::string::npos)
        << m.error().what;
    EXPECT_EQ(Leader::listen("not-an-ip", 0, {}, kFast).error().hint, "give the leader's address as a.b.c.d");
}

}  // namespace
}  // namespace dlaunch::group
