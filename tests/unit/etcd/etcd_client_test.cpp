// The etcd client against a real etcd (Debian's etcd-server), started by the test on loopback ports.
// A missing etcd fails these tests: packaging/debian-deps.sh installs it.
#include "dlaunch/etcd_client.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

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
    EXPECT_EQ(*c.delete_prefix("/dlaunch/a/"), 2);
    EXPECT_EQ(c.get_prefix("/dlaunch/")->kvs.size(), 2u) << "another run's keys stay";
}

TEST(EtcdUnreachable, NothingListeningIsNamedWithWhatToDo) {
    Client c(loopback(free_port()), 2s);
    auto r = c.grant(5);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().what.find("etcd: http://127.0.0.1:"), std::string::npos) << r.error().what;
    EXPECT_NE(r.error().what.find(" is not reachable ("), std::string::npos) << r.error().what;
    EXPECT_NE(r.error().hint.find("--rdzv-endpoint"), std::string::npos);
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
