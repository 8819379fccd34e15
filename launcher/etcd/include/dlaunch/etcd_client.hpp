// A client of etcd's v3 API, for the membership the agents keep in etcd (--rdzv-backend etcd).
//
// It talks to etcd's JSON gateway (/v3/kv/..., /v3/lease/...) through libcurl: etcd serves it on its client
// port from 3.4 on (Debian 12's etcd-server), it needs no generated code (etcd's .proto files are not
// packaged for C++), and libcurl brings TLS. Keys and values are bytes, base64 in the JSON (Nettle's).
//
// Every call is synchronous and bounded: it ends within the client's request timeout, and a reply larger
// than kMaxReply is refused. An error names the endpoint and says what to do.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/result.hpp"

namespace dlaunch::etcd {

// Where etcd is and how to reach it: torchrun's --rdzv-endpoint and the --rdzv-conf keys of its etcd
// backends (protocol, cacert, cert, key).
struct Endpoint {
    std::string scheme = "http";  // "http" or "https"
    std::string host;
    int port = 2379;
    std::string cacert, cert, key;  // https: the CA to trust, and this client's certificate and key
    std::string url() const { return scheme + "://" + host + ":" + std::to_string(port); }
};

// "HOST", "HOST:PORT" or "http(s)://HOST[:PORT]"; port 2379 when none is given.
Result<Endpoint> parse_endpoint(const std::string& text);

using LeaseId = int64_t;

struct KeyValue {
    std::string key, value;
    int64_t create_revision = 0, mod_revision = 0;
    LeaseId lease = 0;
};

struct Range {
    int64_t revision = 0;  // the store's revision the answer was read at
    std::vector<KeyValue> kvs;
};

// The requests and answers as the gateway spells them (pure: no I/O; tested on their own).
namespace json {
std::string grant(int ttl_seconds);
std::string lease_id(LeaseId lease);  // keepalive, revoke
std::string put(const std::string& key, const std::string& value, LeaseId lease);
// Writes only while the key's mod revision is `mod_revision` (0: the key is absent).
std::string put_if(const std::string& key, const std::string& value, LeaseId lease, int64_t mod_revision);
std::string range_prefix(const std::string& prefix);
std::string range_key(const std::string& key);  // that one key
// Deletes under `prefix` only while no key exists under `unless` (one transaction: nothing can come between).
std::string delete_prefix_unless(const std::string& prefix, const std::string& unless);
// The answers; an Error when the text is not the answer expected.
Result<LeaseId> granted(const std::string& reply);
Result<int> kept_alive(const std::string& reply);  // the TTL left; 0: the lease is gone
Result<bool> succeeded(const std::string& reply);  // a transaction's answer
Result<Range> range(const std::string& reply);
// An error answer's message ({"error": ..., "code": N}), else "".
std::string error_of(const std::string& reply);
}  // namespace json

class Client {
public:
    static constexpr size_t kMaxReply = 16 << 20;

    Client(Endpoint endpoint, std::chrono::milliseconds timeout);
    ~Client();
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    const Endpoint& endpoint() const { return endpoint_; }

    Result<LeaseId> grant(int ttl_seconds);
    Result<int> keep_alive(LeaseId lease);  // the TTL left; 0: the lease expired or was revoked
    Status revoke(LeaseId lease);           // its keys go with it
    Status put(const std::string& key, const std::string& value, LeaseId lease = 0);
    // Writes `key` only when it does not exist: true when this call wrote it.
    Result<bool> create(const std::string& key, const std::string& value, LeaseId lease = 0) {
        return put_if(key, value, lease, 0);
    }
    // Writes `key` only while its mod revision is `mod_revision` (0: absent): true when this call wrote it.
    Result<bool> put_if(const std::string& key, const std::string& value, LeaseId lease, int64_t mod_revision);
    Result<Range> get_prefix(const std::string& prefix);
    // One key; nullopt when it does not exist.
    Result<std::optional<KeyValue>> get(const std::string& key);
    // Deletes every key under `prefix` only while none exists under `unless`: true when it did.
    Result<bool> delete_prefix_unless(const std::string& prefix, const std::string& unless);

private:
    Result<std::string> call(const std::string& path, const std::string& body);

    Endpoint endpoint_;
    std::chrono::milliseconds timeout_;
    struct Curl;
    std::unique_ptr<Curl> curl_;
};

}  // namespace dlaunch::etcd
