// etcd's JSON gateway as dlaunch spells it: endpoints, requests and answers, no etcd needed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dlaunch/etcd_client.hpp"
#include "dlaunch/etcd_membership.hpp"

namespace dlaunch::etcd {
namespace {

using Json = nlohmann::json;

TEST(EtcdEndpoint, HostPortOrUrlWithEtcdsClientPortByDefault) {
    auto plain = parse_endpoint("10.0.0.1");
    ASSERT_TRUE(plain);
    EXPECT_EQ(plain->url(), "http://10.0.0.1:2379");
    auto port = parse_endpoint("etcd.example:12379");
    ASSERT_TRUE(port);
    EXPECT_EQ(port->url(), "http://etcd.example:12379");
    auto tls = parse_endpoint("https://etcd.example/");
    ASSERT_TRUE(tls);
    EXPECT_EQ(tls->url(), "https://etcd.example:2379");
    for (const char* bad : {"", "ftp://h:1", "h:", "h:99999", "h:12a", "http://", "http://u@h:1", "h/x:1"}) {
        auto e = parse_endpoint(bad);
        ASSERT_FALSE(e) << bad;
        EXPECT_NE(e.error().what.find("is not HOST[:PORT] nor http(s)://HOST[:PORT]"), std::string::npos) << bad;
        EXPECT_NE(e.error().hint.find("--rdzv-endpoint"), std::string::npos);
    }
}

TEST(EtcdJson, KeysAndValuesAreBase64AndBinarySafe) {
    const std::string key("/dlaunch/run\0\xff", 14);
    Json put = Json::parse(json::put(key, "v", 42));
    EXPECT_EQ(put["key"], "L2RsYXVuY2gvcnVuAP8=");
    EXPECT_EQ(put["value"], "dg==");
    EXPECT_EQ(put["lease"], "42") << "64-bit integers travel as strings";
    EXPECT_FALSE(Json::parse(json::put("k", "v", 0)).contains("lease"));
    auto back = json::range(R"({"header":{"revision":"7"},"kvs":[{"key":"L2RsYXVuY2gvcnVuAP8=","value":"dg==",
                               "create_revision":"5","mod_revision":"6","lease":"42"}],"count":"1"})");
    ASSERT_TRUE(back);
    EXPECT_EQ(back->revision, 7);
    ASSERT_EQ(back->kvs.size(), 1u);
    EXPECT_EQ(back->kvs[0].key, key);
    EXPECT_EQ(back->kvs[0].value, "v");
    EXPECT_EQ(back->kvs[0].create_revision, 5);
    EXPECT_EQ(back->kvs[0].lease, 42);
    EXPECT_TRUE(json::range(R"({"header":{"revision":"3"}})")->kvs.empty()) << "no kvs: the gateway leaves them out";
    EXPECT_FALSE(json::range(R"({"kvs":[{"key":"not base64!"}]})"));
    // Unpadded, padding inside, whitespace, three '=', leftover bits not zero.
    for (const char* bad : {"dg=", "dg=a", "d g=", "dg==dg==", "====", "A===", "QUJDA===", "dh=="})
        EXPECT_FALSE(json::range(std::string(R"({"kvs":[{"key":")") + bad + R"("}]})")) << bad;
    EXPECT_EQ(json::range(R"({"kvs":[{"key":"","value":"YWJj"}]})")->kvs.at(0).value, "abc") << "no padding needed";
}

TEST(EtcdJson, APrefixReadEndsAtThePrefixsNextKey) {
    Json r = Json::parse(json::range_prefix("/dlaunch/a/"));
    EXPECT_EQ(r["key"], "L2RsYXVuY2gvYS8=");        // "/dlaunch/a/"
    EXPECT_EQ(r["range_end"], "L2RsYXVuY2gvYTA=");  // "/dlaunch/a0": '/' + 1
    Json ff = Json::parse(json::range_prefix(std::string("a\xff", 2)));
    EXPECT_EQ(ff["range_end"], "Yg==") << "a trailing 0xff carries: \"a\\xff\" ends at \"b\"";
    EXPECT_FALSE(Json::parse(json::range_key("/dlaunch/a/leader")).contains("range_end")) << "that key alone";
}

TEST(EtcdJson, AConditionalPutIsATransactionOnTheKeysModRevision) {
    Json t = Json::parse(json::put_if("k", "v", 9, 0));
    EXPECT_EQ(t["compare"][0]["target"], "MOD");
    EXPECT_EQ(t["compare"][0]["mod_revision"], "0") << "0: the key is absent";
    EXPECT_EQ(t["success"][0]["request_put"]["lease"], "9");
    EXPECT_FALSE(t.contains("failure"));
    EXPECT_EQ(Json::parse(json::put_if("k", "v", 0, 12))["compare"][0]["mod_revision"], "12");
    EXPECT_TRUE(*json::succeeded(R"({"header":{},"succeeded":true})"));
    EXPECT_FALSE(*json::succeeded(R"({"header":{}})")) << "false is left out by the gateway";
}

TEST(EtcdJson, ARunsKeysAreDeletedInATransactionThatHoldsWhileNoNodeKeyExists) {
    Json t = Json::parse(json::delete_prefix_unless("/dlaunch/a/", "/dlaunch/a/nodes/"));
    const Json& c = t["compare"][0];
    EXPECT_EQ(c["key"], "L2RsYXVuY2gvYS9ub2Rlcy8=");        // "/dlaunch/a/nodes/"
    EXPECT_EQ(c["range_end"], "L2RsYXVuY2gvYS9ub2RlczA=");  // "/dlaunch/a/nodes0": every key under it
    EXPECT_EQ(c["target"], "VERSION");
    EXPECT_EQ(c["result"], "EQUAL");
    EXPECT_EQ(c["version"], "0") << "no key under the prefix";
    const Json& del = t["success"][0]["request_delete_range"];
    EXPECT_EQ(del["key"], "L2RsYXVuY2gvYS8=");
    EXPECT_EQ(del["range_end"], "L2RsYXVuY2gvYTA=");
}

TEST(EtcdJson, LeasesAndErrorsAsTheGatewayAnswers) {
    EXPECT_EQ(*json::granted(R"({"header":{},"ID":"7587899178849158661","TTL":"5"})"), 7587899178849158661);
    EXPECT_FALSE(json::granted(R"({"header":{}})"));
    EXPECT_EQ(*json::kept_alive(R"({"result":{"ID":"1","TTL":"3"}})"), 3);
    EXPECT_EQ(*json::kept_alive(R"({"result":{"ID":"1"}})"), 0) << "no TTL: the lease is gone";
    const std::string refused = R"({"error":"etcdserver: requested lease not found","code":5,
                                    "message":"etcdserver: requested lease not found"})";
    EXPECT_EQ(json::error_of(refused), "etcdserver: requested lease not found");
    auto e = json::kept_alive(refused);
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().what, "etcd: a lease keep-alive: etcdserver: requested lease not found");
    auto html = json::range("<html>proxy</html>");
    ASSERT_FALSE(html);
    EXPECT_NE(html.error().what.find("is not etcd's JSON"), std::string::npos);
}

TEST(EtcdJson, AnswersOfTheWrongShapeAreErrorsNotExceptions) {
    // Any HTTP service on the endpoint may answer JSON: none of it may throw out of the client.
    const char* what = "is not what etcd answers";
    EXPECT_NE(json::range(R"({"kvs":[1]})").error().what.find(what), std::string::npos);
    EXPECT_NE(json::range(R"({"header":{"revision":"12abc"}})").error().what.find(what), std::string::npos);
    EXPECT_NE(json::range(R"({"header":[]})").error().what.find(what), std::string::npos);
    EXPECT_NE(json::succeeded(R"({"succeeded":"true"})").error().what.find(what), std::string::npos);
    EXPECT_NE(json::granted(R"({"ID":"x"})").error().what.find(what), std::string::npos);
    EXPECT_NE(json::granted(R"({"ID":null})").error().what.find(what), std::string::npos);
    EXPECT_NE(json::kept_alive(R"({"result":7})").error().what.find(what), std::string::npos);
    EXPECT_NE(json::granted(R"({"ID":99999999999999999999})").error().what.find(what), std::string::npos);
    EXPECT_EQ(*json::granted(R"({"ID":3})"), 3) << "a plain number is read too";
}

TEST(EtcdMembershipKeys, ARunsPrefixEscapesWhatCouldNestIt) {
    EXPECT_EQ(run_prefix("job7"), "/dlaunch/job7/");
    EXPECT_EQ(run_prefix("a/nodes"), "/dlaunch/a%2Fnodes/");
    EXPECT_EQ(run_prefix("50%/x"), "/dlaunch/50%25%2Fx/");
}

TEST(EtcdMembershipKeys, NodesAndAttemptsRoundTripAndMalformedOnesAreNone) {
    const NodeFacts n{"host-1:4242", "10.0.0.1", 8, "trainer", 2, 4, "0123456789abcdef"};
    EXPECT_EQ(decode_node(encode_node(n)), n);
    const AttemptRecord r{3, {{"b", "10.0.0.2", 2, "default", 2, 4, "-"}, n}, "10.0.0.2", 29500, 29400, 2, {"c:1:x"}};
    EXPECT_EQ(decode_attempt(encode_attempt(r)), r);
    // What an agent never writes (etcd over http is open to whoever reaches it): nothing is there.
    auto bad = [&](auto change) {
        AttemptRecord b = r;
        change(b);
        return !decode_attempt(encode_attempt(b));
    };
    EXPECT_TRUE(bad([](AttemptRecord& b) { b.members[1].id = "b"; })) << "a node named twice";
    EXPECT_TRUE(bad([](AttemptRecord& b) { b.master_addr = "10.6.6.6"; })) << "a master that is not node 0";
    EXPECT_TRUE(bad([](AttemptRecord& b) { b.master_port = 70000; }));
    EXPECT_TRUE(bad([](AttemptRecord& b) { b.group_port = 0; }));
    EXPECT_TRUE(bad([](AttemptRecord& b) { b.attempt = kMaxAttempt + 1; }));
    EXPECT_TRUE(bad([](AttemptRecord& b) { b.restarts_used = -1; }));
    EXPECT_TRUE(bad([](AttemptRecord& b) { b.left_behind = {"two words"}; }));
    EXPECT_TRUE(bad([](AttemptRecord& b) { b.members[1].nproc = kMaxNodeProcs + 1; }));
    EXPECT_TRUE(bad([](AttemptRecord& b) { b.members[1].addr = "10.0.0.1 10.0.0.9"; }));
    EXPECT_TRUE(bad([](AttemptRecord& b) { b.members[1].role = "a\nb"; }));
    EXPECT_FALSE(bad([](AttemptRecord& b) { b.members[1].role = "a role with spaces"; })) << "as --role allows";
    EXPECT_TRUE(bad([](AttemptRecord& b) { b.members[1].nnodes_min = 3, b.members[1].nnodes_max = 2; }));
    EXPECT_TRUE(bad([](AttemptRecord& b) { b.members[1].nnodes_min = 0, b.members[1].nnodes_max = 2; }));
    EXPECT_TRUE(bad([](AttemptRecord& b) { b.members[1].nnodes_max = static_cast<int>(kMaxMembers) + 1; }));
    EXPECT_TRUE(bad([](AttemptRecord& b) { b.members[1].secret_tag = "two words"; }));
    EXPECT_TRUE(bad([](AttemptRecord& b) { b.members[1].secret_tag = std::string(65, 'a'); }));
    for (const char* bad :
         {"", "[]", "{}", R"({"id":"x","addr":"a","nproc":0})", R"({"id":"","addr":"a","nproc":1})",
          R"({"id":"x","addr":"a","nproc":"8"})", R"({"id":"x","addr":"a","nproc":1,"nnodes":[2]})",
          R"({"id":"x","addr":"a","nproc":1,"nnodes":"2:3"})", R"({"id":"x","addr":"a","nproc":1,"nnodes":[2,3.5]})",
          R"({"id":"x","addr":"a","nproc":1,"secret":7})"})
        EXPECT_FALSE(decode_node(bad)) << bad;
    // An agent that does not say its --nnodes and secret (an older one): 0:0 and "", which fit no leader.
    auto unsaid = decode_node(R"({"id":"x","addr":"a","nproc":1})");
    ASSERT_TRUE(unsaid);
    EXPECT_EQ(unsaid->nnodes_min, 0);
    EXPECT_EQ(unsaid->nnodes_max, 0);
    EXPECT_EQ(unsaid->secret_tag, "");
    EXPECT_FALSE(decode_attempt(R"({"attempt":1,"members":[],"master_addr":"a","master_port":1,"group_port":1})"));
    EXPECT_FALSE(decode_attempt(R"({"attempt":1})"));
    EXPECT_FALSE(decode_attempt(R"({"attempt":1,"members":["a"],"master_addr":"a","master_port":1,"group_port":1})"))
        << "a member without its facts";
    const std::string node = R"({"id":"x","addr":"a","nproc":1})";
    EXPECT_TRUE(
        decode_attempt(R"({"attempt":1,"members":[)" + node + R"(],"master_addr":"a","master_port":1,"group_port":1})"))
        << "the same with its facts";
    for (const char* port : {"1.5", "4294967376", "-1", "1e300", "\"80\""})
        EXPECT_FALSE(decode_attempt(R"({"attempt":1,"members":[)" + node + R"(],"master_addr":"a","master_port":)" +
                                    port + R"(,"group_port":1})"))
            << "port " << port;
}

}  // namespace
}  // namespace dlaunch::etcd
