#include "dlaunch/rendezvous_door.hpp"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "dlaunch/host.hpp"
#include "dlaunch/side_thread.hpp"
#include "hosting.hpp"

namespace dlaunch {

using namespace rdzv_host;

struct RendezvousDoor::State {
    State(Fd l, const LaunchRequest& r, const MeetingTerms& t, std::string addr)
        : req(r), terms(t), advertise(std::move(addr)), listener(std::move(l)) {
        req.node_rank.reset();  // node 0 is the host; a node's rank in the run is node 0's to give
    }
    LaunchRequest req;
    MeetingTerms terms;
    std::string advertise;
    Fd listener;
    std::mutex mu;  // guards what follows: the door's thread serves it, meet_again() and the rest take from it
    Hosting hosting{req, terms, {}, {}, RefusalLog{}, std::nullopt, {}, true, false};
    int round = -1;            // the attempt the nodes last met for (-1: not yet known)
    NodeAssignment under;      // node 0's place in that meeting: who the members are
    std::atomic<int> held{0};  // nodes waiting to be taken, as last counted
    std::atomic<bool> stop{false};
    Clock::time_point waits_said{};
};

namespace {

constexpr std::chrono::milliseconds kRound{50};

// One line to a node held, never waiting for it: true when all of it went (a node that does not read is not
// one that waits).
bool say_now(const Joiner& j, const std::string& line) {
    return ::send(j.fd.get(), line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL) ==
           static_cast<ssize_t>(line.size());
}

bool waits(const Joiner& j) {
    return j.hello.met < 0;
}

// Whether `j` is the member of node rank `rank` in the last meeting connecting again: it met for that attempt,
// at that rank and address.
bool is_member(const Joiner& j, const RendezvousDoor::State& s, int rank) {
    return j.hello.met == s.round && j.hello.rank == rank && rank > 0 && rank < s.under.nnodes &&
           j.hello.addr == s.under.node_addrs.at(static_cast<size_t>(rank));
}

// Members of an earlier meeting (they missed the last one), or claiming a place they do not have, are told the
// run went on without them.
void turn_away_strangers(RendezvousDoor::State& s) {
    auto& joiners = s.hosting.joiners;
    for (auto it = joiners.begin(); it != joiners.end();) {
        if (waits(*it) || s.round < 0 || is_member(*it, s, it->hello.rank)) {
            ++it;
            continue;
        }
        const std::string why = "the run went on without this node (node " + std::to_string(it->hello.rank) + " at " +
                                it->hello.addr + " of the meeting for attempt " + std::to_string(it->hello.met) +
                                "; the nodes last met for attempt " + std::to_string(s.round) + ")";
        (void)say_now(*it, encode_refusal(why));
        spdlog::warn("rdzv: turned the node at {} away: {}", it->hello.addr, why);
        it = joiners.erase(it);
    }
}

// The newest waiting nodes past max(64, MAX) are told the run holds enough (members meeting again always
// get in).
void hold_at_most(RendezvousDoor::State& s) {
    auto& joiners = s.hosting.joiners;
    const int most = std::max(64, s.req.nnodes.max);
    for (auto it = joiners.end(); s.hosting.waiting() > most && it != joiners.begin();) {
        --it;
        if (!waits(*it)) continue;
        (void)say_now(*it, encode_refusal("the run holds " + std::to_string(most) +
                                          " nodes waiting to join already; start this one later"));
        spdlog::warn("rdzv: turned the node at {} away: {} nodes wait to join already", it->hello.addr, most);
        it = joiners.erase(it);
    }
}

// Tells every node held that it still is (a joiner told so waits kDoorHoldsFor more), every kDoorWaitEvery; a
// node whose connection does not take the line at once is dropped.
void say_wait(RendezvousDoor::State& s) {
    if (Clock::now() - s.waits_said < kDoorWaitEvery) return;
    s.waits_said = Clock::now();
    auto& joiners = s.hosting.joiners;
    for (auto it = joiners.begin(); it != joiners.end();) {
        auto wait = encode_wait(s.terms.proofs, it->hello.nonce, ++it->waits_said);
        if (wait && say_now(*it, *wait)) {
            ++it;
            continue;
        }
        spdlog::warn("rdzv: dropped the node at {}: it does not read what node 0 says", it->hello.addr);
        it = joiners.erase(it);
    }
}

void serve(const std::shared_ptr<RendezvousDoor::State>& s) {
    while (!s->stop) {
        {
            std::lock_guard lock(s->mu);
            if (s->listener.get() < 0) return;
            host_round(s->hosting, s->listener.get(), Clock::now() + kRound);
            s->hosting.ended.reset();  // a node that cannot join is told so; the run under way goes on
            drop_departed(s->hosting.joiners, true);
            turn_away_strangers(*s);
            hold_at_most(*s);
            say_wait(*s);
            s->held = s->hosting.waiting();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a caller waiting for the lock takes it now
    }
}

std::vector<int> members_to_meet(const RendezvousDoor::State& s, const std::vector<int>& left_behind) {
    std::vector<int> out;
    for (int r = 1; r < s.under.nnodes; ++r)
        if (std::find(left_behind.begin(), left_behind.end(), r) == left_behind.end()) out.push_back(r);
    return out;
}

bool all_there(const RendezvousDoor::State& s, const std::vector<int>& members) {
    return std::all_of(members.begin(), members.end(), [&](int r) {
        return std::any_of(s.hosting.joiners.begin(), s.hosting.joiners.end(),
                           [&](const Joiner& j) { return is_member(j, s, r); });
    });
}

// The next attempt's nodes but node 0, in node-rank order: the members that came (in their order), then the
// nodes that waited (in arrival order) up to MAX. What is taken leaves the door; the members that did not
// come are named in `missing`.
std::vector<Joiner> take_nodes(RendezvousDoor::State& s, const std::vector<int>& members, std::vector<int>& missing) {
    auto& joiners = s.hosting.joiners;
    std::vector<Joiner> taken;
    for (int r : members) {
        auto it = std::find_if(joiners.begin(), joiners.end(), [&](const Joiner& j) { return is_member(j, s, r); });
        if (it == joiners.end()) {
            missing.push_back(r);
            continue;
        }
        taken.push_back(std::move(*it));
        joiners.erase(it);
    }
    for (auto it = joiners.begin(); it != joiners.end() && static_cast<int>(taken.size()) + 1 < s.req.nnodes.max;) {
        if (!waits(*it)) {
            ++it;
            continue;
        }
        taken.push_back(std::move(*it));
        it = joiners.erase(it);
    }
    for (size_t i = 0; i < taken.size(); ++i) taken[i].hello.rank = static_cast<int>(i) + 1;
    return taken;
}

}  // namespace

RendezvousDoor::RendezvousDoor(std::shared_ptr<State> state) : state_(std::move(state)) {
    thread_ = side_thread(serve, state_);
}

std::shared_ptr<RendezvousDoor> RendezvousDoor::open(Fd listener, const LaunchRequest& req, const MeetingTerms& terms,
                                                     const std::string& advertise) {
    auto state = std::make_shared<State>(std::move(listener), req, terms, advertise);
    spdlog::info(
        "rdzv: the rendezvous stays open while the run lasts: a node started later with the same command "
        "joins it at its next attempt, up to --nnodes MAX {}",
        req.nnodes.max);
    return std::shared_ptr<RendezvousDoor>(new RendezvousDoor(std::move(state)));
}

RendezvousDoor::~RendezvousDoor() {
    close("the run ended");
    if (thread_.joinable()) thread_.join();
}

void RendezvousDoor::close(const std::string& why) {
    state_->stop = true;
    std::lock_guard lock(state_->mu);
    for (const Joiner& j : state_->hosting.joiners) (void)say_now(j, encode_refusal(why));
    state_->hosting.joiners.clear();
    state_->hosting.pending.clear();
    state_->listener.reset();
    state_->held = 0;
}

void RendezvousDoor::met(int attempt, const NodeAssignment& a) {
    std::lock_guard lock(state_->mu);
    state_->round = attempt;
    state_->under = a;
}

int RendezvousDoor::waiting(bool fresh) {
    if (!fresh) return state_->held;
    std::lock_guard lock(state_->mu);
    drop_departed(state_->hosting.joiners, true);
    return state_->held = state_->hosting.waiting();
}

Result<Met> RendezvousDoor::meet_again(const std::vector<int>& left_behind, int attempt, int restarts_used,
                                       Clock::time_point deadline) {
    State& s = *state_;
    std::unique_lock lock(s.mu);
    const std::vector<int> members = members_to_meet(s, left_behind);
    for (;;) {
        drop_departed(s.hosting.joiners, true);
        if (all_there(s, members) || Clock::now() >= deadline) break;
        lock.unlock();
        std::this_thread::sleep_for(kRound);
        lock.lock();
    }
    auto group_port = host::pick_free_port();  // as late as can be: nothing else takes it meanwhile
    if (!group_port) return group_port.error();
    std::vector<int> missing;
    std::vector<Joiner> taken = take_nodes(s, members, missing);
    s.held = s.hosting.waiting();
    for (int r : missing)
        spdlog::warn("rdzv: node {} ({}) did not meet the others again in time; the run goes on without it", r,
                     s.under.node_addrs.at(static_cast<size_t>(r)));
    const int n = static_cast<int>(taken.size()) + 1;
    if (n < s.req.nnodes.min) {
        const std::string why = "only " + std::to_string(n) + " of --nnodes MIN " + std::to_string(s.req.nnodes.min) +
                                " nodes met again for attempt " + std::to_string(attempt + 1);
        for (const Joiner& j : taken) (void)say_now(j, encode_refusal("the run ended: " + why));
        return Error{"rdzv: " + why, "see the missing nodes' output; start them again to run again"};
    }
    Met at;
    at.attempt = attempt + 1;
    at.restarts_used = restarts_used;
    at.assignment.rendezvous_port = *group_port;
    const NodeShare own = s.under.shares.empty() ? NodeShare{} : s.under.shares.front();
    auto a = assign(s.req, taken, s.advertise, s.under.master_port, own, s.terms.proofs, at);
    if (!a) return a.error();
    s.round = at.attempt;
    s.under = *a;
    spdlog::info("rdzv: {} node(s) met again for attempt {} ({} still waiting)", n, at.attempt, s.held.load());
    at.assignment = *a;
    return at;
}

Result<Met> rejoin_rendezvous(const LaunchRequest& req, const MeetingTerms& terms, const NodeAssignment& under, int met,
                              const NodeShare& own, const std::string& ip, int port, Clock::time_point deadline) {
    LaunchRequest r = req;
    r.node_rank = under.node_rank;
    return join_rendezvous(r, terms, ip, port, deadline, own, met);
}

}  // namespace dlaunch
