// The group channel's messages and its admission rule, without sockets.
#include "dlaunch/group_protocol.hpp"

#include <gtest/gtest.h>

#include <climits>

namespace dlaunch::group {
namespace {

Message round_trip(const Message& m) {
    const std::string line = encode(m);
    EXPECT_EQ(line.back(), '\n');
    EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line per message";
    auto back = decode(line);
    EXPECT_TRUE(back) << back.error().message();
    return back ? *back : Message{};
}

TEST(GroupProtocol, EveryMessageSurvivesTheWire) {
    EXPECT_EQ(round_trip(Hello{"812", 2, "node3", "MUNGE:abc", 0, ""}),
              Message(Hello{"812", 2, "node3", "MUNGE:abc", 0, ""}));
    EXPECT_EQ(round_trip(Refused{"wrong run"}), Message(Refused{"wrong run"}));
    EXPECT_EQ(round_trip(Beat{1, 4}), Message(Beat{1, 4}));
    EXPECT_EQ(round_trip(Stop{2, "rank 3 on node2: exit code 5"}), Message(Stop{2, "rank 3 on node2: exit code 5"}));
    EXPECT_EQ(round_trip(Leaving{15}), Message(Leaving{15}));
    EXPECT_EQ(round_trip(Failing{1, 2, "rank 3 on node2: exit code 5"}),
              Message(Failing{1, 2, "rank 3 on node2: exit code 5"}));
    Ended ended{1, 0, MemberEnd::Failed, {}, {}};
    FailureRecord f;
    f.rank = 3;
    f.node_rank = 1;
    f.host = "node2";
    f.failure = {0, {3, 103, {false, 5}, 10}, true, false};
    ended.failures.push_back(f);
    EXPECT_EQ(round_trip(ended), Message(ended));
    ended.next_health = "";  // passed: said, not absent
    EXPECT_EQ(round_trip(ended), Message(ended));
    ended.next_health = "the log directory /logs is not writable";
    EXPECT_EQ(round_trip(ended), Message(ended));
    EXPECT_EQ(encode(Ended{1, 0, MemberEnd::Failed, {}, {}}).find("health"), std::string::npos);
    Decided decided{0, {}};
    decided.decision.kind = GroupDecision::Kind::Restart;
    decided.decision.restarts_used = 1;
    decided.decision.next_members = {0, 2, 3};
    decided.decision.next_world_size = 6;
    decided.decision.replaced = {{1, 3}};
    decided.decision.wait_seconds = 2.5;
    decided.decision.summary = "node4 replaces node2";
    decided.decision.cause = "rank 3 on node2: exit code 5";
    EXPECT_EQ(round_trip(decided), Message(decided));
    decided.decision.kind = GroupDecision::Kind::MeetAgain;
    decided.decision.left_behind = {1};  // the nodes meet again in the store without node 1
    EXPECT_EQ(round_trip(decided), Message(decided));
    EXPECT_EQ(round_trip(Health{2, 1, "gpus: GPU 0: 3 uncorrected ECC errors"}),
              Message(Health{2, 1, "gpus: GPU 0: 3 uncorrected ECC errors"}));
    EXPECT_EQ(round_trip(Health{2, 1, ""}), Message(Health{2, 1, ""}));
    const Gate gate{1, {0, 2}, {{1, "node2", "site check `x`: exit code 1"}}};
    EXPECT_EQ(round_trip(gate), Message(gate));
    const DoctorReport doctor{2, "node3", 1764111111.25, true, R"({"checks":[],"host":"node3","ready":true})"};
    EXPECT_EQ(round_trip(doctor), Message(doctor));
}

TEST(GroupProtocol, ForeignOrBrokenLinesAreRefusedWithAReason) {
    auto junk = decode("GET / HTTP/1.1\r\n");
    ASSERT_FALSE(junk);
    EXPECT_EQ(junk.error().what, "group: a message from another agent is not JSON");
    auto old = decode(R"({"v":2,"type":"beat","member":1,"attempt":0})");
    ASSERT_FALSE(old);
    EXPECT_NE(old.error().describe().find("run the same dlaunch version on every node"), std::string::npos);
    auto partial = decode(R"({"v":6,"type":"beat","member":1})");
    ASSERT_FALSE(partial);
    EXPECT_NE(partial.error().what.find("is malformed"), std::string::npos) << partial.error().what;
    EXPECT_FALSE(decode(R"({"v":6,"type":"ended","member":1,"attempt":0,"end":"exploded","failures":[]})"));
    // A version that is no number is another version, not an exception (a stranger's line reaches decode()).
    for (const char* v : {R"("5")", "null", "[]", "5.5", "{}"}) {
        auto odd = decode(std::string(R"({"type":"hello","v":)") + v + "}", From::Stranger);
        ASSERT_FALSE(odd) << v;
        EXPECT_NE(odd.error().what.find("has protocol version"), std::string::npos) << odd.error().what;
    }
    auto none = decode(R"({"type":"beat","member":1,"attempt":0})");
    ASSERT_FALSE(none);
    EXPECT_NE(none.error().what.find("has protocol version none, not " + std::to_string(kProtocolVersion)),
              std::string::npos)
        << none.error().what;
    // A number an int does not hold is malformed, not converted (a float's conversion is undefined, an unsigned
    // one wraps: 4294967297 read as 1).
    for (const char* member : {"1e300", "1.5", "4294967297", "-2147483649", R"("1")"}) {
        auto odd = decode(std::string(R"({"v":6,"type":"beat","attempt":0,"member":)") + member + "}");
        ASSERT_FALSE(odd) << member;
        EXPECT_NE(odd.error().what.find("is malformed"), std::string::npos) << odd.error().what;
    }
    EXPECT_FALSE(decode(R"({"v":6,"type":"gate","attempt":1,"left_out":[],"members":[[0,4294967297]]})"));
    EXPECT_FALSE(decode(R"({"v":6,"type":"gate","attempt":1,"left_out":[],"members":[1e300]})"));
    auto edge = decode(R"({"v":6,"type":"beat","attempt":0,"member":-2147483648})");
    ASSERT_TRUE(edge) << edge.error().what;
    EXPECT_EQ(std::get<Beat>(*edge).member, INT_MIN);
}

// A gate or a decision goes to every node: its lists are runs, so its size grows with the nodes missing, not
// with the group (docs/scale.md).
TEST(GroupProtocol, NodeListsTravelAsRunsOfIds) {
    std::vector<int> thousand(1024);
    for (int i = 0; i < 1024; ++i) thousand[static_cast<size_t>(i)] = i;
    const std::string whole = encode(Gate{3, thousand, {}});
    EXPECT_NE(whole.find(R"("members":[[0,1023]])"), std::string::npos) << whole;
    EXPECT_LT(whole.size(), 100u);
    thousand.erase(thousand.begin() + 513);
    EXPECT_EQ(round_trip(Gate{3, thousand, {}}), Message(Gate{3, thousand, {}}));
    const Gate holes{1, {0, 1, 2, 3, 5, 7, 8, 4}, {}};  // order is kept: a run only rises by one
    const std::string line = encode(holes);
    EXPECT_NE(line.find(R"("members":[[0,3],5,[7,8],4])"), std::string::npos) << line;
    EXPECT_EQ(round_trip(holes), Message(holes));
    Decided decided{2, {}};
    decided.decision.kind = GroupDecision::Kind::MeetAgain;
    decided.decision.next_members = {0, 1, 2};
    decided.decision.left_behind = {4, 5, 6, 9};
    const std::string said = encode(decided);
    EXPECT_NE(said.find(R"("left_behind":[[4,6],9])"), std::string::npos) << said;
    EXPECT_EQ(round_trip(decided), Message(decided));
    // Ids that are no node rank go alone, and come back as they went.
    const Gate odd{1, {-2, -1, 0, 1, 1048575, 1048576, 2147483646, 2147483647}, {}};
    EXPECT_NE(encode(odd).find(R"("members":[-2,-1,[0,1],1048575,1048576,2147483646,2147483647])"), std::string::npos)
        << encode(odd);
    EXPECT_EQ(round_trip(odd), Message(odd));
}

TEST(GroupProtocol, MalformedOrHugeRunsAreRefused) {
    for (const char* members :
         {"5", "[[3,1]]", "[[-1,2]]", "[[1,2,3]]", "[[1]]", R"(["a"])", "[[0,2000000000]]", "[[0,600000],[0,600000]]",
          "[[2147483647,2147483647]]", "[[1048576,1048577]]", "[[-5,-1]]", "[[0,1048575],7]", "[7,[0,1048575]]"}) {
        auto gate = decode(std::string(R"({"v":6,"type":"gate","attempt":1,"left_out":[],"members":)") + members + "}");
        ASSERT_FALSE(gate) << members;
        EXPECT_NE(gate.error().what.find("is malformed"), std::string::npos) << members << ": " << gate.error().what;
    }
    auto most = decode(R"({"v":6,"type":"gate","attempt":1,"left_out":[],"members":[[0,1048575]]})");
    ASSERT_TRUE(most) << most.error().what;
    EXPECT_EQ(std::get<Gate>(*most).members.size(), kMaxListed);
}

// A connection that has not said hello yet: its line is refused unless it is a hello, before anything it
// names (a run of a million ids) is built.
TEST(GroupProtocol, AFirstLineIsReadOnlyAsAHello) {
    const std::string gate = R"({"v":6,"type":"gate","attempt":0,"left_out":[],"members":[[0,1048575]]})";
    ASSERT_TRUE(decode(gate));
    auto first = decode(gate, From::Stranger);
    ASSERT_FALSE(first);
    EXPECT_EQ(first.error().what, "the first message is not a hello");
    const Hello hello{"812", 1, "node2", "cred", 0, "nonce"};
    auto said = decode(encode(hello), From::Stranger);
    ASSERT_TRUE(said) << said.error().what;
    EXPECT_EQ(*said, Message(hello));
}

// Each side says its own messages only: a member's gate (a run of a million ids) or a leader's hello is
// refused before it is built.
TEST(GroupProtocol, EachSideMaySayOnlyItsOwnMessages) {
    const std::string gate = R"({"v":6,"type":"gate","attempt":0,"left_out":[],"members":[[0,1048575]]})";
    auto from_member = decode(gate, From::Member);
    ASSERT_FALSE(from_member);
    EXPECT_EQ(from_member.error().what, R"(a member does not send "gate")");
    EXPECT_TRUE(decode(gate, From::Leader));
    EXPECT_TRUE(decode(encode(Beat{1, 0}), From::Member));
    EXPECT_TRUE(decode(encode(Beat{1, 0}), From::Leader));
    EXPECT_TRUE(decode(encode(Health{1, 0, ""}), From::Member));
    auto hello = decode(encode(Hello{"812", 1, "node2", "cred", 0, "n"}), From::Leader);
    ASSERT_FALSE(hello);
    EXPECT_EQ(hello.error().what, R"(the leader does not send "hello")");
    auto untyped = decode(R"({"v":6})", From::Member);
    ASSERT_FALSE(untyped);
    EXPECT_EQ(untyped.error().what, "a member does not send a message without a type");
}

TEST(GroupProtocol, OnlyTheJobsUserWithThisRunsCredentialJoins) {
    const Hello hello{"812", 1, "node2", "cred", 0, ""};
    // Only the job's own user has proved itself: only it is told why (a stranger learns nothing of the group).
    EXPECT_TRUE(admission(Hello{"813", 1, "node2", "c", 0, ""}, {1000, "813"}, 1000, "812", 3).proved);
    EXPECT_FALSE(admission(hello, {1001, "812"}, 1000, "812", 3).proved);
    EXPECT_EQ(refusal(hello, {1000, "812"}, 1000, "812", 3), "");
    EXPECT_EQ(refusal(hello, {1001, "812"}, 1000, "812", 3), "the credential is of uid 1001, not the job's (1000)");
    EXPECT_EQ(refusal(hello, {1000, "813"}, 1000, "812", 3), "the credential was made for another run");
    EXPECT_EQ(refusal(Hello{"813", 1, "node2", "c", 0, ""}, {1000, "813"}, 1000, "812", 3),
              "run '813' is not this group's ('812')");
    EXPECT_EQ(refusal(Hello{"812", 3, "node4", "c", 0, ""}, {1000, "812"}, 1000, "812", 3),
              "member 3 is not one of the group's 2 members (1..2)");
    EXPECT_EQ(refusal(Hello{"812", 0, "node1", "c", 0, ""}, {1000, "812"}, 1000, "812", 3),
              "member 0 is not one of the group's 2 members (1..2)")
        << "member 0 is the leader itself";
    EXPECT_EQ(refusal(Hello{"812", 1, "node2", "c", 3, ""}, {1000, "812"}, 1000, "812", 3, 2),
              "member 1 starts with attempt 3, the leader with attempt 2: the nodes read different ledgers; is "
              "--log-dir on a file system every node shares?");
}

}  // namespace
}  // namespace dlaunch::group
