#include "dlaunch/rdzv_auth.hpp"

#include <gtest/gtest.h>

#include "dlaunch/node_rendezvous.hpp"

namespace dlaunch {
namespace {

TEST(RdzvAuth, AProofHoldsOnlyForItsSecretNonceAndText) {
    const std::string p = *rdzv_auth::proof("s3cret", "n1", "hello");
    EXPECT_EQ(p.size(), 64u);
    EXPECT_EQ(rdzv_auth::check("s3cret", "n1", "hello", p), "");
    EXPECT_NE(rdzv_auth::check("other", "n1", "hello", p).find("wrong secret"), std::string::npos);
    EXPECT_NE(rdzv_auth::check("s3cret", "n2", "hello", p), "") << "a replay to another nonce must fail";
    EXPECT_NE(rdzv_auth::check("s3cret", "n1", "hellO", p), "");
}

TEST(RdzvAuth, BothSidesMustHaveASecretOrNeither) {
    EXPECT_EQ(*rdzv_auth::proof("", "n", "t"), "-");
    EXPECT_EQ(rdzv_auth::check("", "n", "t", "-"), "");
    EXPECT_NE(rdzv_auth::check("s", "n", "t", "-").find("the other side has no secret"), std::string::npos);
    EXPECT_NE(rdzv_auth::check("", "n", "t", *rdzv_auth::proof("s", "n", "t")).find("this one none"),
              std::string::npos);
}

TEST(RdzvAuth, TheHostsAnswerIsTakenOnlyWithTheRunsSecretForThisJoinersNonce) {
    Met m;
    m.assignment = {2, 1, "10.0.0.1", 45000, {"10.0.0.1", "10.0.0.2"}, 0, {{2, "default"}, {2, "default"}}};
    const NodeAssignment& a = m.assignment;
    const auto s3cret = rdzv_auth::with_secret("s3cret");
    const std::string line = encode_assignment(m, s3cret, "joiner-nonce").value();
    auto r = decode_reply(line, s3cret, "joiner-nonce");
    ASSERT_TRUE(r.ok()) << r.error().message();
    EXPECT_EQ(r->assignment.node_addrs, a.node_addrs);
    auto replayed = decode_reply(line, s3cret, "another-joiner");
    ASSERT_FALSE(replayed.ok());
    EXPECT_NE(replayed.error().what.find("does not prove the run's secret"), std::string::npos);
    EXPECT_FALSE(decode_reply(line, rdzv_auth::with_secret("other"), "joiner-nonce").ok());
}

// Every node's worker count and role travel as runs: the answer to each of N nodes does not grow with N for
// them (only the addresses do).
TEST(RdzvAuth, TheHostsAnswerNamesEqualSharesOnceAndMixedOnesInTheirOrder) {
    const auto anyone = rdzv_auth::with_secret("");
    Met m;
    NodeAssignment& a = m.assignment;
    a = {1024,
         3,
         "10.0.0.1",
         45000,
         std::vector<std::string>(1024, "10.0.0.9"),
         0,
         std::vector<NodeShare>(1024, NodeShare{8, "default"})};
    const std::string line = encode_assignment(m, anyone, "-").value();
    EXPECT_NE(line.find(" 8*1024 64656661756c74*1024 "), std::string::npos) << line.substr(line.size() - 80);
    auto back = decode_reply(line, anyone, "-");
    ASSERT_TRUE(back.ok()) << back.error().message();
    EXPECT_TRUE(back->assignment.shares.empty()) << "one share for every node: no list of 1,024 is made";
    EXPECT_EQ(back->assignment.every_share, (NodeShare{8, "default"}));
    EXPECT_EQ(own_share(*back), (NodeShare{8, "default"})) << "what it tells when it meets the others again";
    a = {4, 2, "10.0.0.1", 45000, {"a", "b", "c", "d"}, 0, {{2, "x y"}, {2, "x y"}, {1, ""}, {2, "x y"}}};
    back = decode_reply(encode_assignment(m, anyone, "-").value(), anyone, "-");
    ASSERT_TRUE(back.ok()) << back.error().message();
    EXPECT_EQ(back->assignment.shares, a.shares);
    EXPECT_FALSE(back->assignment.every_share);
    EXPECT_EQ(own_share(*back), (NodeShare{1, ""})) << "node 2's";
    // Runs of none, too many, not a number, too few, too many in all; roles for fewer nodes than counts; runs not
    // as runs_text() writes them (a count of 1, a leading zero, an empty word); a word too long to repeat.
    const std::string long_role = std::string(256, 'a') + "*4";
    for (const std::string& runs :
         std::vector<std::string>{"2*0 61*4", "2*5 61*4", "2*x 61*4", "2*3 61*4", "2*2,2*3 61*4", "2*4 78*3",
                                  "2*1,2*3 61*4", "2*04 61*4", "2*4 61,,61,61", "2*4 *4", "2*4 " + long_role}) {
        const std::string said = "ok 1 4 10.0.0.1 45000 a,b,c,d " + runs + " 0 0 0 -\n";
        EXPECT_FALSE(decode_reply(said, anyone, "-").ok()) << said;
    }
    EXPECT_TRUE(decode_reply("ok 1 4 10.0.0.1 45000 a,b,c,d 2*3,1 61*4 0 0 0 -\n", anyone, "-").ok());
    for (const std::string& runs :  // one run each: a count of none or too many, a role word not in hex
         std::vector<std::string>{"0*4 61*4", "100000*4 61*4", "2*4 zz*4"})
        EXPECT_FALSE(decode_reply("ok 1 4 10.0.0.1 45000 a,b,c,d " + runs + " 0 0 0 -\n", anyone, "-").ok()) << runs;
    // With a secret the proof covers the text as it was sent: the same shares written otherwise are refused.
    const auto s3cret = rdzv_auth::with_secret("s3cret");
    a = {4, 2, "10.0.0.1", 45000, {"a", "b", "c", "d"}, 0, std::vector<NodeShare>(4, NodeShare{2, "x"})};
    const std::string proved = encode_assignment(m, s3cret, "-").value();
    ASSERT_TRUE(decode_reply(proved, s3cret, "-").ok());
    std::string spelled = proved;
    spelled.replace(spelled.find(" 2*4 "), 5, " 2,2,2,2 ");
    auto refused = decode_reply(spelled, s3cret, "-");
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().what.find("does not prove"), std::string::npos) << refused.error().what;
}

// The host writes and hashes what every node is told alike once; each node's answer still proves all of it.
TEST(RdzvAuth, EachNodesAnswerIsItsOwnAndProvesTheWordsEveryNodeIsToldAlike) {
    const auto s3cret = rdzv_auth::with_secret("s3cret");
    Met m;
    m.attempt = 2;
    m.assignment = {
        3, 0, "10.0.0.1", 45000, {"10.0.0.1", "10.0.0.2", "10.0.0.3"}, 29500, {{2, "a"}, {2, "a"}, {4, "b"}}};
    const Answers answers(m, true);
    for (int rank = 0; rank < 3; ++rank) {
        m.assignment.node_rank = rank;
        const std::string line = answers.line(rank, s3cret, "nonce" + std::to_string(rank)).value();
        EXPECT_EQ(line, encode_assignment(m, s3cret, "nonce" + std::to_string(rank)).value());
        auto back = decode_reply(line, s3cret, "nonce" + std::to_string(rank));
        ASSERT_TRUE(back.ok()) << back.error().message();
        EXPECT_EQ(back->assignment.node_rank, rank);
        EXPECT_EQ(back->assignment.node_addrs, m.assignment.node_addrs);
        EXPECT_EQ(back->attempt, 2);
        EXPECT_EQ(back->assignment.shares, m.assignment.shares);
        ASSERT_NE(line.find(" 2*2,4 61*2,62 "), std::string::npos) << line;
        for (const auto& [from, to] :
             std::vector<std::pair<std::string, std::string>>{{"10.0.0.2,", "10.6.6.6,"},
                                                              {"ok " + std::to_string(rank), "ok 9"},
                                                              {" 29500 ", " 29501 "},
                                                              {" 2*2,4 ", " 2,4*2 "},
                                                              {",62 ", ",61 "}}) {
            std::string forged = line;
            forged.replace(forged.find(from), from.size(), to);
            auto refused = decode_reply(forged, s3cret, "nonce" + std::to_string(rank));
            ASSERT_FALSE(refused.ok()) << forged;
            EXPECT_NE(refused.error().what.find("does not prove"), std::string::npos) << refused.error().what;
        }
    }
}

// Under torchrun's contract no worker is told another node's address: the host tells none, and a node knows
// node 0's (the master's) and its own. The answer to each of N nodes then does not grow with N.
TEST(RdzvAuth, WithoutEveryAddressANodeKnowsNodeZerosAndItsOwn) {
    const auto s3cret = rdzv_auth::with_secret("s3cret");
    Met m;
    m.assignment = {1024,
                    0,
                    "10.0.0.1",
                    45000,
                    std::vector<std::string>(1024, "10.0.0.9"),
                    29500,
                    std::vector<NodeShare>(1024, NodeShare{8, "default"})};
    const Answers answers(m, false);
    const std::string line = answers.line(7, s3cret, "nonce").value();
    EXPECT_LT(line.size(), 300U) << line;
    EXPECT_EQ(line.find("10.0.0.9"), std::string::npos) << line;
    auto back = decode_reply(line, s3cret, "nonce");
    ASSERT_TRUE(back.ok()) << back.error().message();
    NodeAssignment& a = back->assignment;
    EXPECT_TRUE(a.node_addrs.empty()) << "the joiner fills them (own_addresses)";
    ASSERT_TRUE(own_addresses(a, "10.0.0.8", false).ok());
    ASSERT_EQ(a.node_addrs.size(), 1024U);
    EXPECT_EQ(a.node_addrs[0], "10.0.0.1");
    EXPECT_EQ(a.node_addrs[7], "10.0.0.8");
    EXPECT_EQ(a.node_addrs[1], "");
    EXPECT_TRUE(a.shares.empty());
    EXPECT_EQ(back->assignment.every_share, (NodeShare{8, "default"}));
    // The words told alike are proved as "-": an answer with a list put in its place is refused.
    std::string forged = line;
    forged.replace(forged.find(" - "), 3, " 10.0.0.1,10.0.0.6 ");
    EXPECT_FALSE(decode_reply(forged, s3cret, "nonce").ok());
    // A list once told is kept; a node whose workers are given every address (Paddle) and was not told them
    // says so rather than naming nodes "".
    NodeAssignment told = m.assignment;
    ASSERT_TRUE(own_addresses(told, "10.0.0.8", true).ok());
    EXPECT_EQ(told.node_addrs, m.assignment.node_addrs);
    back = decode_reply(line, s3cret, "nonce");
    auto refused = own_addresses(back->assignment, "10.0.0.8", true);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().what.find("did not tell every node's address"), std::string::npos)
        << refused.error().what;
    EXPECT_NE(refused.error().hint.find("same dlaunch version"), std::string::npos);
}

// The lists a node makes from an answer have its number of nodes: a number past kMaxNodes is refused before any
// list is made (without a secret anyone at the host's port may answer).
TEST(RdzvAuth, AnAnswerNamingMoreNodesThanARunMayHaveIsRefusedBeforeItsListsAreMade) {
    const auto anyone = rdzv_auth::with_secret("");
    const std::string huge = std::to_string(kMaxNodes + 1);
    auto refused =
        decode_reply("ok 1 " + huge + " 10.0.0.1 45000 - 8*" + huge + " 61*" + huge + " 0 0 0 -\n", anyone, "-");
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().what.find("more than a run may have (65536)"), std::string::npos) << refused.error().what;
    const std::string most = std::to_string(kMaxNodes);
    EXPECT_TRUE(
        decode_reply("ok 1 " + most + " 10.0.0.1 45000 - 8*" + most + " 61*" + most + " 0 0 0 -\n", anyone, "-").ok());
}

TEST(RdzvAuth, TheHostTellsEveryAddressOnlyWhereTheWorkersEnvironmentNamesEveryNode) {
    LaunchRequest r;
    EXPECT_FALSE(tell_addresses(r));
    r.env_contract = EnvContract::Paddle;
    EXPECT_TRUE(tell_addresses(r));
    r.env_contract = EnvContract::All;
    EXPECT_TRUE(tell_addresses(r));
}

TEST(RdzvAuth, AWordToWaitIsTakenOnlyFromTheHostWithTheRunsSecret) {
    const auto s3cret = rdzv_auth::with_secret("s3cret");
    const std::string wait = encode_wait(s3cret, "joiner-nonce", 1).value();
    int last = 0;
    auto ok = decode_wait(wait, s3cret, "joiner-nonce", last);
    ASSERT_TRUE(ok.ok()) << ok.error().message();
    EXPECT_TRUE(*ok);
    EXPECT_EQ(last, 1);
    auto replayed = decode_wait(wait, s3cret, "joiner-nonce", last);
    ASSERT_FALSE(replayed.ok()) << "a recorded wait line cannot hold the node for ever";
    EXPECT_NE(replayed.error().what.find("said again"), std::string::npos) << replayed.error().what;
    EXPECT_TRUE(decode_wait(encode_wait(s3cret, "joiner-nonce", 2).value(), s3cret, "joiner-nonce", last).ok());
    last = 0;
    EXPECT_FALSE(decode_wait(wait, s3cret, "another-joiner", last).ok()) << "bound to the joiner's nonce";
    EXPECT_FALSE(decode_wait(wait, rdzv_auth::with_secret("other"), "joiner-nonce", last).ok());
    EXPECT_FALSE(decode_wait("wait 3\n", s3cret, "joiner-nonce", last).ok()) << "no proof";
    auto answer = decode_wait("ok 1 2 ...\n", s3cret, "joiner-nonce", last);
    ASSERT_TRUE(answer.ok());
    EXPECT_FALSE(*answer) << "not a wait line: the answer";
}

TEST(RdzvAuth, ProofsAndDigestsAreHmacSha256AndSha256OfTheNonceANewlineAndTheText) {
    // Pinned to what `printf 'n1\nhello' | openssl dgst -sha256 [-hmac 0123456789abcdef]` prints: the wire
    // format does not depend on which library computes it.
    EXPECT_EQ(*rdzv_auth::proof("0123456789abcdef", "n1", "hello"),
              "db99d599cfae74cd5f95330cf7a888c81eaf99ccf3f4f1cbf6e738d4011a61ec");
    EXPECT_EQ(*rdzv_auth::digest("n1", "hello"), "bd3c00801e8744740fa930c1be265c9739497cb515510bc8c2a86af69898adaa");
}

TEST(RdzvAuth, TheDigestOfAProofMadeElsewhereIsBoundToTheNonceAndTheText) {
    const std::string d = *rdzv_auth::digest("n1", "hello");
    EXPECT_EQ(d.size(), 64U);
    EXPECT_EQ(d, *rdzv_auth::digest("n1", "hello"));
    EXPECT_NE(d, *rdzv_auth::digest("n2", "hello"));
    EXPECT_NE(d, *rdzv_auth::digest("n1", "hellO"));
    EXPECT_TRUE(rdzv_auth::with_secret("").anonymous);
    EXPECT_FALSE(rdzv_auth::with_secret("s3cret").anonymous);
}

TEST(RdzvAuth, TheHelloCarriesItsNonceAndProof) {
    JoinHello h{"job", "env=0", -1, "10.0.0.2", NodeShare{2, "default"}, "abc", "def"};
    auto back = decode_hello(encode_hello(h));
    ASSERT_TRUE(back.ok()) << back.error().message();
    EXPECT_EQ(*back, h);
    EXPECT_EQ(hello_text(h).find(" def"), std::string::npos) << "the proof does not cover itself";
    EXPECT_EQ(*decode_challenge(encode_challenge("n0nce")), "n0nce");
    EXPECT_FALSE(decode_challenge("SSH-2.0-OpenSSH_9.2\r\n").ok());
}

TEST(RdzvAuth, ASecretTooShortToProtectAnythingIsRefused) {
    EXPECT_TRUE(rdzv_auth::check_secret("").ok()) << "none: the rendezvous warns instead";
    EXPECT_TRUE(rdzv_auth::check_secret(std::string(16, 'x')).ok());
    auto short_one = rdzv_auth::check_secret("hunter2");
    ASSERT_FALSE(short_one.ok());
    EXPECT_EQ(short_one.error().what, "DLAUNCH_RDZV_SECRET has 7 characters; use at least 16");
    EXPECT_NE(short_one.error().hint.find("openssl rand -hex 16"), std::string::npos);
}

}  // namespace
}  // namespace dlaunch
