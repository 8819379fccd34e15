// A run's membership kept in etcd (docs/etcd.md): which agents are alive, who leads, and what the current
// attempt is. Every agent of a run holds one lease, its liveness: the lease's TTL is --heartbeat-timeout,
// the agent keeps it alive, and a node whose agent died drops out of the run when etcd expires its lease.
//
// Keys, under one prefix per run (the run id with '/' and '%' escaped, so no run's prefix holds another's):
//   /dlaunch/<run>/nodes/<node>   the node's facts (JSON), bound to its lease; listed in arrival order
//   /dlaunch/<run>/leader         the leading node's id, bound to its lease: written only when absent
//   /dlaunch/<run>/attempt        the current attempt (JSON): written only over the revision its writer read,
//                                 so two writers can never both publish the same attempt number
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dlaunch/etcd_client.hpp"
#include "dlaunch/node_limits.hpp"

namespace dlaunch::etcd {

// What a record read from etcd may hold besides kMaxNodeProcs workers per node (a larger or malformed one is
// not a dlaunch agent's: decode_*() says nothing was there).
inline constexpr size_t kMaxMembers = 65536;  // nodes of one attempt
inline constexpr int kMaxAttempt = 1 << 24;   // attempt numbers

// What a node brings to the run (its workers and where the others reach it), and the terms it was started
// with, so that a leader takes only nodes that fit its own (etcd_meeting.hpp's misfit()).
struct NodeFacts {
    std::string id;                      // unique in the run: the agent's host and pid, or a uuid
    std::string addr;                    // where the other nodes reach it (MASTER_ADDR when it is node 0 of an attempt)
    int nproc = 1;                       // its workers
    std::string role;                    // --role
    int nnodes_min = 0, nnodes_max = 0;  // its --nnodes MIN:MAX (0:0 in a record that does not say)
    std::string secret_tag;              // what it says of its run secret: "-" for none, "" when not said
    bool operator==(const NodeFacts&) const = default;
};

struct LiveNode {
    NodeFacts facts;
    int64_t since = 0;  // the revision it joined at: arrival order
};

// An attempt as the leader decided it: its members in node-rank order, and where its workers meet.
struct AttemptRecord {
    int attempt = 0;
    std::vector<NodeFacts> members;  // node rank order: what each said when it joined
    std::string master_addr;
    int master_port = 0;
    int group_port = 0;     // where the leader (members[0]) listens to its group
    int restarts_used = 0;  // of --max-restarts before this attempt: a node that comes late counts on from it
    std::vector<std::string> left_behind;  // ids of nodes the group lost in this run: never taken again
    bool operator==(const AttemptRecord&) const = default;
};

// The run's key prefix, "/dlaunch/<run>/" with the run id escaped.
std::string run_prefix(const std::string& run_id);
std::string encode_node(const NodeFacts& node);
// nullopt unless every field is what an agent writes: id and address 1-255 printable characters without
// spaces, a role of at most 255 without control characters, 1 to kMaxNodeProcs workers, --nnodes
// 1 <= MIN <= MAX <= kMaxMembers and a secret tag of at most 64 printable characters (both may be absent).
std::optional<NodeFacts> decode_node(const std::string& text);
std::string encode_attempt(const AttemptRecord& record);
// nullopt unless it is what a leader writes: 1 to kMaxMembers valid nodes, none twice, the master at the
// first one's address, ports 1-65535, an attempt number and restarts used (0 when absent) 0 to kMaxAttempt,
// at most kMaxMembers ids left behind (none when absent).
std::optional<AttemptRecord> decode_attempt(const std::string& text);

class Membership {
public:
    // Holds `client` (which must outlive it); nothing is written until join().
    Membership(Client& client, std::string run_id) : client_(client), prefix_(run_prefix(run_id)) {}

    // Takes a lease of `ttl_seconds` and enters the node under it.
    Status join(const NodeFacts& self, int ttl_seconds);
    // Keeps this node's lease alive: false when etcd says it expired (the others took this node for dead).
    Result<bool> keep_alive();
    // Leaves: the lease is revoked, and this node's keys (its entry; the leader key, when it led) go with it.
    Status leave();

    // The nodes alive now, in arrival order (malformed entries are left out).
    Result<std::vector<LiveNode>> nodes();
    // Becomes the leader when nobody is: true when this node leads now (it did already, or it took the key).
    Result<bool> lead();
    LeaseId lease() const { return lease_; }  // 0: not joined
    // The leader's id; "" when nobody leads (the last leader's lease expired).
    Result<std::string> leader();

    // The current attempt and the revision it was written at (0 and nullopt: none yet).
    struct Current {
        std::optional<AttemptRecord> record;
        int64_t revision = 0;
    };
    Result<Current> attempt();
    // Publishes `next` over the attempt read at `read_revision`: false when someone wrote one since.
    Result<bool> publish(const AttemptRecord& next, int64_t read_revision);
    // Every key of the run, unless a node is still in it (one transaction, so that a node joining the run
    // meanwhile keeps its keys): true when they went.
    Result<bool> clear();

    const std::string& prefix() const { return prefix_; }

private:
    Client& client_;
    std::string prefix_;
    std::string self_;
    LeaseId lease_ = 0;
};

}  // namespace dlaunch::etcd
