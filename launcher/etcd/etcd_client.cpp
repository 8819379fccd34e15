#include "dlaunch/etcd_client.hpp"

#include <curl/curl.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "dlaunch/nettle_api.hpp"
#include "dlaunch/shared_library.hpp"

namespace dlaunch::etcd {
namespace {

using Json = nlohmann::json;

// Nettle's base64 is used only on the way to and from Client::call(), which refuses to send when Nettle could
// not be loaded: until then every text is "" here.
std::string base64(const std::string& bytes) {
    auto nettle = nettle_api();
    if (!nettle) return "";
    std::string out(BASE64_ENCODE_RAW_LENGTH(bytes.size()), '\0');
    (*nettle)->b64_encode_raw(out.data(), bytes.size(), reinterpret_cast<const uint8_t*>(bytes.data()));
    return out;
}

// Strict: the gateway's base64 has no whitespace, pads to a multiple of four, and has at most two '=', at the
// end (Nettle alone would take "A===" as nothing).
std::optional<std::string> unbase64(const std::string& text) {
    static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const size_t data = text.find_last_not_of('=') + 1;  // 0 when all of it is '=' (npos + 1)
    if (text.size() % 4 != 0 || text.size() - data > 2 || text.find_first_not_of(alphabet) < data) return std::nullopt;
    auto nettle = nettle_api();
    if (!nettle) return std::nullopt;
    const NettleApi& api = **nettle;
    std::string out(BASE64_DECODE_LENGTH(text.size()), '\0');
    base64_decode_ctx ctx{};
    api.b64_decode_init(&ctx);
    size_t n = out.size();
    if (api.b64_decode_update(&ctx, &n, reinterpret_cast<uint8_t*>(out.data()), text.size(), text.data()) == 0 ||
        api.b64_decode_final(&ctx) == 0)
        return std::nullopt;
    out.resize(n);
    return out;
}

// The end of the key range that holds every key starting with `prefix` (etcd's "range_end").
std::string prefix_end(std::string prefix) {
    while (!prefix.empty()) {
        if (static_cast<unsigned char>(prefix.back()) < 0xff) {
            prefix.back() = static_cast<char>(prefix.back() + 1);
            return prefix;
        }
        prefix.pop_back();
    }
    return std::string(1, '\0');  // every key
}

// Not the answer expected (a field of the wrong type, a number that is not one): the parsers' one error.
struct Malformed {};

// The gateway writes 64-bit integers as strings and leaves zero values out.
int64_t integer(const Json& object, const char* name) {
    if (!object.is_object()) throw Malformed{};
    auto it = object.find(name);
    if (it == object.end()) return 0;
    if (it->is_number_integer()) return it->get<int64_t>();
    if (!it->is_string()) throw Malformed{};
    const std::string& text = it->get_ref<const std::string&>();
    int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) throw Malformed{};
    return value;
}

// Runs `read` over a parsed answer: an answer of the wrong shape is an Error, never an exception.
template <typename T, typename F>
Result<T> shaped(const std::string& reply, const char* what, F read) {
    try {
        return read();
    } catch (const Malformed&) {
    } catch (const Json::exception&) {
    }
    return Error{std::string("etcd: the answer to ") + what + " is not what etcd answers: " + reply.substr(0, 200),
                 "is the endpoint etcd's client port (2379 by default)?"};
}

Result<Json> parse(const std::string& reply, const char* what) {
    Json parsed = Json::parse(reply, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object())
        return Error{std::string("etcd: the answer to ") + what + " is not etcd's JSON: " + reply.substr(0, 200),
                     "is the endpoint etcd's client port (2379 by default)?"};
    if (auto e = json::error_of(reply); !e.empty()) return Error{std::string("etcd: ") + what + ": " + e, ""};
    return parsed;
}

Result<KeyValue> key_value(const Json& kv) {
    if (!kv.is_object()) throw Malformed{};
    auto key = unbase64(kv.value("key", ""));
    auto value = unbase64(kv.value("value", ""));
    if (!key || !value) return Error{"etcd: a key or value in an answer is not base64", ""};
    return KeyValue{*key, *value, integer(kv, "create_revision"), integer(kv, "mod_revision"), integer(kv, "lease")};
}

}  // namespace

Result<Endpoint> parse_endpoint(const std::string& text) {
    Endpoint e;
    std::string rest = text;
    if (auto scheme = rest.find("://"); scheme != std::string::npos) {
        e.scheme = rest.substr(0, scheme);
        rest = rest.substr(scheme + 3);
    }
    if (!rest.empty() && rest.back() == '/') rest.pop_back();
    const Error bad = Error::in("etcd", "endpoint '" + text + "' is not HOST[:PORT] nor http(s)://HOST[:PORT]",
                                "give etcd's client address, e.g. --rdzv-endpoint 10.0.0.1:2379");
    if (e.scheme != "http" && e.scheme != "https") return bad;
    if (auto colon = rest.rfind(':'); colon != std::string::npos) {
        const std::string port = rest.substr(colon + 1);
        if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return bad;
        e.port = std::stoi(port);
        rest = rest.substr(0, colon);
    }
    if (rest.empty() || rest.find_first_of("/@?# ") != std::string::npos || e.port < 1 || e.port > 65535) return bad;
    e.host = rest;
    return e;
}

namespace json {

std::string grant(int ttl_seconds) {
    return Json{{"TTL", ttl_seconds}}.dump();
}

std::string lease_id(LeaseId lease) {
    return Json{{"ID", std::to_string(lease)}}.dump();
}

std::string put(const std::string& key, const std::string& value, LeaseId lease) {
    Json body{{"key", base64(key)}, {"value", base64(value)}};
    if (lease != 0) body["lease"] = std::to_string(lease);
    return body.dump();
}

std::string put_if(const std::string& key, const std::string& value, LeaseId lease, int64_t mod_revision) {
    Json request = Json::parse(put(key, value, lease));
    return Json{{"compare",
                 {{{"key", base64(key)},
                   {"target", "MOD"},
                   {"result", "EQUAL"},
                   {"mod_revision", std::to_string(mod_revision)}}}},
                {"success", {{{"request_put", request}}}}}
        .dump();
}

std::string range_prefix(const std::string& prefix) {
    return Json{{"key", base64(prefix)}, {"range_end", base64(prefix_end(prefix))}}.dump();
}

std::string range_key(const std::string& key) {
    return Json{{"key", base64(key)}}.dump();
}

std::string delete_prefix_unless(const std::string& prefix, const std::string& unless) {
    // A compare over a range holds for every key in it, and on no key compares a version of 0: "none exists".
    return Json{{"compare",
                 {{{"key", base64(unless)},
                   {"range_end", base64(prefix_end(unless))},
                   {"target", "VERSION"},
                   {"result", "EQUAL"},
                   {"version", "0"}}}},
                {"success", {{{"request_delete_range", Json::parse(range_prefix(prefix))}}}}}
        .dump();
}

std::string error_of(const std::string& reply) {
    Json parsed = Json::parse(reply, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("error")) return "";
    const auto& message = parsed.contains("message") ? parsed["message"] : parsed["error"];
    return message.is_string() ? message.get<std::string>() : message.dump();
}

Result<LeaseId> granted(const std::string& reply) {
    auto parsed = parse(reply, "a lease grant");
    if (!parsed) return parsed.error();
    return shaped<LeaseId>(reply, "a lease grant", [&]() -> Result<LeaseId> {
        if (const LeaseId id = integer(*parsed, "ID"); id != 0) return id;
        return Error{"etcd: a lease grant answered without a lease: " + reply.substr(0, 200), ""};
    });
}

Result<int> kept_alive(const std::string& reply) {
    auto parsed = parse(reply, "a lease keep-alive");
    if (!parsed) return parsed.error();
    return shaped<int>(reply, "a lease keep-alive", [&]() -> Result<int> {
        if (!parsed->contains("result"))
            return Error{"etcd: a lease keep-alive answered without a result: " + reply.substr(0, 200), ""};
        return static_cast<int>(integer((*parsed)["result"], "TTL"));
    });
}

Result<bool> succeeded(const std::string& reply) {
    auto parsed = parse(reply, "a transaction");
    if (!parsed) return parsed.error();
    return shaped<bool>(reply, "a transaction", [&]() -> Result<bool> { return parsed->value("succeeded", false); });
}

Result<Range> range(const std::string& reply) {
    auto parsed = parse(reply, "a range read");
    if (!parsed) return parsed.error();
    return shaped<Range>(reply, "a range read", [&]() -> Result<Range> {
        Range out;
        if (parsed->contains("header")) out.revision = integer((*parsed)["header"], "revision");
        for (const auto& kv : parsed->value("kvs", Json::array())) {
            auto one = key_value(kv);
            if (!one) return one.error();
            out.kvs.push_back(std::move(one).value());
        }
        return out;
    });
}

}  // namespace json

namespace {

// libcurl, opened by its SONAME when the first client starts (launcher/CMakeLists.txt says why).
struct CurlApi {
    decltype(&curl_global_init) global_init = nullptr;
    decltype(&curl_easy_init) easy_init = nullptr;
    decltype(&curl_easy_setopt) setopt = nullptr;
    decltype(&curl_easy_perform) perform = nullptr;
    decltype(&curl_easy_getinfo) getinfo = nullptr;
    decltype(&curl_easy_cleanup) cleanup = nullptr;
    decltype(&curl_easy_strerror) strerror = nullptr;
    decltype(&curl_slist_append) slist_append = nullptr;
    decltype(&curl_slist_free_all) slist_free_all = nullptr;
};

// libcurl's functions, initialised once; an Error when it cannot be loaded.
Result<const CurlApi*> curl_api() {
    static CurlApi api;
    static SharedLibrary so(DLAUNCH_LIBCURL_SONAME);
    static const bool loaded = [] {
        so.bind(api.global_init, "curl_global_init");
        so.bind(api.easy_init, "curl_easy_init");
        so.bind(api.setopt, "curl_easy_setopt");
        so.bind(api.perform, "curl_easy_perform");
        so.bind(api.getinfo, "curl_easy_getinfo");
        so.bind(api.cleanup, "curl_easy_cleanup");
        so.bind(api.strerror, "curl_easy_strerror");
        so.bind(api.slist_append, "curl_slist_append");
        so.bind(api.slist_free_all, "curl_slist_free_all");
        return so.ok() && api.global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    }();
    if (!loaded)
        return Error{"etcd: cannot load " DLAUNCH_LIBCURL_SONAME ": " + (so.ok() ? "it did not start" : so.error()),
                     "install libcurl (apt-get install libcurl4), which dlaunch talks to etcd through"};
    return &api;
}

}  // namespace

// The transport: one libcurl easy handle, its connection kept between calls.
struct Client::Curl {
    Result<const CurlApi*> api = curl_api();
    CURL* handle = nullptr;
    curl_slist* headers = nullptr;
    std::string reply;
    bool too_long = false;
};

namespace {

size_t collect(char* data, size_t size, size_t count, void* user) {
    auto* c = static_cast<std::string*>(user);
    const size_t n = size * count;
    if (c->size() + n > Client::kMaxReply) return 0;  // libcurl then ends the transfer with an error
    c->append(data, n);
    return n;
}

Error transport_error(const CurlApi& api, const Endpoint& e, CURLcode code, const char* detail) {
    const std::string why = *detail ? detail : api.strerror(code);
    switch (code) {
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_OPERATION_TIMEDOUT:
            return {"etcd: " + e.url() + " is not reachable (" + why + ")",
                    "start etcd there or name a running one; etcd serves clients on "
                    "port 2379 unless told otherwise"};
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_CIPHER:
            return {"etcd: " + e.url() + ": TLS refused (" + why + ")",
                    "check --rdzv-conf cacert=, cert= and key= (and protocol=https) against etcd's TLS setup"};
        case CURLE_WRITE_ERROR:
            return {"etcd: " + e.url() + ": an answer longer than " + std::to_string(Client::kMaxReply >> 20) +
                        " MiB was refused",
                    "is the endpoint etcd?"};
        default: return {"etcd: " + e.url() + ": " + why, ""};
    }
}

}  // namespace

Client::Client(Endpoint endpoint, std::chrono::milliseconds timeout)
    : endpoint_(std::move(endpoint)),
      timeout_(std::max(timeout, std::chrono::milliseconds(1))),  // libcurl reads 0 as no limit
      curl_(std::make_unique<Curl>()) {
    if (!curl_->api) return;
    const CurlApi& api = **curl_->api;
    curl_->handle = api.easy_init();
    curl_->headers = api.slist_append(nullptr, "Content-Type: application/json");
}

Client::~Client() {
    if (!curl_->api) return;
    if (curl_->handle) (*curl_->api)->cleanup(curl_->handle);
    (*curl_->api)->slist_free_all(curl_->headers);
}

Result<std::string> Client::call(const std::string& path, const std::string& body) {
    if (!curl_->api) return curl_->api.error();
    if (auto nettle = nettle_api(); !nettle) return Error{"etcd: " + nettle.error().what, nettle.error().hint};
    const CurlApi& api = **curl_->api;
    CURL* h = curl_->handle;
    if (!h || !curl_->headers) return Error{"etcd: libcurl could not start (out of memory?)", ""};
    char detail[CURL_ERROR_SIZE] = "";
    curl_->reply.clear();
    const std::string url = endpoint_.url() + path;
    api.setopt(h, CURLOPT_URL, url.c_str());
    api.setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM: the agent's signals are its own
    api.setopt(h, CURLOPT_HTTPHEADER, curl_->headers);
    api.setopt(h, CURLOPT_POSTFIELDS, body.c_str());
    api.setopt(h, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    api.setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_.count()));
    api.setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeout_.count()));
    api.setopt(h, CURLOPT_WRITEFUNCTION, collect);
    api.setopt(h, CURLOPT_WRITEDATA, &curl_->reply);
    api.setopt(h, CURLOPT_ERRORBUFFER, detail);
    api.setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    api.setopt(h, CURLOPT_PROXY, "");  // straight to etcd: a site's http_proxy is not for the cluster
    if (!endpoint_.cacert.empty()) api.setopt(h, CURLOPT_CAINFO, endpoint_.cacert.c_str());
    if (!endpoint_.cert.empty()) api.setopt(h, CURLOPT_SSLCERT, endpoint_.cert.c_str());
    if (!endpoint_.key.empty()) api.setopt(h, CURLOPT_SSLKEY, endpoint_.key.c_str());
    const CURLcode code = api.perform(h);
    api.setopt(h, CURLOPT_ERRORBUFFER, nullptr);
    if (code != CURLE_OK) return transport_error(api, endpoint_, code, detail);
    long status = 0;
    api.getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) {
        const std::string said = json::error_of(curl_->reply);
        return Error{"etcd: " + url + ": HTTP " + std::to_string(status) + ": " +
                         (said.empty() ? curl_->reply.substr(0, 200) : said),
                     status == 401 || status == 403 ? "etcd asks for credentials dlaunch was not given" : ""};
    }
    return curl_->reply;
}

Result<LeaseId> Client::grant(int ttl_seconds) {
    auto reply = call("/v3/lease/grant", json::grant(ttl_seconds));
    return reply ? json::granted(*reply) : Result<LeaseId>(reply.error());
}

Result<int> Client::keep_alive(LeaseId lease) {
    auto reply = call("/v3/lease/keepalive", json::lease_id(lease));
    return reply ? json::kept_alive(*reply) : Result<int>(reply.error());
}

Status Client::revoke(LeaseId lease) {
    auto reply = call("/v3/lease/revoke", json::lease_id(lease));
    if (!reply) return reply.error();
    return Ok{};
}

Status Client::put(const std::string& key, const std::string& value, LeaseId lease) {
    auto reply = call("/v3/kv/put", json::put(key, value, lease));
    if (!reply) return reply.error();
    return Ok{};
}

Result<bool> Client::put_if(const std::string& key, const std::string& value, LeaseId lease, int64_t mod_revision) {
    auto reply = call("/v3/kv/txn", json::put_if(key, value, lease, mod_revision));
    return reply ? json::succeeded(*reply) : Result<bool>(reply.error());
}

Result<std::optional<KeyValue>> Client::get(const std::string& key) {
    auto reply = call("/v3/kv/range", json::range_key(key));
    if (!reply) return reply.error();
    auto range = json::range(*reply);
    if (!range) return range.error();
    if (range->kvs.empty()) return std::optional<KeyValue>();
    return std::optional<KeyValue>(std::move(range->kvs.front()));
}

Result<Range> Client::get_prefix(const std::string& prefix) {
    auto reply = call("/v3/kv/range", json::range_prefix(prefix));
    return reply ? json::range(*reply) : Result<Range>(reply.error());
}

Result<bool> Client::delete_prefix_unless(const std::string& prefix, const std::string& unless) {
    auto reply = call("/v3/kv/txn", json::delete_prefix_unless(prefix, unless));
    return reply ? json::succeeded(*reply) : Result<bool>(reply.error());
}

}  // namespace dlaunch::etcd
