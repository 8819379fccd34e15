#include "dlaunch/etcd_meeting.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "dlaunch/clock.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/rdzv_auth.hpp"
#include "dlaunch/side_thread.hpp"

namespace dlaunch {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

Result<std::string> secret_tag(const std::string& secret, const std::string& run_id) {
    auto proof = rdzv_auth::proof(secret, "dlaunch etcd secret tag", run_id);
    if (!proof) return proof.error();
    return proof->substr(0, 16);  // "-" without a secret
}

namespace {

std::string range_text(int min, int max) {
    return min == max ? std::to_string(min) : std::to_string(min) + ":" + std::to_string(max);
}

std::string secret_misfit(const std::string& mine, const std::string& leaders) {
    const std::string var = rdzv_auth::kSecretVariable;
    if (leaders.empty()) return "the run's leader does not say what secret it has (another version of dlaunch)";
    if (mine == "-") return "the run's leader has a " + var + " and this node none";
    if (leaders == "-") return "this node has a " + var + " and the run's leader none";
    return "this node's " + var + " is not the run leader's";
}

}  // namespace

std::string misfit(const etcd::NodeFacts& node, const etcd::NodeFacts& leader) {
    if (leader.nnodes_min == 0) return "the run's leader does not say its --nnodes (another version of dlaunch)";
    if (node.nnodes_min == 0) return "this node does not say its --nnodes (another version of dlaunch)";
    if (node.nnodes_min != leader.nnodes_min || node.nnodes_max != leader.nnodes_max)
        return "this node has --nnodes " + range_text(node.nnodes_min, node.nnodes_max) + " and the run's leader " +
               range_text(leader.nnodes_min, leader.nnodes_max);
    if (node.secret_tag != leader.secret_tag) return secret_misfit(node.secret_tag, leader.secret_tag);
    return "";
}

std::vector<std::string> misfits_to_say(const std::vector<etcd::LiveNode>& live,
                                        const std::vector<std::string>& members, const etcd::NodeFacts& leader,
                                        const std::string& run_id, std::set<std::string>& said) {
    constexpr size_t kSaidAtMost = 256;  // ids remembered: a run's worth of strangers, not a flood's
    std::vector<std::string> lines;
    for (const etcd::LiveNode& n : live) {
        if (said.size() >= kSaidAtMost || said.contains(n.facts.id)) continue;
        const std::string why = misfit(n.facts, leader);  // cheap, and empty for nearly every node: first
        if (why.empty() || std::find(members.begin(), members.end(), n.facts.id) != members.end()) continue;
        said.insert(n.facts.id);
        lines.push_back("not taking the node at " + n.facts.addr + " (" + n.facts.id + ") into run " + run_id +
                        ": in its words, " + why);
    }
    return lines;
}

namespace {

// The live node `id`; null when it is not alive.
const etcd::LiveNode* live_node(const std::vector<etcd::LiveNode>& live, const std::string& id) {
    auto it = std::find_if(live.begin(), live.end(), [&](const etcd::LiveNode& n) { return n.facts.id == id; });
    return it == live.end() ? nullptr : &*it;
}

}  // namespace

std::optional<std::vector<etcd::NodeFacts>> first_members(const std::vector<etcd::LiveNode>& live,
                                                          const std::string& leader, NodeRange nnodes,
                                                          bool last_call_over) {
    const etcd::LiveNode* self = live_node(live, leader);
    if (!self) return std::nullopt;  // the leader's own entry is not there (yet): it cannot lead
    std::vector<etcd::NodeFacts> members{self->facts};
    for (const etcd::LiveNode& n : live)
        if (n.facts.id != leader && fits(n.facts, self->facts)) members.push_back(n.facts);
    const int count = static_cast<int>(members.size());
    if (count < nnodes.min || (count < nnodes.max && !last_call_over)) return std::nullopt;
    if (count > nnodes.max) members.resize(static_cast<size_t>(nnodes.max));
    return members;
}

bool attempt_is_current(const etcd::AttemptRecord& record, const std::vector<etcd::LiveNode>& live) {
    return std::any_of(record.members.begin(), record.members.end(),
                       [&](const etcd::NodeFacts& m) { return live_node(live, m.id) != nullptr; });
}

std::optional<NodeAssignment> assignment_in(const etcd::AttemptRecord& record, const std::string& self) {
    NodeAssignment a;
    a.nnodes = static_cast<int>(record.members.size());
    a.node_rank = -1;
    for (size_t i = 0; i < record.members.size(); ++i) {
        const etcd::NodeFacts& m = record.members[i];
        if (m.id == self) a.node_rank = static_cast<int>(i);
        a.node_addrs.push_back(m.addr);
        a.shares.push_back({m.nproc, m.role});
    }
    if (a.node_rank < 0 || record.group_port <= 0) return std::nullopt;
    a.master_addr = record.master_addr;
    a.master_port = record.master_port;
    a.rendezvous_port = record.group_port;
    return a;
}

Result<etcd::NodeFacts> etcd_node_facts(const LaunchRequest& req, int procs) {
    auto tag = secret_tag(req.rendezvous_secret, req.rdzv_id);
    if (!tag) return tag.error();
    // Unique in the run even for a container restarted with the same hostname and pid.
    etcd::NodeFacts self{host::hostname() + ":" + std::to_string(::getpid()) + ":" + host::random_run_id().substr(0, 8),
                         "",
                         procs,
                         req.role,
                         req.nnodes.min,
                         req.nnodes.max,
                         *tag};
    if (req.local_addr) {
        self.addr = *req.local_addr;
        return self;
    }
    auto endpoint = etcd::parse_endpoint(req.etcd->endpoint);
    if (!endpoint) return endpoint.error();
    auto addr = host::address_towards(endpoint->host);
    if (!addr) return Error{"rdzv: etcd at " + endpoint->url() + ": " + addr.error().what, addr.error().hint};
    self.addr = *addr;
    return self;
}

namespace {

// The live nodes that fit `leader` (itself included): those it may take.
size_t fitting(const std::vector<etcd::LiveNode>& live, const etcd::NodeFacts& leader) {
    return static_cast<size_t>(
        std::count_if(live.begin(), live.end(), [&](const etcd::LiveNode& n) { return fits(n.facts, leader); }));
}

// The live nodes an attempt of `members` (ids) led by `leader` does not name, and that fit it: those waiting
// to join it.
int outside(const std::vector<etcd::LiveNode>& live, const std::vector<std::string>& members,
            const etcd::NodeFacts& leader) {
    return static_cast<int>(std::count_if(live.begin(), live.end(), [&](const etcd::LiveNode& n) {
        return std::find(members.begin(), members.end(), n.facts.id) == members.end() && fits(n.facts, leader);
    }));
}

// The ids an attempt's leader does not count as waiting: the attempt's members and the nodes left behind.
std::vector<std::string> not_waiting(const std::vector<std::string>& members,
                                     const std::vector<std::string>& left_behind) {
    std::vector<std::string> ids = members;
    ids.insert(ids.end(), left_behind.begin(), left_behind.end());
    return ids;
}

}  // namespace

// The lease, renewed on a side thread (with a client of its own) every third of its TTL until stopped. On the
// group's leader the same thread also counts, every second, the live nodes the current attempt does not name:
// those waiting to join (read by the group through waiting()).
class LeaseKeeper {
public:
    LeaseKeeper(etcd::Endpoint endpoint, etcd::LeaseId lease, int ttl_seconds, const std::string& run_id,
                etcd::NodeFacts self)
        : every_(std::max<long>(500, ttl_seconds * 1000L / 3)),
          client_(std::move(endpoint), every_),
          membership_(client_, run_id),
          lease_(lease),
          run_id_(run_id),
          self_(std::move(self)) {
        thread_ = side_thread([this] { loop(); });
    }
    ~LeaseKeeper() { stop(); }
    void stop() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        if (thread_.joinable()) thread_.join();
    }
    // From now on, counts the live nodes outside `members` (ids) that fit this node; empty: stops counting.
    void count_outside(std::vector<std::string> members) {
        std::lock_guard lock(mutex_);
        members_ = std::move(members);
        waiting_ = 0;
    }
    int waiting() const { return waiting_.load(); }

private:
    void loop() {
        std::unique_lock lock(mutex_);
        auto renew_at = Clock::now() + every_;
        while (!wake_.wait_for(lock, std::min(every_, kLookEvery), [this] { return stopping_; })) {
            const std::vector<std::string> members = members_;
            lock.unlock();
            if (Clock::now() >= renew_at) {
                renew();
                renew_at = Clock::now() + every_;
            }
            if (!members.empty()) count(members);
            lock.lock();
        }
    }
    void count(const std::vector<std::string>& members) {
        auto live = membership_.nodes();
        if (!live) return;  // etcd away: renew() says so
        const int waiting = outside(*live, members, self_);
        for (const std::string& line : misfits_to_say(*live, members, self_, run_id_, said_))
            spdlog::warn("rdzv: {}", line);
        std::lock_guard lock(mutex_);
        if (members == members_) waiting_ = waiting;
    }
    // etcd briefly away costs nothing while the lease lives: the renewal goes on until it answers again.
    void renew() {
        auto ttl = client_.keep_alive(lease_);
        if (!ttl) {
            if (!failing_)
                spdlog::warn("rdzv: cannot renew this node's lease in etcd: {}; trying on", ttl.error().what);
            failing_ = true;
            return;
        }
        if (failing_) spdlog::info("rdzv: etcd answers again; this node's lease in run {} is renewed", run_id_);
        failing_ = false;
        if (*ttl == 0 && !expired_)
            spdlog::error(
                "rdzv: this node's lease in run {} expired (etcd did not hear from it for its TTL); the "
                "other nodes count this node as gone",
                run_id_);
        expired_ = *ttl == 0;
    }

    static constexpr milliseconds kLookEvery{1000};
    milliseconds every_;
    etcd::Client client_;
    etcd::Membership membership_;
    etcd::LeaseId lease_;
    std::string run_id_;
    etcd::NodeFacts self_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    bool failing_ = false, expired_ = false;
    std::vector<std::string> members_;  // guarded by mutex_
    std::set<std::string> said_;        // nodes that do not fit, said once (by the keeper's thread only)
    std::atomic<int> waiting_{0};
    std::thread thread_;
};

struct EtcdMeeting::State {
    etcd::Client client;
    etcd::Membership membership;
    etcd::NodeFacts self;
    std::string run_id;
    std::unique_ptr<LeaseKeeper> keeper;
    int met = 0;                           // the number of the attempt on record this node last took its place from
    std::vector<std::string> met_members;  // that attempt's node ids, in node-rank order
    std::vector<std::string> left_behind;  // ids of nodes the group lost: never taken again in this run
    State(etcd::Endpoint endpoint, milliseconds timeout, const std::string& run)
        : client(std::move(endpoint), timeout), membership(client, run), run_id(run) {}
};

EtcdMeeting::EtcdMeeting(std::unique_ptr<State> state) : state_(std::move(state)) {}

EtcdMeeting::~EtcdMeeting() {
    leave();
}

Result<std::unique_ptr<EtcdMeeting>> EtcdMeeting::make(const LaunchRequest& req, const etcd::NodeFacts& self,
                                                       const std::string& run_id) {
    const EtcdTerms& terms = *req.etcd;
    auto endpoint = etcd::parse_endpoint(terms.endpoint);
    if (!endpoint) return endpoint.error();
    endpoint->cacert = terms.cacert;
    endpoint->cert = terms.cert;
    endpoint->key = terms.key;
    auto state = std::make_unique<State>(*endpoint, seconds_ms(terms.request_seconds), run_id);
    state->self = self;
    const int ttl = std::max(1, static_cast<int>(std::ceil(req.heartbeat_timeout_seconds)));
    if (auto joined = state->membership.join(self, ttl); !joined) return joined.error();
    state->keeper = std::make_unique<LeaseKeeper>(*endpoint, state->membership.lease(), ttl, run_id, self);
    return std::unique_ptr<EtcdMeeting>(new EtcdMeeting(std::move(state)));
}

int EtcdMeeting::waiting(bool fresh) {
    if (!state_ || !state_->keeper) return 0;
    if (!fresh) return state_->keeper->waiting();
    State& s = *state_;
    auto live = s.membership.nodes();
    if (!live || s.met_members.empty() || s.met_members.front() != s.self.id) return 0;
    return outside(*live, not_waiting(s.met_members, s.left_behind), s.self);
}

bool EtcdMeeting::leader_gone() {
    if (!state_ || state_->met_members.empty()) return false;
    auto live = state_->membership.nodes();
    if (!live) return false;
    const std::string& leader = state_->met_members.front();
    return live_node(*live, leader) == nullptr;
}

void EtcdMeeting::leave() {
    if (!state_ || !state_->keeper) return;
    state_->keeper.reset();
    if (auto left = state_->membership.leave(); !left) {
        spdlog::warn("rdzv: leaving run {} in etcd: {} (its lease ends by itself)", state_->run_id, left.error().what);
        return;
    }
    // The last node out removes the run's keys (before that, a node may still have to read the attempt): in
    // one transaction with the check that no node is left, so that one joining meanwhile keeps its keys.
    if (auto cleared = state_->membership.clear(); !cleared)
        spdlog::warn("rdzv: removing run {}'s keys from etcd: {}", state_->run_id, cleared.error().what);
}

namespace {

// The leader's side of one look at the run: publishes attempt `number` once first_members() says so. The
// workers' port is reserved (locked) for the first attempt; a later leader takes free ones.
Result<bool> publish_attempt(etcd::Membership& m, const etcd::NodeFacts& self, const std::vector<etcd::LiveNode>& live,
                             int64_t read_revision, NodeRange nnodes, bool last_call_over, int number,
                             int restarts_used, const std::vector<std::string>& left_behind) {
    auto members = first_members(live, self.id, nnodes, last_call_over);
    if (!members) return false;
    auto master_port = number == 0 ? host::reserve_free_port() : host::pick_free_port();
    if (!master_port) return master_port.error();
    auto group_port = host::pick_free_port();
    if (!group_port) return group_port.error();
    etcd::AttemptRecord next{number, *members, self.addr, *master_port, *group_port, restarts_used, left_behind};
    auto published = m.publish(next, read_revision);
    if (published && *published)
        spdlog::info("rdzv: etcd: {} node(s) met for attempt {}; this node leads them (master {}:{})", members->size(),
                     number, self.addr, *master_port);
    return published;
}

// An attempt on record whose node count the options of this node do not allow: another run with this id.
std::optional<Error> outside_range(const etcd::AttemptRecord& record, const std::string& run_id, NodeRange nnodes) {
    const int n = static_cast<int>(record.members.size());
    if (n >= nnodes.min && n <= nnodes.max) return std::nullopt;
    return Error{"rdzv: run " + run_id + " in etcd has an attempt of " + std::to_string(n) +
                     " node(s), outside this node's --nnodes " + std::to_string(nnodes.min) + ":" +
                     std::to_string(nnodes.max),
                 "give every node the same --nnodes, or this run another --rdzv-id"};
}

// Who leads the run now: it reads who leads, and tries to take the key only when nobody does (a write each
// waiting node would otherwise make on every look). "" when nobody does still (another node took it first and
// has gone since).
Result<std::string> leader_now(etcd::Membership& m, const std::string& self) {
    auto who = m.leader();
    if (!who) return who.error();
    if (!who->empty()) return *who;
    auto took = m.lead();
    if (!took) return took.error();
    return *took ? self : std::string();
}

// Why this node cannot join a run led by `leader` (started with another --nnodes or secret); nullopt when it
// can. The leader takes only nodes that fit it, so such a node would wait for nothing.
std::optional<Error> refused_by(const etcd::NodeFacts& self, const etcd::NodeFacts& leader, const std::string& run_id) {
    const std::string why = misfit(self, leader);
    if (why.empty()) return std::nullopt;
    return Error{"rdzv: this node cannot join run " + run_id + " in etcd (led by " + leader.addr + "): " + why,
                 "start every node of a run with the same --nnodes and the same " +
                     std::string(rdzv_auth::kSecretVariable) +
                     " (or none on any), or give this node another --rdzv-id"};
}

// The same, for the live node `leader` names (nullopt when it is not among them).
std::optional<Error> refused_by(const etcd::NodeFacts& self, const std::vector<etcd::LiveNode>& live,
                                const std::string& leader, const std::string& run_id) {
    const etcd::LiveNode* node = live_node(live, leader);
    return node ? refused_by(self, node->facts, run_id) : std::nullopt;
}

// Once MIN nodes are there, when the leader stops waiting for MAX: the last call (epoch: not yet), or, with
// none, the join timeout (`deadline`), as dlaunch's c10d host.
bool last_call_over(const LaunchRequest& req, size_t nodes, Clock::time_point deadline,
                    Clock::time_point& min_reached) {
    if (static_cast<int>(nodes) < req.nnodes.min) {
        min_reached = Clock::time_point{};
        return false;
    }
    if (!req.rendezvous_last_call_seconds) return Clock::now() >= deadline;
    if (min_reached == Clock::time_point{}) {
        min_reached = Clock::now();
        if (static_cast<int>(nodes) < req.nnodes.max)
            spdlog::info("rdzv: {} node(s), the least asked for; waiting {:g} s more for up to {}", nodes,
                         *req.rendezvous_last_call_seconds, req.nnodes.max);
    }
    return Clock::now() >= std::min(deadline, min_reached + seconds_ms(*req.rendezvous_last_call_seconds));
}

// A node that came while the run is under way waits for the next attempt: the leader takes it at once below
// --nnodes MAX (the group restarts); at MAX it is a spare, taken when the group next meets with room.
void say_waiting(const std::string& run_id, const etcd::AttemptRecord& record, NodeRange nnodes,
                 std::optional<int>& said_at) {
    if (said_at == record.attempt) return;
    said_at = record.attempt;
    const int n = static_cast<int>(record.members.size());
    if (n < nnodes.max)
        spdlog::info(
            "rdzv: run {} in etcd is under way (attempt {} on {} node(s), led by {}); this node waits to "
            "join: the group restarts to take it",
            run_id, record.attempt, n, record.master_addr);
    else
        spdlog::info(
            "rdzv: run {} in etcd is under way on --nnodes MAX {} node(s) (attempt {}, led by {}); this "
            "node waits as a spare (taken when the nodes next meet again with room for it)",
            run_id, n, record.attempt, record.master_addr);
}

// This node's place in `record`, taken: the attempt it met under, and (on its leader) the count of the nodes
// waiting outside it.
NodeAssignment took_place(int& met, std::vector<std::string>& met_members, LeaseKeeper& keeper,
                          std::vector<std::string>& left_behind, const etcd::AttemptRecord& record,
                          const NodeAssignment& place) {
    met = record.attempt;
    for (const std::string& id : record.left_behind)  // so that whoever leads next leaves them out too
        if (std::find(left_behind.begin(), left_behind.end(), id) == left_behind.end()) left_behind.push_back(id);
    met_members.clear();
    for (const etcd::NodeFacts& m : record.members) met_members.push_back(m.id);
    keeper.count_outside(place.node_rank == 0 ? not_waiting(met_members, left_behind) : std::vector<std::string>{});
    return place;
}

// The live nodes but those left behind.
std::vector<etcd::LiveNode> without(std::vector<etcd::LiveNode> live, const std::vector<std::string>& left_behind) {
    std::erase_if(live, [&](const etcd::LiveNode& n) {
        return std::find(left_behind.begin(), left_behind.end(), n.facts.id) != left_behind.end();
    });
    return live;
}

// How long past its own join timeout a node waits for the leader's attempt: the leader decides at its own
// timeout, which may come later than this node's.
constexpr milliseconds kLeaderDecides{10000};

}  // namespace

Result<EtcdMeeting::Place> EtcdMeeting::meet(const LaunchRequest& req) {
    State& s = *state_;
    const auto deadline = Clock::now() + seconds_ms(req.rendezvous_timeout_seconds);
    Clock::time_point min_reached{};
    std::optional<int> waiting_since;  // the attempt this node found under way when it came (once said)
    size_t seen = 0;
    for (;;) {
        auto current = s.membership.attempt();
        if (!current) return current.error();
        auto live = s.membership.nodes();
        if (!live) return live.error();
        seen = fitting(*live, s.self);  // the nodes this node could meet: those that fit it
        if (current->record && attempt_is_current(*current->record, *live)) {
            if (auto wrong = outside_range(*current->record, s.run_id, req.nnodes)) return *wrong;
            if (auto place = assignment_in(*current->record, s.self.id))
                return Place{took_place(s.met, s.met_members, *s.keeper, s.left_behind, *current->record, *place),
                             current->record->attempt, current->record->restarts_used};
            if (auto refused = refused_by(s.self, current->record->members.front(), s.run_id)) return *refused;
            say_waiting(s.run_id, *current->record, req.nnodes, waiting_since);
            std::this_thread::sleep_for(milliseconds(100));
            continue;  // the run is under way: this node waits for an attempt that names it, however long
        }
        if (waiting_since)
            return Error{"rdzv: run " + s.run_id + " in etcd ended (its nodes all left) while this node waited to join",
                         "start this node again to begin a new run with this --rdzv-id, or give it another one"};
        auto leader = leader_now(s.membership, s.self.id);
        if (!leader) return leader.error();
        if (auto refused = refused_by(s.self, *live, *leader, s.run_id)) return *refused;
        if (*leader == s.self.id) {
            auto published = publish_attempt(s.membership, s.self, *live, current->revision, req.nnodes,
                                             last_call_over(req, seen, deadline, min_reached), 0, 0, {});
            if (!published) return published.error();
            if (*published) continue;  // read back as every node does
        }
        if (Clock::now() >= deadline + kLeaderDecides) break;
        std::this_thread::sleep_for(milliseconds(100));
    }
    return Error{"rdzv: " + std::to_string(seen) + " of " + std::to_string(req.nnodes.min) + " node(s) met in run " +
                     s.run_id + " through etcd at " + req.etcd->endpoint + " within " +
                     std::to_string(static_cast<int>(req.rendezvous_timeout_seconds)) + " s",
                 req.paddle.layout
                     ? "start dlaunch-paddle with the same etcd and --job_id on every node, or raise "
                       "--elastic_timeout"
                     : "start dlaunch with the same --rdzv-endpoint and --rdzv-id on every node, or raise "
                       "--join-timeout"};
}

Result<EtcdMeeting::Place> EtcdMeeting::meet_again(const LaunchRequest& req, int attempt, int restarts_used,
                                                   const std::vector<int>& left_behind) {
    State& s = *state_;
    for (int rank : left_behind)
        if (rank >= 0 && static_cast<size_t>(rank) < s.met_members.size())
            s.left_behind.push_back(s.met_members[static_cast<size_t>(rank)]);
    const auto deadline = Clock::now() + seconds_ms(req.rendezvous_timeout_seconds);
    spdlog::info(
        "rdzv: waiting for the attempt after attempt {} of run {} in etcd (a lost leader's lease ends "
        "within {:g} s)",
        attempt, s.run_id, req.heartbeat_timeout_seconds);
    while (Clock::now() < deadline) {
        auto current = s.membership.attempt();
        if (!current) return current.error();
        // The next attempt is the first on record after the one this node met under (the nodes left may be
        // one group restart apart when their leader was lost while it restarted them).
        const int on_record = current->record ? current->record->attempt : 0;
        if (current->record && on_record > s.met) {
            if (auto wrong = outside_range(*current->record, s.run_id, req.nnodes)) return *wrong;
            if (auto place = assignment_in(*current->record, s.self.id))
                return Place{took_place(s.met, s.met_members, *s.keeper, s.left_behind, *current->record, *place),
                             on_record, current->record->restarts_used};
            return Error{"rdzv: run " + s.run_id + " went on without this node (attempt " +
                             std::to_string(current->record->attempt) + " on " +
                             std::to_string(current->record->members.size()) + " node(s))",
                         "this node's lease ended while it was away (see above), the group lost it (it was left "
                         "behind), or --nnodes MAX was reached"};
        }
        auto leader = leader_now(s.membership, s.self.id);
        if (!leader) return leader.error();
        if (*leader == s.self.id) {
            auto live = s.membership.nodes();
            if (!live) return live.error();
            auto published =
                publish_attempt(s.membership, s.self, without(*live, s.left_behind), current->revision, req.nnodes,
                                true, std::max(attempt, on_record) + 1, restarts_used, s.left_behind);
            if (!published) return published.error();
            if (*published) continue;
        }
        std::this_thread::sleep_for(milliseconds(100));
    }
    return Error{"rdzv: no attempt after attempt " + std::to_string(attempt) + " of run " + s.run_id +
                     " in etcd within " + std::to_string(static_cast<int>(req.rendezvous_timeout_seconds)) + " s",
                 "fewer than --nnodes MIN nodes are left, or etcd's leader key is held by a node that no longer "
                 "runs the group"};
}

}  // namespace dlaunch
