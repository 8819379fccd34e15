#include "dlaunch/etcd_membership.hpp"

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace dlaunch::etcd {
namespace {

using Json = nlohmann::json;

std::optional<Json> object_of(const std::string& text) {
    Json j = Json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    return j;
}

Json node_json(const NodeFacts& node) {
    return Json{{"id", node.id},
                {"addr", node.addr},
                {"nproc", node.nproc},
                {"role", node.role},
                {"nnodes", {node.nnodes_min, node.nnodes_max}},
                {"secret", node.secret_tag}};
}

// A word as the nodes' facts may hold it: 1 to 255 printable characters, no space. Anything else came from
// something that is not a dlaunch agent (etcd over http is open to whoever reaches it).
bool plain(const std::string& text) {
    return !text.empty() && text.size() <= 255 &&
           std::all_of(text.begin(), text.end(), [](unsigned char c) { return c > ' ' && c < 0x7f; });
}

bool role_text(const std::string& text) {
    return !text.empty() && text.size() <= 255 &&
           std::all_of(text.begin(), text.end(), [](unsigned char c) { return c >= ' ' && c != 0x7f; });
}

bool port(int p) {
    return p >= 1 && p <= 65535;
}

// A JSON integer in [0, 2^31): a float, a negative or a larger number is none (get<int>() would truncate
// or wrap it).
int whole(const Json& j) {
    if (!j.is_number_integer()) throw std::out_of_range("not an integer");
    const auto v = j.get<int64_t>();
    if (v < 0 || v > INT32_MAX || (j.is_number_unsigned() && j.get<uint64_t>() > INT32_MAX))
        throw std::out_of_range("out of range");
    return static_cast<int>(v);
}

// The --nnodes a node's record says it was started with: absent is 0:0 (fits no leader); otherwise
// 1 <= MIN <= MAX <= kMaxMembers.
bool read_nnodes(const Json& j, NodeFacts& n) {
    if (!j.contains("nnodes")) return true;
    const Json& range = j.at("nnodes");
    if (!range.is_array() || range.size() != 2) return false;
    n.nnodes_min = whole(range[0]);
    n.nnodes_max = whole(range[1]);
    return n.nnodes_min >= 1 && n.nnodes_min <= n.nnodes_max && static_cast<size_t>(n.nnodes_max) <= kMaxMembers;
}

std::optional<NodeFacts> node_of(const Json& j) {
    if (!j.is_object()) return std::nullopt;
    try {
        NodeFacts n{j.at("id").get<std::string>(),
                    j.at("addr").get<std::string>(),
                    whole(j.at("nproc")),
                    j.value("role", std::string("default")),
                    0,
                    0,
                    j.value("secret", std::string())};
        if (!plain(n.id) || !plain(n.addr) || !role_text(n.role) || n.nproc < 1 || n.nproc > kMaxNodeProcs ||
            !read_nnodes(j, n) || n.secret_tag.size() > 64 || (!n.secret_tag.empty() && !plain(n.secret_tag)))
            return std::nullopt;
        return n;
    } catch (const Json::exception&) {
        return std::nullopt;
    } catch (const std::out_of_range&) {
        return std::nullopt;
    }
}

}  // namespace

std::string run_prefix(const std::string& run_id) {
    std::string escaped;
    for (char c : run_id) {
        if (c == '%')
            escaped += "%25";
        else if (c == '/')
            escaped += "%2F";
        else
            escaped += c;
    }
    return "/dlaunch/" + escaped + "/";
}

std::string encode_node(const NodeFacts& node) {
    return node_json(node).dump();
}

std::optional<NodeFacts> decode_node(const std::string& text) {
    auto j = object_of(text);
    if (!j) return std::nullopt;
    return node_of(*j);
}

std::string encode_attempt(const AttemptRecord& record) {
    Json members = Json::array();
    for (const NodeFacts& m : record.members) members.push_back(node_json(m));
    return Json{{"attempt", record.attempt},         {"members", members},
                {"master_addr", record.master_addr}, {"master_port", record.master_port},
                {"group_port", record.group_port},   {"restarts_used", record.restarts_used},
                {"left_behind", record.left_behind}}
        .dump();
}

std::optional<AttemptRecord> decode_attempt(const std::string& text) {
    auto j = object_of(text);
    if (!j) return std::nullopt;
    try {
        AttemptRecord r{whole(j->at("attempt")),
                        {},
                        j->at("master_addr").get<std::string>(),
                        whole(j->at("master_port")),
                        whole(j->at("group_port")),
                        0,
                        {}};
        if (j->contains("restarts_used")) r.restarts_used = whole(j->at("restarts_used"));
        if (j->contains("left_behind")) {
            const Json& gone = j->at("left_behind");
            if (!gone.is_array() || gone.size() > kMaxMembers) return std::nullopt;
            for (const Json& id : gone) {
                r.left_behind.push_back(id.get<std::string>());
                if (!plain(r.left_behind.back())) return std::nullopt;
            }
        }
        const Json& members = j->at("members");
        if (!members.is_array() || members.empty() || members.size() > kMaxMembers) return std::nullopt;
        std::set<std::string> ids;
        for (const Json& m : members) {
            auto node = node_of(m);
            if (!node || !ids.insert(node->id).second) return std::nullopt;  // malformed, or a node named twice
            r.members.push_back(*node);
        }
        // The leader is node 0 and the workers' master: its address is the master's.
        if (r.attempt < 0 || r.attempt > kMaxAttempt || r.restarts_used < 0 || r.restarts_used > kMaxAttempt ||
            !port(r.master_port) || !port(r.group_port) || r.master_addr != r.members.front().addr)
            return std::nullopt;
        return r;
    } catch (const Json::exception&) {
        return std::nullopt;
    } catch (const std::out_of_range&) {
        return std::nullopt;
    }
}

Status Membership::join(const NodeFacts& self, int ttl_seconds) {
    auto lease = client_.grant(ttl_seconds);
    if (!lease) return lease.error();
    lease_ = *lease;
    self_ = self.id;
    auto created = client_.create(prefix_ + "nodes/" + self.id, encode_node(self), lease_);
    if (!created) return created.error();
    if (!*created)
        return Error{"etcd: node id '" + self.id + "' is already in run " + prefix_,
                     "every node of a run needs its own id; is this node's agent running twice?"};
    return Ok{};
}

Result<bool> Membership::keep_alive() {
    auto ttl = client_.keep_alive(lease_);
    if (!ttl) return ttl.error();
    return *ttl > 0;
}

Status Membership::leave() {
    if (lease_ == 0) return Ok{};
    auto revoked = client_.revoke(lease_);
    lease_ = 0;
    return revoked;
}

Result<std::vector<LiveNode>> Membership::nodes() {
    auto range = client_.get_prefix(prefix_ + "nodes/");
    if (!range) return range.error();
    std::vector<LiveNode> out;
    for (const KeyValue& kv : range->kvs)
        if (auto node = decode_node(kv.value)) out.push_back({*node, kv.create_revision});
    std::sort(out.begin(), out.end(), [](const LiveNode& a, const LiveNode& b) { return a.since < b.since; });
    return out;
}

Result<bool> Membership::lead() {
    auto taken = client_.create(prefix_ + "leader", self_, lease_);
    if (!taken || *taken) return taken;
    auto who = leader();
    if (!who) return who.error();
    return *who == self_;
}

Result<std::string> Membership::leader() {
    auto kv = client_.get(prefix_ + "leader");
    if (!kv) return kv.error();
    return *kv ? (*kv)->value : std::string();
}

Result<Membership::Current> Membership::attempt() {
    auto kv = client_.get(prefix_ + "attempt");
    if (!kv) return kv.error();
    if (!*kv) return Current{};
    return Current{decode_attempt((*kv)->value), (*kv)->mod_revision};
}

Result<bool> Membership::publish(const AttemptRecord& next, int64_t read_revision) {
    return client_.put_if(prefix_ + "attempt", encode_attempt(next), 0, read_revision);
}

Result<bool> Membership::clear() {
    return client_.delete_prefix_unless(prefix_, prefix_ + "nodes/");
}

}  // namespace dlaunch::etcd
