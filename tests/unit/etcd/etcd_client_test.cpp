// The etcd client against a real etcd (Debian's etcd-server), started by the test on loopback ports.
// A missing etcd fails these tests: packaging/debian-deps.sh installs it.
#include "dlaunch/etcd_client.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "dlaunch/etcd_membership.hpp"

namespace dlaunch::etcd {
namespace {

using namespace std::chrono_literals;

// A free loopback port (bound, read, closed: another process could take it meanwhile; fine for a test).
int free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
}

Endpoint loopback(int port) {
    return *parse_endpoint("127.0.0.1:" + std::to_string(port));
}

class RealEtcd : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(std::filesystem::exists(DLAUNCH_ETCD))
            << DLAUNCH_ETCD << " is missing: install etcd-server (packaging/debian-deps.sh does)";
        dir_ = std::filesystem::temp_directory_path() / ("dlaunch-etcd-test-" + std::to_string(::getpid()));
        std::filesystem::remove_all(dir_);
        client_port_ = free_port();
        const std::string client = "http://127.0.0.1:" + std::to_string(client_port_);
        const std::string peer = "http://127.0.0.1:" + std::to_string(free_port());
        pid_ = ::fork();
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test killed by CTest's timeout takes its etcd with it
            const std::string log = (dir_.parent_path() / (dir_.filename().string() + ".log")).string();
            FILE* out = std::freopen(log.c_str(), "w", stderr);
            (void)out;
            ::execl(DLAUNCH_ETCD, "etcd", "--name", "t", "--data-dir", dir_.c_str(), "--listen-client-urls",
                    client.c_str(), "--advertise-client-urls", client.c_str(), "--listen-peer-urls", peer.c_str(),
                    "--initial-advertise-peer-urls", peer.c_str(), "--initial-cluster", ("t=" + peer).c_str(),
                    static_cast<char*>(nullptr));
            ::_exit(127);
        }
        Client probe(loopback(client_port_), 500ms);
        for (int i = 0; i < 200 && !probe.get_prefix("/"); ++i) std::this_thread::sleep_for(50ms);
        ASSERT_TRUE(probe.get_prefix("/")) << "etcd did not answer on " << client;
    }
    void TearDown() override {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        std::filesystem::remove_all(dir_);
        std::filesystem::remove(dir_.parent_path() / (dir_.filename().string() + ".log"));
    }
    Client client(std::chrono::milliseconds timeout = 2s) { return Client(loopback(client_port_), timeout); }

    std::filesystem::path dir_;
    int client_port_ = 0;
    pid_t pid_ = -1;
};

TEST_F(RealEtcd, ALeasesKeysLiveWhileItIsKeptAliveAndGoWithIt) {
    Client c = client();
    auto lease = c.grant(10);
    ASSERT_TRUE(lease) << lease.error().describe();
    ASSERT_TRUE(c.put("/dlaunch/r/members/a", "10.0.0.1", *lease));
    auto ttl = c.keep_alive(*lease);
    ASSERT_TRUE(ttl) << ttl.error().describe();
    EXPECT_GT(*ttl, 0);
    ASSERT_EQ(c.get_prefix("/dlaunch/r/")->kvs.size(), 1u);
    EXPECT_EQ(c.get_prefix("/dlaunch/r/")->kvs[0].lease, *lease);
    ASSERT_TRUE(c.revoke(*lease));
    EXPECT_TRUE(c.get_prefix("/dlaunch/r/")->kvs.empty()) << "revoking a lease removes its keys";
    EXPECT_EQ(*c.keep_alive(*lease), 0) << "a revoked lease is gone";
}

TEST_F(RealEtcd, ALeaseNotKeptAliveExpiresWithItsKeys) {
    Client c = client();
    auto lease = c.grant(2);
    ASSERT_TRUE(lease);
    ASSERT_TRUE(c.put("/dlaunch/r/members/b", "x", *lease));
    bool gone = false;
    for (int i = 0; i < 100 && !gone; ++i, std::this_thread::sleep_for(100ms))
        gone = c.get_prefix("/dlaunch/r/")->kvs.empty();
    EXPECT_TRUE(gone) << "the key outlived its lease's TTL by 8 s";
}

TEST_F(RealEtcd, CreateWritesOnlyTheFirstTime) {
    Client c = client();
    EXPECT_TRUE(*c.create("/dlaunch/r/leader", "node-a"));
    EXPECT_FALSE(*c.create("/dlaunch/r/leader", "node-b"));
    EXPECT_EQ(c.get_prefix("/dlaunch/r/leader")->kvs.at(0).value, "node-a");
}

TEST_F(RealEtcd, PrefixesKeepRunsApart) {
    Client c = client();
    for (const char* k : {"/dlaunch/a/x", "/dlaunch/a/y", "/dlaunch/ab/z", "/dlaunch/b/w"}) ASSERT_TRUE(c.put(k, k));
    auto a = c.get_prefix("/dlaunch/a/");
    ASSERT_TRUE(a);
    ASSERT_EQ(a->kvs.size(), 2u);
    EXPECT_EQ(a->kvs[0].key, "/dlaunch/a/x");
    EXPECT_GT(a->revision, 0);
    EXPECT_TRUE(*c.delete_prefix_unless("/dlaunch/a/", "/dlaunch/a/nodes/"));
    EXPECT_EQ(c.get_prefix("/dlaunch/")->kvs.size(), 2u) << "another run's keys stay";
}

// Membership: every agent of a run holds a lease; etcd expiring it takes the node out.

NodeFacts node(const std::string& id, int nproc = 2) {
    return {id, "10.0.0." + id.substr(1), nproc, "default", 2, 3, "-"};
}

// Waits (bounded) until `run`'s live nodes are `ids`, in that order.
bool nodes_become(Membership& run, const std::vector<std::string>& ids) {
    for (int i = 0; i < 150; ++i, std::this_thread::sleep_for(100ms)) {
        auto live = run.nodes();
        if (!live) continue;
        std::vector<std::string> seen;
        for (auto& n : *live) seen.push_back(n.facts.id);
        if (seen == ids) return true;
    }
    return false;
}

TEST_F(RealEtcd, NodesAreListedInArrivalOrderAndADeadNodesLeaseTakesItOut) {
    Client ca = client(), cb = client();
    Membership a(ca, "job7"), b(cb, "job7");
    ASSERT_TRUE(b.join(node("n2", 1), 5));  // etcd's fsyncs on a loaded machine: not 2 s, its least TTL
    ASSERT_TRUE(a.join(node("n1"), 10));
    auto live = a.nodes();
    ASSERT_TRUE(live);
    ASSERT_EQ(live->size(), 2u);
    EXPECT_EQ((*live)[0].facts, node("n2", 1)) << "arrival order, not names";
    EXPECT_EQ((*live)[1].facts, node("n1"));
    // n2's agent dies (no more keep-alives): its lease ends and it leaves the run; n1 keeps its own alive.
    bool gone = false;
    for (int i = 0; i < 100 && !gone; ++i, std::this_thread::sleep_for(100ms)) {
        ASSERT_TRUE(*a.keep_alive());
        gone = a.nodes()->size() == 1;
    }
    EXPECT_TRUE(gone) << "n2 outlived its lease";
    EXPECT_EQ(a.nodes()->at(0).facts.id, "n1");
    EXPECT_FALSE(*b.keep_alive()) << "n2 learns that the others took it for dead";
}

TEST_F(RealEtcd, ANodeIdIsTakenOnce) {
    Client ca = client(), cb = client();
    Membership a(ca, "job7"), b(cb, "job7");
    ASSERT_TRUE(a.join(node("n1"), 10));
    auto twice = b.join(node("n1"), 10);
    ASSERT_FALSE(twice);
    EXPECT_EQ(twice.error().what, "etcd: node id 'n1' is already in run /dlaunch/job7/");
}

TEST_F(RealEtcd, OneLeaderAtATimeAndTheNextOneTakesOverWhenItLeaves) {
    Client ca = client(), cb = client();
    Membership a(ca, "job7"), b(cb, "job7");
    ASSERT_TRUE(a.join(node("n1"), 10));
    ASSERT_TRUE(b.join(node("n2"), 10));
    EXPECT_EQ(*b.leader(), "") << "nobody leads yet";
    EXPECT_TRUE(*a.lead());
    EXPECT_TRUE(*a.lead()) << "a leader asking again still leads";
    EXPECT_FALSE(*b.lead());
    EXPECT_EQ(*b.leader(), "n1");
    ASSERT_TRUE(a.leave());
    EXPECT_EQ(*b.leader(), "") << "the leader key goes with its lease";
    EXPECT_TRUE(nodes_become(b, {"n2"}));
    EXPECT_TRUE(*b.lead());
}

TEST_F(RealEtcd, AnAttemptIsPublishedOnlyOverTheOneItsWriterRead) {
    Client ca = client(), cb = client();
    Membership a(ca, "job7"), b(cb, "job7");
    auto none = a.attempt();
    ASSERT_TRUE(none);
    EXPECT_FALSE(none->record);
    const AttemptRecord first{0, {node("n1"), node("n2")}, "10.0.0.1", 29500, 29400, 0, {}};
    EXPECT_TRUE(*a.publish(first, none->revision));
    EXPECT_FALSE(*b.publish({0, {node("n2")}, "10.0.0.2", 29500, 29400, 0, {}}, none->revision))
        << "two writers of attempt 0: one wins";
    auto now = b.attempt();
    ASSERT_TRUE(now && now->record);
    EXPECT_EQ(*now->record, first);
    EXPECT_TRUE(*b.publish({1, {node("n2")}, "10.0.0.2", 29500, 29400, 0, {}}, now->revision));
    EXPECT_EQ(a.attempt()->record->attempt, 1);
}

TEST_F(RealEtcd, ARunsKeysAreItsOwnEvenWhenItsIdLooksLikeAnothersPath) {
    Client c = client();
    Membership a(c, "a"), nested(c, "a/nodes");
    ASSERT_TRUE(a.join(node("n1"), 10));
    ASSERT_TRUE(nested.join(node("n9"), 10));
    EXPECT_EQ(a.nodes()->size(), 1u);
    ASSERT_TRUE(a.leave());
    EXPECT_TRUE(*a.clear());
    EXPECT_TRUE(a.nodes()->empty());
    EXPECT_EQ(nested.nodes()->size(), 1u) << "clearing run 'a' left run 'a/nodes' alone";
}

TEST_F(RealEtcd, ARunsKeysGoOnlyOnceNoNodeIsLeftInIt) {
    Client ca = client(), cb = client();
    Membership a(ca, "job7"), b(cb, "job7");
    ASSERT_TRUE(a.join(node("n1"), 10));
    ASSERT_TRUE(*a.publish({0, {node("n1")}, "10.0.0.1", 29500, 29400, 0, {}}, 0));
    ASSERT_TRUE(a.leave());
    ASSERT_TRUE(b.join(node("n2"), 10));  // comes between a's leaving and its clearing
    EXPECT_FALSE(*a.clear()) << "n2 is in the run";
    EXPECT_TRUE(a.attempt()->record) << "the run's attempt stays for n2 to read";
    ASSERT_TRUE(b.leave());
    EXPECT_TRUE(*b.clear());
    EXPECT_TRUE(ca.get_prefix("/dlaunch/job7/")->kvs.empty());
}

TEST(EtcdUnreachable, NothingListeningIsNamedWithWhatToDo) {
    Client c(loopback(free_port()), 2s);
    auto r = c.grant(5);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().what.find("etcd: http://127.0.0.1:"), std::string::npos) << r.error().what;
    EXPECT_NE(r.error().what.find(" is not reachable ("), std::string::npos) << r.error().what;
    EXPECT_EQ(r.error().hint,
              "start etcd there or name a running one; etcd serves clients on port 2379 unless told otherwise");
}

TEST(EtcdUnreachable, APeerThatNeverAnswersEndsTheCallAtTheTimeout) {
    // A listening socket nobody accepts on: the connection is made, no answer ever comes.
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(fd, 4), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    Client c(loopback(ntohs(a.sin_port)), 300ms);
    auto r = c.get_prefix("/");
    ::close(fd);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().what.find("is not reachable (Operation timed out"), std::string::npos) << r.error().what;
}

}  // namespace
}  // namespace dlaunch::etcd
