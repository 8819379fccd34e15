#include "dlaunch/group_run.hpp"

#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "dlaunch/clock.hpp"
#include "dlaunch/exit_codes.hpp"
#include "dlaunch/failure_policy.hpp"
#include "dlaunch/fd.hpp"
#include "dlaunch/host.hpp"
#include "dlaunch/side_thread.hpp"
#include "dlaunch/signals.hpp"

namespace dlaunch {
namespace {

// A connection the leader turned away (group_channel.hpp: said once per address per 10 s, then counted).
void say_refused(const group::Event& e) {
    spdlog::warn("group: {}", e.detail);
}

using group::Event;
using std::chrono::milliseconds;

constexpr milliseconds kTick{100};      // how often the leader serves the group while it waits (a member: tick()); a
                                        // member's join retries at most this far apart
constexpr milliseconds kHealthStep{5};  // how often the channel is served while this node's health check runs

MemberEnd end_of(const RunOutcome& o) {
    if (o.stopped_by_group) return MemberEnd::Stopped;
    return o.exit_code == exit_code::kSuccess ? MemberEnd::Succeeded : MemberEnd::Failed;
}

// The workers of this node, as the group's facts know a member.
std::vector<GroupMember> members_of(const GroupSetup& s, const std::vector<int>& ids) {
    std::vector<GroupMember> out;
    for (int id : ids) out.push_back({id, s.hosts.at(static_cast<size_t>(id)), MemberEnd::Succeeded, {}, ""});
    return out;
}

// Which of the group's `nodes` node ids `ids` names, for a look-up per node (a search per node made the leader's
// work at each attempt's start O(N²)).
std::vector<bool> named(const std::vector<int>& ids, size_t nodes) {
    std::vector<bool> out(nodes, false);
    for (int id : ids)
        if (id >= 0 && static_cast<size_t>(id) < nodes) out[static_cast<size_t>(id)] = true;
    return out;
}

// The stop signals (and --requeue's warning signal) while the group waits outside an attempt (joining,
// hearing the others end, idling as a spare): blocked and read here, so that Slurm ending the job makes
// this node leave the group as during an attempt (the executor reads them then), instead of killing the
// agent before anything is recorded. They stay blocked once the group is over: what it decided is carried
// out (ledger, requeue) and the agent exits with its code; a signal after that is not delivered (unless the
// nodes meet again through etcd: the agent unblocks them while it waits, agent_main.cpp).
class GroupSignals {
public:
    explicit GroupSignals(int warning_signal) : warning_(warning_signal) {
        sigset_t set;
        sigemptyset(&set);
        for (int s : stop_signals()) sigaddset(&set, s);
        if (warning_ > 0) sigaddset(&set, warning_);
        ::sigprocmask(SIG_BLOCK, &set, nullptr);
        fd_ = Fd(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
    }
    int warning() const { return warning_; }
    int fd() const { return fd_.get(); }  // readable once one came: a wait between attempts ends on it
    // A stop or the warning signal received since the last call, else 0.
    int received() {
        signalfd_siginfo info;
        if (::read(fd_.get(), &info, sizeof info) != sizeof info) return 0;
        const int signo = static_cast<int>(info.ssi_signo);
        spdlog::warn("group: received {} between attempts; this node leaves the group{}", signal_name(signo),
                     signo == warning_ ? " (the workers' last checkpoint stands)" : "");
        return signo;
    }

private:
    int warning_;
    Fd fd_;
};

// One side of the group: the leader or a member. Both listen to the group on every tick of the attempt
// (listen(): what came in, handled) and stop this node's workers once the attempt must end.
class Role {
public:
    Role(const GroupSetup& s, GroupSignals& signals) : s_(s), signals_(signals) {}
    virtual ~Role() = default;
    void begin(int attempt, const std::vector<int>& members, int restarts_used) {
        number_ = attempt;
        stop_ = false;
        active_ = std::find(members.begin(), members.end(), s_.member) != members.end();
        on_begin(members, restarts_used);
    }
    bool active() const { return active_; }  // false: a hot spare in this attempt
    // Readable when the group said something: the attempt's wait wakes on it (AttemptWatch::wake_fd).
    virtual int wake_fd() const = 0;
    // How often the attempt's wait asks watch() when nothing woke it (AttemptWatch::tick).
    virtual milliseconds tick() const { return kTick; }
    bool watch() {  // during the attempt: true when this node's workers must stop
        listen(milliseconds(0));
        if (!stop_) look_outside();
        return stop_;
    }
    // This node's first worker failure of the attempt, as it happens: the other nodes are stopped now.
    virtual void failing(const FailureRecord& first) = 0;
    virtual GroupDecision finish(const RunOutcome& own) = 0;
    // Before the attempt: the health gate. This node's check goes to the leader, whose answer is the attempt's
    // members (or, go false, the job's end). A stop signal, or the leader leaving, ends the wait (left_by()).
    virtual GateDecision gate(int attempt, const std::vector<int>& planned, int restarts_used) = 0;
    // The failures this node records for the attempt: the leader every node's, a member its own.
    virtual std::vector<FailureRecord> failures(const RunOutcome& own) const { return own.failures; }
    // Whether the leader heard this node's end and sums up the job (false on the leader itself).
    virtual bool summed_up_by_leader() const { return false; }
    // Whether this node records the attempt's end in the job's ledger and carries out a requeue: the
    // leader, or the successor of a lost leader.
    virtual bool records() const { return true; }
    // The signal this node left the group by while it waited outside an attempt (0: none).
    int left_by() const { return left_by_; }
    // This node leaves the group by `signo`: the leader tells the members first.
    virtual void leaving(int) {}
    // Between attempts: the restart backoff. Heartbeats go on; what the group says meanwhile is kept for
    // the next attempt; a member losing its leader ends the wait at once (ends_wait()). A stop signal, or the
    // leader leaving, ends it too (left_by()).
    void wait_to_restart(double seconds) {
        if (seconds <= 0) return;
        spdlog::info("group: waiting {}s before attempt {} (--restart-backoff)", seconds, number_ + 1);
        const auto until = Clock::now() + seconds_ms(seconds);
        while (!interrupted() && !cut_off()) {
            const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now());
            if (left <= milliseconds(0)) return;
            bool urgent = false;
            for (Event& e : poll(std::min(left, tick()))) {
                if (auto* leaving = std::get_if<group::Leaving>(&e.message)) {
                    leader_leaves(leaving->signal);
                    continue;
                }
                urgent = urgent || ends_wait(e);
                early_.push_back(std::move(e));
            }
            if (urgent) return;
        }
    }

protected:
    // What ends the backoff at once. A member: losing its leader. The leader waits on: a member lost
    // meanwhile is left out by the next attempt's health gate, and the members wait out the backoff too.
    virtual bool ends_wait(const Event& e) const {
        return e.kind == Event::Kind::Lost || e.kind == Event::Kind::Refused;
    }
    // Whether this node already lost the group's channel (a member whose leader closed it right after its
    // decision): the backoff ends at once, as when the loss comes during it.
    virtual bool cut_off() const { return false; }
    // This node's health check before `attempt`. One that may take long runs beside the channel: heartbeats go
    // on meanwhile (a check longer than --heartbeat-timeout would otherwise make this node lost) and what came
    // is left in `came`; a stop signal ends the wait (left_by()) and the check's thread is left to end with the
    // process. A quick one (the log directory alone) runs here.
    std::string own_health(int attempt, std::vector<Event>& came) {
        if (!s_.check_health) return "";
        if (health_is_quick()) return said_health(attempt, s_.check_health(attempt));
        std::packaged_task<std::string(int)> task(s_.check_health);
        auto check = task.get_future();
        side_thread(std::move(task), attempt).detach();
        // The future wakes this thread as soon as the check ends (often at once: the log directory alone); the
        // channel is served every kHealthStep meanwhile. Polling the channel for the step instead would make
        // every node's restart wait a step for a check long done.
        while (check.wait_for(kHealthStep) != std::future_status::ready) {
            if (interrupted()) return "";
            for (Event& e : poll(milliseconds(0))) came.push_back(std::move(e));
        }
        return said_health(attempt, check.get());
    }
    // No check, or one that only tries the log directory: it runs inline, and a member says it with its end.
    bool health_is_quick() const { return !s_.check_health || s_.health_check_is_quick; }
    static std::string said_health(int attempt, std::string why) {
        spdlog::debug("health: before attempt {}: {}", attempt, why.empty() ? "passed" : why);
        return why;
    }
    virtual void on_begin(const std::vector<int>&, int) {}
    virtual void look_outside() {}  // while the workers run: what the store says (the leader)
    virtual void listen(milliseconds wait) = 0;
    virtual std::vector<Event> poll(milliseconds wait) = 0;  // what came, not handled yet
    // Between attempts: true once a stop signal came (the wait ends; finish()'s answer is not used).
    bool interrupted() {
        if (left_by_ == 0) left_by_ = signals_.received();
        return left_by_ != 0;
    }
    // The leader leaves the group by `signo`: so does this node, without another attempt, saying why (its
    // own console shows no signal of its own).
    void leader_leaves(int signo) {
        if (left_by_ != 0) return;
        left_by_ = signo;
        spdlog::warn("group: the leader on {} left the group on {}; this node leaves with it", s_.hosts.front(),
                     signal_name(signo));
    }

    const GroupSetup& s_;
    GroupSignals& signals_;
    int left_by_ = 0;
    // What came before the attempt it belongs to began (members' words while the others still joined, the
    // group's during a restart's backoff): handled when it begins.
    std::vector<Event> early_;
    int number_ = 0;  // the attempt
    bool stop_ = false;
    bool active_ = true;
};

class Leading : public Role {
public:
    Leading(const GroupSetup& s, GroupSignals& signals, group::Leader channel)
        : Role(s, signals), channel_(std::move(channel)) {}
    Leading(const Leading&) = delete;
    Leading& operator=(const Leading&) = delete;
    // Refusals still counted when the run ends are said too: none is lost. So is a decision kept for the next
    // gate when no gate came (an exception on the way).
    ~Leading() override {
        if (unsaid_) channel_.broadcast(*unsaid_);
        for (const std::string& line : channel_.unsaid_refusals()) spdlog::warn("group: {}", line);
    }

    Status wait_for_members();
    void left_before_start(int member, const std::string& why);
    void failing(const FailureRecord& first) override {
        if (auto why = attempt_->failing(0, root_cause_detail({first})); !why.empty()) stop_all(why);
    }
    void leaving(int signo) override { say(group::Leaving{signo}); }
    GroupDecision finish(const RunOutcome& own) override;
    GateDecision gate(int attempt, const std::vector<int>& planned, int restarts_used) override;
    std::vector<FailureRecord> failures(const RunOutcome&) const override { return group_failures(attempt_->facts()); }

private:
    bool take_health(Event& e, int attempt, std::set<int>& heard, std::map<int, std::string>& failing);
    GateFacts gate_facts(int attempt, const std::vector<int>& planned, int restarts_used,
                         std::map<int, std::string> failing) const;
    void on_begin(const std::vector<int>& members, int restarts_used) override {
        next_health_.clear();
        std::vector<int> spares;
        const std::vector<bool> in_attempt = named(members, s_.hosts.size());
        for (int id = 0; id < static_cast<int>(s_.hosts.size()); ++id)
            if (!in_attempt[static_cast<size_t>(id)] && !gone_.contains(id)) spares.push_back(id);
        std::vector<std::string> lost_before;
        for (int id : gone_) lost_before.push_back(s_.hosts.at(static_cast<size_t>(id)));
        attempt_.emplace(number_, members_of(s_, members), members_of(s_, spares), restarts_used, lost_before);
        scale_up_.reset();
        handle(std::exchange(early_, {}));
    }
    void listen(milliseconds wait) override { handle(channel_.poll(wait)); }
    std::vector<Event> poll(milliseconds wait) override { return channel_.poll(wait); }
    int wake_fd() const override { return channel_.wake_fd(); }
    bool ends_wait(const Event&) const override { return false; }
    void look_outside() override {
        if (!s_.store || scale_up_ || attempt_->any_ended()) return;  // an ending attempt is not stopped
        const int waiting = s_.store->waiting(false);
        scale_up_ = decide_store_scale_up(attempt_->facts(), s_.policy, waiting);
        if (scale_up_) stop_all(std::to_string(waiting) + (waiting == 1 ? " node waits" : " nodes wait") + " to join");
    }
    void handle(const std::vector<Event>& events);
    void stop_all(const std::string& why);
    void say(const group::Message& message);
    bool every_node_said_health() const {
        for (int id = 1; id < static_cast<int>(s_.hosts.size()); ++id)
            if (!gone_.contains(id) && !next_health_.contains(id)) return false;
        return true;
    }

    group::Leader channel_;
    std::optional<GroupAttempt> attempt_;
    std::set<int> gone_;                     // members lost in earlier attempts: never asked back
    std::map<int, std::string> lost_why_;    // of members lost outside an attempt (found by the gate)
    std::optional<GroupDecision> scale_up_;  // this attempt was stopped to take nodes waiting in the store
    Clock::time_point stop_at_;
    std::map<int, std::string> next_health_;  // the members' checks before the next attempt, said with their end
    std::optional<group::Decided> unsaid_;    // a restart without a wait: said with the next attempt's gate
};

Status Leading::wait_for_members() {
    std::vector<bool> joined(s_.hosts.size(), false);
    joined[0] = true;
    size_t count = 1;  // of joined: a look at every member per wake-up made joining O(N²)
    auto join = [&](int member) {
        if (!joined.at(static_cast<size_t>(member))) ++count;
        joined.at(static_cast<size_t>(member)) = true;
    };
    const auto deadline = Clock::now() + seconds_ms(s_.join_seconds);
    while (count < joined.size() && !interrupted()) {
        const std::string within = "within " + std::to_string(static_cast<int>(s_.join_seconds)) + " s";
        if (Clock::now() >= deadline) {
            std::string missing;
            for (size_t i = 0; i < joined.size(); ++i)
                if (!joined[i]) missing += (missing.empty() ? "" : ", ") + s_.hosts[i];
            if (!s_.store) return Error{"group: the agents on " + missing + " did not join " + within, s_.missing_hint};
            for (size_t i = 0; i < joined.size(); ++i)  // with a store, the gate leaves them out when MIN allows
                if (!joined[i]) left_before_start(static_cast<int>(i), "did not join the group " + within);
            break;
        }
        for (const Event& e : channel_.poll(kTick)) {
            if (e.kind == Event::Kind::Joined) join(e.member);
            if (e.kind == Event::Kind::Received) early_.push_back(e);  // for the first attempt, once it begins
            if (e.kind == Event::Kind::Refused) say_refused(e);
            if (e.kind == Event::Kind::Lost && !s_.store)
                return Error{"group: the agent on " + s_.hosts.at(static_cast<size_t>(e.member)) +
                                 " left before the first attempt (" + e.detail + ")",
                             "see that node's output"};
            if (e.kind == Event::Kind::Lost) {
                join(e.member);
                left_before_start(e.member, "left before the first attempt (" + e.detail + ")");
            }
        }
    }
    spdlog::debug("group: {} agents joined", joined.size());
    return Ok{};
}

// A member that met the others in the store (a node that came late, say) yet did not join the group, or left
// it before the first attempt: lost, for the gate to leave out when --nnodes MIN allows, rather than ending
// the run of every node.
void Leading::left_before_start(int member, const std::string& why) {
    spdlog::warn("group: the agent on {} {}", s_.hosts.at(static_cast<size_t>(member)), why);
    gone_.insert(member);
    lost_why_[member] = why;
}

// A node's health report (or its loss) before `attempt`: true when the event was the gate's.
bool Leading::take_health(Event& e, int attempt, std::set<int>& heard, std::map<int, std::string>& failing) {
    if (e.kind == Event::Kind::Refused) {
        say_refused(e);
        return true;
    }
    if (e.kind == Event::Kind::Lost) {
        gone_.insert(e.member);
        lost_why_[e.member] = "lost: " + e.detail;
        return true;
    }
    auto* health = e.kind == Event::Kind::Received ? std::get_if<group::Health>(&e.message) : nullptr;
    if (!health || health->attempt != attempt) return false;
    heard.insert(health->member);
    if (!health->why.empty()) failing[health->member] = health->why;
    return true;
}

GateFacts Leading::gate_facts(int attempt, const std::vector<int>& planned, int restarts_used,
                              std::map<int, std::string> failing) const {
    GateFacts f;
    f.attempt = attempt;
    f.restarts_used = restarts_used;
    f.planned = members_of(s_, planned);
    const std::vector<bool> in_planned = named(planned, s_.hosts.size());
    for (int id = 0; id < static_cast<int>(s_.hosts.size()); ++id) {
        const bool in_plan = in_planned[static_cast<size_t>(id)];
        if (gone_.contains(id)) {
            if (in_plan) failing[id] = lost_why_.contains(id) ? lost_why_.at(id) : "lost";
            if (!in_plan) f.lost_before.push_back(s_.hosts.at(static_cast<size_t>(id)));
        } else if (!in_plan) {
            f.spares.push_back({id, s_.hosts.at(static_cast<size_t>(id)), MemberEnd::Succeeded, {}, ""});
        }
    }
    f.failing = std::move(failing);
    return f;
}

GateDecision Leading::gate(int attempt, const std::vector<int>& planned, int restarts_used) {
    std::set<int> heard{0};
    std::map<int, std::string> failing;
    if (std::string why = own_health(attempt, early_); !why.empty()) failing[0] = why;
    std::vector<Event> kept;  // the rest of what came early, for the attempt
    for (Event& e : std::exchange(early_, {}))
        if (!take_health(e, attempt, heard, failing)) kept.push_back(std::move(e));
    if (interrupted()) return {};
    for (Event& e : channel_.poll(milliseconds(0)))  // a node lost since its end is left out here, not in the attempt
        if (!take_health(e, attempt, heard, failing)) kept.push_back(std::move(e));
    const auto bound = seconds_ms(s_.health_seconds) + s_.times.lost_after;
    const auto deadline = Clock::now() + bound;
    auto missing = [&] {
        std::vector<int> out;
        for (int id = 0; id < static_cast<int>(s_.hosts.size()); ++id)
            if (!heard.contains(id) && !gone_.contains(id)) out.push_back(id);
        return out;
    };
    while (!missing().empty()) {
        if (interrupted()) return {};
        if (Clock::now() >= deadline) {
            for (int id : missing())
                failing[id] = "no health report within " + std::to_string(bound.count() / 1000) + " s";
            break;
        }
        for (Event& e : channel_.poll(kTick))
            if (!take_health(e, attempt, heard, failing)) kept.push_back(std::move(e));
    }
    early_ = std::move(kept);
    const GateFacts facts = gate_facts(attempt, planned, restarts_used, failing);
    GateDecision d = decide_gate(facts, s_.policy);
    if (s_.store && !facts.failing.empty())  // a node waiting in the store may take a failing (or lost) one's place
        if (auto swap = decide_gate_with_waiting_nodes(facts, d, s_.policy, s_.store->waiting(true))) {
            d = GateDecision{false, {}, {}, *swap, false};
            std::set<int> behind(d.end.left_behind.begin(), d.end.left_behind.end());
            behind.insert(gone_.begin(), gone_.end());  // and every node lost so far
            d.end.left_behind.assign(behind.begin(), behind.end());
            say(group::Decided{attempt, d.end});  // every node says it as it meets again
            return d;
        }
    if (d.go) {
        for (const LeftOut& l : d.left_out)
            spdlog::warn("health: attempt {} runs without {}: {} (--no-health-check turns the gate off)", attempt,
                         l.host, l.why);
        say(group::Gate{attempt, d.members, d.left_out});
        return d;
    }
    say(group::Decided{attempt, d.end});
    spdlog::error("group: {}", d.end.summary);
    return d;
}

void Leading::handle(const std::vector<Event>& events) {
    for (const Event& e : events) {
        std::string why;
        if (e.kind == Event::Kind::Refused) say_refused(e);
        if (e.kind == Event::Kind::Lost) why = attempt_->lost(e.member, e.detail);
        if (e.kind == Event::Kind::Received)
            if (auto* ended = std::get_if<group::Ended>(&e.message); ended && ended->attempt == number_) {
                why = attempt_->ended(ended->member, ended->end, ended->failures);
                if (ended->next_health) next_health_[ended->member] = *ended->next_health;
            }
        if (e.kind == Event::Kind::Received)
            if (auto* f = std::get_if<group::Failing>(&e.message); f && f->attempt == number_)
                why = attempt_->failing(f->member, f->why);
        if (!why.empty()) stop_all(why);
    }
}

void Leading::stop_all(const std::string& why) {
    spdlog::warn("group: attempt {}: {}; stopping every node", number_, why);
    say(group::Stop{number_, why});
    stop_ = true;
    stop_at_ = Clock::now();
}

// A restart's decision not said yet goes first, in the same write.
void Leading::say(const group::Message& message) {
    if (!unsaid_) return channel_.broadcast(message);
    channel_.broadcast(std::vector<group::Message>{*std::exchange(unsaid_, std::nullopt), message});
}

GroupDecision Leading::finish(const RunOutcome& own) {
    std::vector<FailureRecord> failures = own.failures;
    if (auto why = attempt_->ended(0, end_of(own), failures); !why.empty()) stop_all(why);
    const auto overdue = seconds_ms(s_.grace_seconds) + s_.times.lost_after;
    while (!attempt_->complete()) {
        if (interrupted()) return {};
        listen(kTick);
        if (stop_ && Clock::now() - stop_at_ > overdue)
            attempt_->stop_overdue("did not end within " + std::to_string(overdue.count() / 1000) + " s of the stop");
    }
    for (const auto* list : {&attempt_->facts().active, &attempt_->facts().spares})
        for (const GroupMember& m : *list)
            if (m.end == MemberEnd::Lost) gone_.insert(m.id);
    GroupDecision d = decide_group_attempt(attempt_->facts(), s_.policy);
    if (scale_up_)
        d = decide_after_scale_up(attempt_->facts(), s_.policy, *scale_up_);
    else if (s_.store && d.kind != GroupDecision::Kind::Done)
        d = decide_with_waiting_nodes(attempt_->facts(), s_.policy, s_.store->waiting(true));
    if (d.kind == GroupDecision::Kind::MeetAgain) d.left_behind.assign(gone_.begin(), gone_.end());  // all lost so far
    if (d.kind == GroupDecision::Kind::Restart && d.wait_seconds <= 0) {
        // The checks said with the members' ends are the next gate's (those members do not check again). When
        // every node said one, the restart takes one round: the decision goes with the gate, in one write.
        for (const auto& [member, why] : next_health_)
            early_.push_back(Event{Event::Kind::Received, member, group::Health{member, number_ + 1, why}, "", false});
        if (every_node_said_health())
            unsaid_ = group::Decided{number_, d};
        else  // a spare, or a node whose check may take long, checks once it has the decision
            say(group::Decided{number_, d});
    } else {
        say(group::Decided{number_, d});
    }
    if (d.kind == GroupDecision::Kind::Done)
        spdlog::debug("group: {}", d.summary);
    else if (d.kind != GroupDecision::Kind::MeetAgain)  // every node says that one as it meets again (agent_main)
        spdlog::warn("group: {}", d.summary);
    return d;
}

class Following : public Role {
public:
    Following(const GroupSetup& s, GroupSignals& signals, group::Member channel)
        : Role(s, signals), channel_(std::move(channel)) {}

    void failing(const FailureRecord& first) override {
        if (active_ && !decision_) channel_.send(group::Failing{s_.member, number_, root_cause_detail({first})});
    }
    GroupDecision finish(const RunOutcome& own) override;
    GateDecision gate(int attempt, const std::vector<int>& planned, int restarts_used) override;
    bool summed_up_by_leader() const override { return summed_up_; }
    bool records() const override { return records_; }

private:
    void on_begin(const std::vector<int>& members, int restarts_used) override;
    void without_leader(const Event& lost);
    void gate_lost(const Event& e, GateDecision& d);
    bool take_answer(Event& e, int attempt, const std::string& why, GateDecision& d);
    // A stop signal ends a member's wait at once, the leader's word too: nothing else needs it awake.
    void listen(milliseconds wait) override { handle(channel_.poll(wait, signals_.fd())); }
    std::vector<Event> poll(milliseconds wait) override { return channel_.poll(wait, signals_.fd()); }
    int wake_fd() const override { return channel_.wake_fd(); }
    // What the leader says wakes the attempt's wait (wake_fd), and a wait between attempts (poll()); the tick
    // only keeps the heartbeats going (one per tick: Member::poll) and finds a silent leader, so a beat will
    // do. A member woken every kTick cost a 1,024-agent machine a fifth of its CPU while every worker idled,
    // and between attempts two wake-ups per member per restart, more as the leader took longer to hear every
    // node's end; every half beat, a third more wake-ups than a beat (the leader's beats wake it too).
    milliseconds tick() const override { return std::max(kTick, s_.times.beat); }
    bool cut_off() const override { return leader_lost_.has_value(); }
    void handle(const std::vector<Event>& events);
    void apply(const group::Message& message);

    group::Member channel_;
    std::optional<GroupDecision> decision_;
    std::vector<group::Message> later_;  // a later attempt's messages, read early: the next gate() takes them
    std::optional<Event> leader_lost_;   // how the channel to the leader ended (none while it is open)
    std::vector<int> members_;           // this attempt's
    int restarts_used_ = 0;
    bool summed_up_ = true;
    bool records_ = false;
    int health_said_for_ = -1;  // the attempt whose health check went with this node's end (a quick one)
    std::string health_said_;
};

// What the gate read past its answer applies now (gate() has already taken later_, so nothing else waits).
void Following::on_begin(const std::vector<int>& members, int restarts_used) {
    members_ = members;
    restarts_used_ = restarts_used;
    handle(std::exchange(early_, {}));
}

void Following::apply(const group::Message& message) {
    const int attempt = std::visit(
        [](const auto& m) {
            if constexpr (requires { m.attempt; })
                return m.attempt;
            else
                return -1;
        },
        message);
    if (attempt > number_) later_.push_back(message);
    if (attempt != number_) return;
    if (auto* stop = std::get_if<group::Stop>(&message); stop && active_) {
        spdlog::info("group: the leader stops attempt {}: {}", number_, stop->why);
        stop_ = true;
    }
    if (auto* decided = std::get_if<group::Decided>(&message)) decision_ = decided->decision;
}

void Following::handle(const std::vector<Event>& events) {
    for (const Event& e : events) {
        if (e.kind == Event::Kind::Lost || e.kind == Event::Kind::Refused)
            leader_lost_ = e;
        else if (auto* leaving = std::get_if<group::Leaving>(&e.message))
            leader_leaves(leaving->signal), stop_ = true;
        else
            apply(e.message);
    }
    // The leader ends its run once it sent a decision (or said it leaves): its connection closing then is
    // no loss until this node needs the leader again (the next attempt's decision).
    if (!leader_lost_ || decision_ || left_by_ != 0) return;
    without_leader(*leader_lost_);
}

// The group cannot go on without its leader: decide_without_leader() says what this node does.
void Following::without_leader(const Event& lost) {
    const bool refused = lost.kind == Event::Kind::Refused;
    spdlog::error("group: {}{}", refused ? "refused: " : "lost the leader: ", lost.detail);
    LeaderLoss loss{number_, s_.member, members_, s_.hosts.front(), lost.detail, lost.silent, restarts_used_, refused};
    LeaderLossDecision d = decide_without_leader(loss, s_.policy);
    decision_ = d.decision;
    records_ = d.records_here;
    summed_up_ = false;
    stop_ = true;
}

// The leader is gone before it answered: no attempt starts without it; decide_without_leader() says what this
// node does.
void Following::gate_lost(const Event& e, GateDecision& d) {
    without_leader(e);
    d.go = false;
    d.leader_lost = true;
    d.end = *decision_;
}

// One event while this node waits for the gate's answer (`why`: what its own check said): true once answered.
// What comes after the answer is the attempt's own (a stop, a decision), handled when it begins.
bool Following::take_answer(Event& e, int attempt, const std::string& why, GateDecision& d) {
    if (e.kind == Event::Kind::Lost || e.kind == Event::Kind::Refused) {
        gate_lost(e, d);
    } else if (auto* leaving = std::get_if<group::Leaving>(&e.message)) {
        leader_leaves(leaving->signal);
    } else if (auto* gate = std::get_if<group::Gate>(&e.message); gate && gate->attempt == attempt) {
        d.members = gate->members;
        d.left_out = gate->left_out;
    } else if (auto* decided = std::get_if<group::Decided>(&e.message); decided && decided->attempt == attempt) {
        d.go = false;
        d.end = decided->decision;
        const std::vector<int>& behind = decided->decision.left_behind;
        if (std::find(behind.begin(), behind.end(), s_.member) != behind.end())  // for its record
            d.left_out.push_back(
                {attempt, s_.hosts.at(static_cast<size_t>(s_.member)), why.empty() ? decided->decision.cause : why});
    } else {
        early_.push_back(std::move(e));
        return false;
    }
    return true;
}

// This node's check goes to the leader (or went with this node's end: a restart without a wait, whose gate
// came with the decision); the leader's answer comes back. A leader lost before it answered: no attempt
// starts, decide_without_leader() says what this node does.
GateDecision Following::gate(int attempt, const std::vector<int>& planned, int restarts_used) {
    number_ = attempt;  // what a lost leader's decision speaks of
    members_ = planned;
    restarts_used_ = restarts_used;
    GateDecision d;
    d.members = planned;
    const bool said = health_said_for_ == attempt;
    std::string why = said ? health_said_ : "";
    bool answered = false;
    auto take = [&](Event& e) {
        if (answered)
            early_.push_back(std::move(e));
        else
            answered = take_answer(e, attempt, why, d);
    };
    for (group::Message& m : std::exchange(later_, {})) {  // read with the last decision (a restart without a wait)
        Event e{Event::Kind::Received, -1, std::move(m), "", false};
        take(e);
    }
    if (leader_lost_ && !answered) {  // its connection closed right after its last decision: it is gone
        gate_lost(*leader_lost_, d);
        return d;
    }
    std::vector<Event> came;
    if (!said && !answered) {
        why = own_health(attempt, came);
        if (left_by_ != 0) return d;
        channel_.send(group::Health{s_.member, attempt, why});
    }
    for (Event& e : std::exchange(early_, {})) take(e);  // the answer may have come during the backoff
    for (Event& e : came) take(e);
    while (!interrupted() && !answered)  // a stop signal that came meanwhile ends the wait, or the answer already here
        for (Event& e : poll(tick())) take(e);
    for (const LeftOut& l : d.left_out)
        if (d.go && l.host == s_.hosts.at(static_cast<size_t>(s_.member)))  // else it is left behind (agent)
            spdlog::warn(
                "health: this node failed the health check before attempt {} ({}); the group runs it "
                "without this node, which waits as a spare",
                attempt, l.why);
    return d;
}

// This node's end goes to the leader, with its health check before the next attempt when that is quick: a
// restart without a wait then needs no second round (the leader answers with the decision and the gate).
GroupDecision Following::finish(const RunOutcome& own) {
    health_said_for_ = -1;
    if (!decision_ && active_) {
        group::Ended ended{s_.member, number_, end_of(own), own.failures, std::nullopt};
        if (health_is_quick()) {
            std::vector<Event> none;
            health_said_ = own_health(number_ + 1, none);
            ended.next_health = health_said_;
            health_said_for_ = number_ + 1;
        }
        channel_.send(ended);
    }
    while (!decision_) {
        if (interrupted()) return {};
        listen(tick());
    }
    GroupDecision d = std::move(*decision_);
    decision_.reset();
    if (d.kind != GroupDecision::Kind::Restart || d.wait_seconds > 0) health_said_for_ = -1;  // checked again
    if (d.kind == GroupDecision::Kind::Restart && active_ &&
        std::find(d.next_members.begin(), d.next_members.end(), s_.member) == d.next_members.end()) {
        d.kind = GroupDecision::Kind::GiveUp;
        d.exit_code = exit_code::kGroupFailure;
        d.summary = "the group goes on without this node (the leader did not hear it in time)";
        summed_up_ = false;
    }
    spdlog::debug("group: {}", d.summary);
    return d;
}

Result<std::unique_ptr<Role>> lead(const GroupSetup& s, int first_attempt, GroupSignals& signals) {
    const uint32_t uid = ::getuid();
    const int expected = static_cast<int>(s.hosts.size());
    group::Admit admit = [&s, uid, expected, first_attempt](const group::Hello& hello) -> group::Admission {
        auto sender = s.auth.verify(hello);
        if (!sender) return {sender.error().what, false};
        return group::admission(hello, *sender, uid, s.run_id, expected, first_attempt);
    };
    auto channel = s.listener && s.listener->get() >= 0
                       ? group::Leader::adopt(std::move(*s.listener), admit, s.times, expected)
                       : group::Leader::listen(host::listen_address(s.leader_addr), s.port, admit, s.times, expected);
    if (!channel) return channel.error();
    auto leading = std::make_unique<Leading>(s, signals, std::move(*channel));
    if (auto joined = leading->wait_for_members(); !joined) return joined.error();
    return std::unique_ptr<Role>(std::move(leading));
}

constexpr milliseconds kAskStoreEvery{1000};
constexpr const char* kLeaderGone = "its lease in etcd ended before the group formed";

// Reaches the leader, which may not listen yet: retried until the join time is over, the store says the
// leader is gone (an Error of kind PeerGone), or a stop signal came (`left_by`: then the Error says so).
// The leader listens a few milliseconds after the rendezvous: the first tries come 10 ms apart, doubling up to
// kTick (a fixed kTick would delay most groups' first worker by a tick).
Result<std::unique_ptr<Role>> follow(const GroupSetup& s, int first_attempt, GroupSignals& signals, int& left_by) {
    const group::Hello hello{s.run_id, s.member, s.hosts.at(static_cast<size_t>(s.member)), "", first_attempt, ""};
    const auto deadline = Clock::now() + seconds_ms(s.join_seconds);
    auto ask_store_at = Clock::now() + kAskStoreEvery;
    milliseconds retry{10};
    for (;;) {
        group::ChannelTimes times = s.times;  // turned away unheard by a flooded leader: again, until the deadline
        times.rejoin_within =
            std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
        if (s.leader_takes_socket) times.welcome_within = times.rejoin_within;  // in node 0's backlog till it serves
        auto channel = group::Member::join(s.leader_addr, s.port, hello, times, s.auth.sign, s.own_addr);
        if (channel) return std::unique_ptr<Role>(std::make_unique<Following>(s, signals, std::move(*channel)));
        if (Clock::now() >= deadline) return channel.error();
        if (s.store && Clock::now() >= ask_store_at) {
            if (s.store->leader_gone())
                return Error{"group: the leader on " + s.hosts.front() + " is gone", kLeaderGone, ErrorKind::PeerGone};
            ask_store_at = Clock::now() + kAskStoreEvery;
        }
        if ((left_by = signals.received()) != 0) return Error{"group: left before joining", ""};
        std::this_thread::sleep_for(retry);
        retry = std::min(2 * retry, kTick);
    }
}

// This node leaves the group: a signal ended its attempt (signo 0: `own` says how), or came while it waited
// outside one (leave_between_attempts). The leader tells the members first.
GroupEnd& leave(GroupEnd& end, Role* role, const RunOutcome& own, int signo, int warning) {
    end.outcome.failures.insert(end.outcome.failures.end(), own.failures.begin(), own.failures.end());
    end.kind = GroupEnd::Kind::Left;
    end.outcome.stop_signal = own.stop_signal;
    end.outcome.exit_code = own.exit_code;
    end.outcome.checkpointed = own.checkpointed;
    end.outcome.running_at_stop = own.running_at_stop;
    if (signo != 0) leave_between_attempts(end.outcome, signo, warning);
    if (role) role->leaving(end.outcome.checkpointed ? warning : end.outcome.stop_signal);
    return end;
}

// The attempt did not start: the health gate refused it (the job ends or is requeued), or, on a member,
// the leader was lost before it answered.
void not_started(GroupEnd& end, const GateDecision& gate) {
    end.decision = gate.end;
    end.outcome.restarts = gate.end.restarts_used;
    if (gate.leader_lost) return;
    end.outcome.not_ready = gate.end.cause;
    end.outcome.end_cause = "attempt " + std::to_string(end.attempt) + ": " + gate.end.cause;
}

// An attempt that ended with no worker failing in it (a node lost): what ended it is the run's root cause,
// for the failure summary (RunOutcome::end_cause).
void name_the_cause_without_a_worker(GroupEnd& end) {
    if (!end.outcome.failed || !end.outcome.end_cause.empty() || end.decision.cause.empty()) return;
    const auto& failures = end.outcome.failures;
    if (std::any_of(failures.begin(), failures.end(),
                    [&](const FailureRecord& r) { return r.failure.attempt == end.attempt && r.failure.root_cause; }))
        return;
    end.outcome.end_cause = "attempt " + std::to_string(end.attempt) + ": " + end.decision.cause;
}

// The leader, gone from the store before this member reached it: decide_without_leader() says what this node
// does. Meeting again is the group's end here; anything else ends the node with the error.
Result<GroupEnd> gone_before_forming(GroupEnd& end, const GroupSetup& s, const Error& gone) {
    LeaderLoss loss{end.attempt, s.member, end.members, s.hosts.front(), gone.hint, true, s.restarts_used};
    end.decision = decide_without_leader(loss, s.policy).decision;
    if (end.decision.kind != GroupDecision::Kind::MeetAgain)
        return Error{gone.what + " (" + gone.hint + "): " + end.decision.summary, "see that node's output"};
    return end;
}

}  // namespace

Result<GroupEnd> run_group(const GroupSetup& setup, int first_attempt, const RunGroupAttempt& run_attempt,
                           const OnRestart& on_restart) {
    GroupSignals signals(setup.warning_signal);
    GroupEnd end;
    end.attempt = first_attempt;
    end.outcome.max_restarts = setup.policy.max_restarts;
    end.outcome.run_id = setup.run_id;
    for (int id = 0; id < setup.first_nodes; ++id) end.members.push_back(id);
    int left_by = 0;
    auto role =
        setup.member == 0 ? lead(setup, first_attempt, signals) : follow(setup, first_attempt, signals, left_by);
    const int warning = signals.warning();
    if (!role && left_by != 0) return leave(end, nullptr, {}, left_by, warning);
    if (!role && role.error().kind == ErrorKind::PeerGone) return gone_before_forming(end, setup, role.error());
    if (!role) return role.error();
    if ((*role)->left_by() != 0) return leave(end, role->get(), {}, (*role)->left_by(), warning);
    int restarts_used = setup.restarts_used;
    for (end.attempt = first_attempt;; ++end.attempt) {
        GateDecision gate = (*role)->gate(end.attempt, end.members, restarts_used);
        if ((*role)->left_by() != 0) return leave(end, role->get(), {}, (*role)->left_by(), warning);
        end.outcome.left_out.insert(end.outcome.left_out.end(), gate.left_out.begin(), gate.left_out.end());
        if (!gate.go) {
            not_started(end, gate);
            break;
        }
        end.members = gate.members;
        (*role)->begin(end.attempt, end.members, restarts_used);
        RunOutcome own;  // a spare's: nothing ran
        if (!(*role)->active())
            spdlog::info("group: attempt {}: {} waits as a hot spare", end.attempt,
                         setup.hosts.at(static_cast<size_t>(setup.member)));
        else
            own = run_attempt(
                end.attempt, end.members,
                AttemptWatch{(*role)->tick(), [&] { return (*role)->watch(); },
                             [&](const FailureRecord& first) { (*role)->failing(first); }, (*role)->wake_fd()});
        for (FailureRecord& f : own.failures) f.failure.attempt = end.attempt;
        for (AttemptSpan& span : own.attempts) end.outcome.attempts.push_back({end.attempt, span.start, span.end});
        end.outcome.log_errors.insert(end.outcome.log_errors.end(), own.log_errors.begin(), own.log_errors.end());
        if (!own.run_id.empty()) end.outcome.run_id = own.run_id;  // a spare ran nothing
        if (own.stop_signal != 0 || own.checkpointed) return leave(end, role->get(), own, 0, warning);
        end.decision = (*role)->finish(own);
        if ((*role)->left_by() != 0) return leave(end, role->get(), own, (*role)->left_by(), warning);
        const auto recorded = (*role)->failures(own);
        end.outcome.failures.insert(end.outcome.failures.end(), recorded.begin(), recorded.end());
        restarts_used = end.outcome.restarts = end.decision.restarts_used;
        if (end.decision.kind != GroupDecision::Kind::Restart) break;
        if (on_restart) on_restart(end.attempt, end.members, end.decision, recorded);
        end.members = end.decision.next_members;
        (*role)->wait_to_restart(end.decision.wait_seconds);
        if ((*role)->left_by() != 0) {
            end.outcome.restarts = end.decision.restarts_used - 1;  // the stop came before the restart began
            return leave(end, role->get(), {}, (*role)->left_by(), warning);
        }
    }
    end.summed_up_by_leader = (*role)->summed_up_by_leader();
    end.records = (*role)->records();
    end.outcome.led_group = end.records;
    end.outcome.exit_code = end.decision.exit_code;
    end.outcome.failed = end.decision.kind != GroupDecision::Kind::Done;
    name_the_cause_without_a_worker(end);
    return end;
}

}  // namespace dlaunch
