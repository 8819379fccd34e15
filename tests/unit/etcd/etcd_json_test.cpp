// etcd's JSON gateway as dlaunch spells it: endpoints, requests and answers, no etcd needed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dlaunch/etcd_client.hpp"

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
}

TEST(EtcdJson, APrefixReadEndsAtThePrefixsNextKey) {
    Json r = Json::parse(json::range_prefix("/dlaunch/a/"));
    EXPECT_EQ(r["key"], "L2RsYXVuY2gvYS8=");        // "/dlaunch/a/"
    EXPECT_EQ(r["range_end"], "L2RsYXVuY2gvYTA=");  // "/dlaunch/a0": '/' + 1
    Json ff = Json::parse(json::range_prefix(std::string("a\xff", 2)));
    EXPECT_EQ(ff["range_end"], "Yg==") << "a trailing 0xff carries: \"a\\xff\" ends at \"b\"";
}

TEST(EtcdJson, CreateIsATransactionOnTheKeysAbsence) {
    Json t = Json::parse(json::create("k", "v", 9));
    EXPECT_EQ(t["compare"][0]["target"], "CREATE");
    EXPECT_EQ(t["compare"][0]["create_revision"], "0");
    EXPECT_EQ(t["success"][0]["request_put"]["lease"], "9");
    EXPECT_FALSE(t.contains("failure"));
    EXPECT_TRUE(*json::created(R"({"header":{},"succeeded":true})"));
    EXPECT_FALSE(*json::created(R"({"header":{}})")) << "false is left out by the gateway";
}

TEST(EtcdJson, LeasesAndErrorsAsTheGatewayAnswers) {
    EXPECT_EQ(*json::granted(R"({"header":{},"ID":"7587899178849158661","TTL":"5"})"), 7587899178849158661);
    EXPECT_FALSE(json::granted(R"({"header":{}})"));
    EXPECT_EQ(*json::kept_alive(R"({"result":{"ID":"1","TTL":"3"}})"), 3);
    EXPECT_EQ(*json::kept_alive(R"({"result":{"ID":"1"}})"), 0) << "no TTL: the lease is gone";
    EXPECT_EQ(*json::deleted(R"({"header":{},"deleted":"2"})"), 2);
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

}  // namespace
}  // namespace dlaunch::etcd
