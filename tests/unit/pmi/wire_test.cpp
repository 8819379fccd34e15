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

// A PMI server that answers each message it reads (the client sends one, then waits) from a script (an
// empty answer: none at all). What it heard is kept without PMI-1's '\n'.
struct ScriptedServer {
    int fds[2] = {-1, -1};
    std::thread thread;
    std::vector<std::string> heard;
    std::string version = "1";
    explicit ScriptedServer(std::vector<std::string> answers, std::string v = "1") : version(std::move(v)) {
        ::socketpair(AF_UNIX, SOCK_STREAM, 0, fds);
        thread = std::thread([this, answers] {
            for (const auto& answer : answers) {
                char c[4096];
                ssize_t n = ::read(fds[1], c, sizeof c);
                if (n <= 0) return;
                std::string got(c, static_cast<size_t>(n));
                if (!got.empty() && got.back() == '\n') got.pop_back();
                heard.push_back(got);
                if (!answer.empty()) (void)!::send(fds[1], answer.data(), answer.size(), MSG_NOSIGNAL);
            }
        });
    }
    EnvMap env() const {
        return {
            {"PMI_FD", std::to_string(fds[0])}, {"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"DLAUNCH_PMI_VERSION", version}};
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

TEST(PmiClient, PmiTwoIsAskedForInPmiOnesWordsAndRefusedWhenTheServerDoesNotSpeakIt) {
    {
        ScriptedServer server({"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n",
                               format(Version::Two, "fullinit-response", {{"rc", "0"}, {"rank", "1"}, {"size", "2"}}),
                               format(Version::Two, "job-getid-response", {{"rc", "0"}, {"jobid", "7.0"}}),
                               format(Version::Two, "info-getjobattr-response",
                                      {{"rc", "0"}, {"found", "TRUE"}, {"value", "(vector,(0,1,2))"}}),
                               format(Version::Two, "finalize-response", {{"rc", "0"}})},
                              "2");
        auto client = Client::connect_if_available(server.env(), 5);
        ASSERT_TRUE(client) << client.error().message();
        EXPECT_EQ((*client)->job().source, "pmi-2");
        EXPECT_EQ((*client)->job().job_id, "7.0");
        EXPECT_EQ((*client)->job().local_rank, 1);
        (*client)->finalize();
        client->reset();
        ASSERT_GE(server.heard.size(), 2u);
        EXPECT_EQ(server.heard[0], "cmd=init pmi_version=2 pmi_subversion=0");
        EXPECT_EQ(server.heard[1], "    38cmd=fullinit;pmirank=1;threaded=FALSE;");  // no empty pmijobid
    }
    {
        ScriptedServer server({"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"}, "2");
        auto client = Client::connect_if_available(server.env(), 5);
        ASSERT_FALSE(client);
        EXPECT_EQ(client.error().what, "job: pmi-2: the server does not speak PMI-2 (it answered pmi_version=1)");
    }
    {
        ScriptedServer server({"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n", "999999cmd=x;"}, "2");
        auto client = Client::connect_if_available(server.env(), 5);
        ASSERT_FALSE(client);
        EXPECT_EQ(client.error().what, "job: pmi-2: the server sent a bad length header '999999'");
    }
}

TEST(PmiWire, AMappingThatWouldCoverMoreRanksThanTheJobEndsWhenTheJobIsCovered) {
    auto huge = decode_process_mapping("(vector,(0,1048576,1048576))", 3);
    ASSERT_TRUE(huge) << huge.error().message();
    EXPECT_EQ(*huge, (std::vector<int>{0, 0, 0}));
    EXPECT_FALSE(decode_process_mapping("(vector,(0,2147483647,1))", 3));
    EXPECT_FALSE(decode_process_mapping("(vector,(0,1,1))", kMaxRanks + 1));
    EXPECT_EQ(printable(std::string("a\x01") + "b"), "a\\x01b");
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
