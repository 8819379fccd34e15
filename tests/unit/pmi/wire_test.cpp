// The PMI wire formats, and the client against a scripted server on a socketpair: what it sends, what it
// takes, and that a server which lies, floods or goes quiet ends it within its bound.
#include "dlaunch/pmi/wire.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "dlaunch/pmi/client.hpp"

namespace dlaunch::pmi {
namespace {

TEST(PmiWire, CommandsAreFormattedAsEachVersionWantsThem) {
    EXPECT_EQ(format(Version::One, "put", {{"kvsname", "kvs_1"}, {"key", "k"}, {"value", "v"}}),
              "cmd=put kvsname=kvs_1 key=k value=v\n");
    EXPECT_EQ(format(Version::Two, "kvs-fence", {}), "    14cmd=kvs-fence;");
}

TEST(PmiWire, RepliesParseIntoFieldsInOrder) {
    auto one = parse(Version::One, "cmd=get_result rc=0 msg=success value=(vector,(0,1,1))");
    ASSERT_TRUE(one) << one.error().message();
    EXPECT_EQ(field(*one, "value"), "(vector,(0,1,1))");
    auto two = parse(Version::Two, "cmd=fullinit-response;pmi-version=2;rank=1;size=2;rc=0;");
    ASSERT_TRUE(two) << two.error().message();
    EXPECT_EQ(two->front().second, "fullinit-response");
    EXPECT_EQ(field(*two, "size"), "2");
    EXPECT_FALSE(field(*two, "absent"));
    EXPECT_FALSE(parse(Version::One, "nonsense"));
    EXPECT_FALSE(parse(Version::One, "key=value"));  // not a command
}

TEST(PmiWire, ValuesAreEncodedSoThatNeitherSeparatorOccurs) {
    const std::string raw = "node-1.example 29500;x=y%";
    const std::string enc = encode_value(raw);
    EXPECT_EQ(enc.find_first_of(" ;="), std::string::npos) << enc;
    auto back = decode_value(enc);
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, raw);
    EXPECT_FALSE(decode_value("%4"));
    EXPECT_FALSE(decode_value("%zz"));
}

TEST(PmiWire, TheProcessMappingGivesEachRanksNodeAndRepeatsWhenShort) {
    auto block = decode_process_mapping("(vector,(0,2,2))", 4);
    ASSERT_TRUE(block) << block.error().message();
    EXPECT_EQ(*block, (std::vector<int>{0, 0, 1, 1}));
    auto wrap = decode_process_mapping("(vector,(0,1,1))", 2);  // Hydra: two ranks on one host
    ASSERT_TRUE(wrap);
    EXPECT_EQ(*wrap, (std::vector<int>{0, 0}));
    auto cyclic = decode_process_mapping("(vector,(0,3,1))", 6);
    ASSERT_TRUE(cyclic);
    EXPECT_EQ(*cyclic, (std::vector<int>{0, 1, 2, 0, 1, 2}));
    auto mixed = decode_process_mapping("(vector,(0,1,3),(1,2,1))", 5);
    ASSERT_TRUE(mixed);
    EXPECT_EQ(*mixed, (std::vector<int>{0, 0, 0, 1, 2}));
    for (const char* bad : {"", "(vector)", "(vector,(0,1))", "(vector,(0,0,2))", "(vector,(0,1,1)", "(block,(0,1,1))"})
        EXPECT_FALSE(decode_process_mapping(bad, 4)) << bad;
}

// A PMI-1 server that answers each command line from a script (empty: no answer at all).
struct ScriptedServer {
    int fds[2] = {-1, -1};
    std::thread thread;
    std::vector<std::string> heard;
    explicit ScriptedServer(std::vector<std::string> answers) {
        ::socketpair(AF_UNIX, SOCK_STREAM, 0, fds);
        thread = std::thread([this, answers] {
            std::string buf;
            for (const auto& answer : answers) {
                while (buf.find('\n') == std::string::npos) {
                    char c[256];
                    ssize_t n = ::read(fds[1], c, sizeof c);
                    if (n <= 0) return;
                    buf.append(c, static_cast<size_t>(n));
                }
                heard.push_back(buf.substr(0, buf.find('\n')));
                buf.erase(0, buf.find('\n') + 1);
                if (!answer.empty()) (void)!::send(fds[1], answer.data(), answer.size(), MSG_NOSIGNAL);
            }
        });
    }
    EnvMap env() const {
        return {{"PMI_FD", std::to_string(fds[0])}, {"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"DLAUNCH_PMI_VERSION", "1"}};
    }
    ~ScriptedServer() {
        ::shutdown(fds[1], SHUT_RDWR);
        thread.join();
        ::close(fds[1]);
    }
};

const std::vector<std::string> kHandshake = {"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n",
                                             "cmd=my_kvsname kvsname=kvs_7 rc=0\n",
                                             "cmd=get_result rc=0 value=(vector,(0,2,1))\n"};

TEST(PmiClient, ReadsTheJobFromTheServerAndItsPlacement) {
    auto answers = kHandshake;
    answers.push_back("cmd=finalize_ack\n");
    ScriptedServer server(answers);
    auto client = Client::connect_if_available(server.env(), 5);
    ASSERT_TRUE(client) << client.error().message();
    ASSERT_TRUE(*client);
    const SchedulerInfo& job = (*client)->job();
    EXPECT_EQ(job.source, "pmi-1");
    EXPECT_EQ(job.job_id, "kvs_7");
    EXPECT_EQ(job.rank, 1);
    EXPECT_EQ(job.size, 2);
    EXPECT_EQ(job.node_rank, 1);  // cyclic over two nodes: rank 1 is the second node's only rank
    EXPECT_EQ(job.nnodes, 2);
    EXPECT_EQ(job.local_rank, 0);
    EXPECT_EQ(job.local_size, 1);
    (*client)->finalize();
    client->reset();
    ASSERT_GE(server.heard.size(), 4u);
    EXPECT_EQ(server.heard[0], "cmd=init pmi_version=1 pmi_subversion=1");
    EXPECT_EQ(server.heard[2], "cmd=get kvsname=kvs_7 key=PMI_process_mapping");
    EXPECT_EQ(server.heard[3], "cmd=finalize");
}

TEST(PmiClient, TheLaunchersOwnVariablesMustAgreeWithItsServer) {
    ScriptedServer server(kHandshake);
    EnvMap env = server.env();
    env["MPI_LOCALRANKID"] = "1";  // the placement makes rank 1 local rank 0
    auto client = Client::connect_if_available(env, 5);
    ASSERT_FALSE(client);
    EXPECT_EQ(client.error().what,
              "job: pmi-1: MPI_LOCALRANKID is 1 but the server's placement ((vector,(0,2,1))) gives 0 for rank 1");
}

TEST(PmiClient, AServerThatSaysTheWrongThingOrNothingEndsItWithinItsBound) {
    {
        ScriptedServer server({"cmd=barrier_out\n"});
        auto client = Client::connect_if_available(server.env(), 5);
        ASSERT_FALSE(client);
        EXPECT_EQ(client.error().what,
                  "job: pmi-1: the server answered 'barrier_out' where 'response_to_init' was due");
    }
    {
        ScriptedServer server({""});
        auto client = Client::connect_if_available(server.env(), 0.2);
        ASSERT_FALSE(client);
        EXPECT_EQ(client.error().what, "job: pmi-1: no 'response_to_init' from the server within 0.2 s");
    }
    {
        ScriptedServer server({std::string(kMaxMessage + 10, 'x')});
        auto client = Client::connect_if_available(server.env(), 5);
        ASSERT_FALSE(client);
        EXPECT_EQ(client.error().what, "job: pmi-1: the server sent an over-long message");
    }
}

TEST(PmiClient, APmiFdThatIsNoSocketIsRefused) {
    auto client = Client::connect_if_available({{"PMI_FD", "0x"}, {"PMI_RANK", "0"}, {"PMI_SIZE", "1"}}, 1);
    ASSERT_FALSE(client);
    EXPECT_EQ(client.error().what, "job: pmi: PMI_FD='0x' is not an open socket of this process");
    EXPECT_FALSE(version_for({{"DLAUNCH_PMI_VERSION", "3"}}));
    EXPECT_EQ(*version_for({{"SLURM_MPI_TYPE", "pmi2"}}), Version::Two);
    EXPECT_EQ(*version_for({}), Version::One);
}

}  // namespace
}  // namespace dlaunch::pmi
