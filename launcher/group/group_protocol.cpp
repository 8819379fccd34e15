#include "dlaunch/group_protocol.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string_view>

namespace dlaunch::group {
namespace {

using nlohmann::json;

constexpr std::array<std::pair<MemberEnd, const char*>, 4> kEnds{{{MemberEnd::Succeeded, "succeeded"},
                                                                  {MemberEnd::Failed, "failed"},
                                                                  {MemberEnd::Stopped, "stopped"},
                                                                  {MemberEnd::Lost, "lost"}}};
constexpr std::array<std::pair<GroupDecision::Kind, const char*>, 5> kKinds{
    {{GroupDecision::Kind::Done, "done"},
     {GroupDecision::Kind::Restart, "restart"},
     {GroupDecision::Kind::Requeue, "requeue"},
     {GroupDecision::Kind::GiveUp, "give-up"},
     {GroupDecision::Kind::MeetAgain, "meet-again"}}};

template <class E, size_t N>
const char* name_of(const std::array<std::pair<E, const char*>, N>& names, E value) {
    for (auto& [v, name] : names)
        if (v == value) return name;
    return "";
}

template <class E, size_t N>
E value_of(const std::array<std::pair<E, const char*>, N>& names, const std::string& name) {
    for (auto& [v, n] : names)
        if (name == n) return v;
    throw std::invalid_argument("unknown value '" + name + "'");
}

// A JSON integer that an int holds; anything else (a float such as 1e300, an unsigned beyond INT_MAX, a
// string) is malformed, never converted.
int int_of(const json& v) {
    const bool fits = v.is_number_unsigned()
                          ? v.get<uint64_t>() <= static_cast<uint64_t>(INT_MAX)
                          : v.is_number_integer() && v.get<int64_t>() >= INT_MIN && v.get<int64_t>() <= INT_MAX;
    if (!fits) throw std::invalid_argument("a number is not an integer an int holds: " + v.dump().substr(0, 40));
    return static_cast<int>(v.get<int64_t>());
}

int int_at(const json& j, const char* key) {
    return int_of(j.at(key));
}

// A list of node ids as runs: [0,1,2,3,5,7,8] is [[0,3],5,[7,8]]. A group's lists are mostly one run (every
// node but those lost), so a gate or a decision sent to N nodes is O(N) bytes in all, not O(N²). Only node
// ranks (0 to kMaxListed - 1) form runs; any other id goes alone, as runs_from() reads it.
json runs_json(const std::vector<int>& ids) {
    auto rank = [](int id) { return id >= 0 && static_cast<size_t>(id) < kMaxListed; };
    json out = json::array();
    for (size_t i = 0; i < ids.size();) {
        size_t last = i;
        while (last + 1 < ids.size() && rank(ids[last]) && rank(ids[last + 1]) && ids[last + 1] == ids[last] + 1)
            ++last;
        if (last == i)
            out.push_back(ids[i]);
        else
            out.push_back(json::array({ids[i], ids[last]}));
        i = last + 1;
    }
    return out;
}

// runs_json() read back: a run [first,last] has 0 <= first <= last < kMaxListed (a node rank: --nnodes is at
// most that), a lone id is any int; kMaxListed ids in all.
std::vector<int> runs_from(const json& j) {
    if (!j.is_array()) throw std::invalid_argument("a list of node ids is not an array");
    std::vector<int> ids;
    for (const json& run : j) {
        int first = 0, last = 0;
        if (run.is_array()) {
            if (run.size() == 2) first = int_of(run[0]), last = int_of(run[1]);
            if (run.size() != 2 || first < 0 || last < first || static_cast<size_t>(last) >= kMaxListed)
                throw std::invalid_argument("a run of node ids is not [first,last] with 0 <= first <= last < " +
                                            std::to_string(kMaxListed));
        } else {
            first = last = int_of(run);
        }
        if (static_cast<size_t>(static_cast<int64_t>(last) - first) >= kMaxListed - ids.size())
            throw std::invalid_argument("a list names more than " + std::to_string(kMaxListed) + " nodes");
        if (first == last) {  // a lone id may be any int: iota would step past INT_MAX
            ids.push_back(first);
            continue;
        }
        const size_t at = ids.size();  // a run of 1,024 ids in one step: every member reads two per restart
        ids.resize(at + static_cast<size_t>(last - first) + 1);
        std::iota(ids.begin() + static_cast<std::ptrdiff_t>(at), ids.end(), first);
    }
    return ids;
}

json to_json(const Hello& m) {
    return {
        {"type", "hello"},      {"run", m.run_id}, {"member", m.member}, {"host", m.host}, {"credential", m.credential},
        {"attempt", m.attempt}, {"nonce", m.nonce}};
}
json to_json(const Welcome& m) {
    return {{"type", "welcome"}, {"nonce", m.nonce}};
}
json to_json(const Refused& m) {
    return {{"type", "refused"}, {"reason", m.reason}};
}
json to_json(const Beat& m) {
    return {{"type", "beat"}, {"member", m.member}, {"attempt", m.attempt}};
}
json to_json(const Stop& m) {
    return {{"type", "stop"}, {"attempt", m.attempt}, {"why", m.why}};
}
json to_json(const Failing& m) {
    return {{"type", "failing"}, {"member", m.member}, {"attempt", m.attempt}, {"why", m.why}};
}
json to_json(const Leaving& m) {
    return {{"type", "leaving"}, {"signal", m.signal}};
}
json to_json(const Ended& m) {
    json failures = json::array();
    for (const FailureRecord& f : m.failures) failures.push_back(failure_record_json(f));
    json j = {{"type", "ended"},
              {"member", m.member},
              {"attempt", m.attempt},
              {"end", name_of(kEnds, m.end)},
              {"failures", failures}};
    if (m.next_health) j["health"] = *m.next_health;
    return j;
}
json to_json(const Health& m) {
    return {{"type", "health"}, {"member", m.member}, {"attempt", m.attempt}, {"why", m.why}};
}
json to_json(const Gate& m) {
    json left = json::array();
    for (const LeftOut& l : m.left_out) left.push_back({{"host", l.host}, {"why", l.why}});
    return {{"type", "gate"}, {"attempt", m.attempt}, {"members", runs_json(m.members)}, {"left_out", left}};
}
json to_json(const DoctorReport& m) {
    return {{"type", "doctor"},
            {"member", m.member},
            {"host", m.host},
            {"sent", m.sent},
            {"sees_log_dir", m.sees_log_dir},
            {"report", json::parse(m.report, nullptr, false)}};
}
json to_json(const Decided& m) {
    const GroupDecision& d = m.decision;
    return {{"type", "decision"},
            {"attempt", m.attempt},
            {"kind", name_of(kKinds, d.kind)},
            {"restarts", d.restarts_used},
            {"members", runs_json(d.next_members)},
            {"world_size", d.next_world_size},
            {"replaced", d.replaced},
            {"exclude", d.exclude},
            {"summary", d.summary},
            {"exit_code", d.exit_code},
            {"wait", d.wait_seconds},
            {"cause", d.cause},
            {"left_behind", runs_json(d.left_behind)}};
}

Message ended_from(const json& j) {
    Ended m{int_at(j, "member"), int_at(j, "attempt"), value_of(kEnds, j.at("end").get<std::string>()), {}, {}};
    for (const json& f : j.at("failures")) {
        auto record = failure_record_from_json(f);
        if (!record) throw std::invalid_argument("a failure record is malformed");
        m.failures.push_back(*record);
    }
    if (j.contains("health")) m.next_health = j.at("health").get<std::string>();
    return m;
}

Message decided_from(const json& j) {
    Decided m;
    m.attempt = int_at(j, "attempt");
    GroupDecision& d = m.decision;
    d.kind = value_of(kKinds, j.at("kind").get<std::string>());
    d.restarts_used = int_at(j, "restarts");
    d.next_members = runs_from(j.at("members"));
    d.next_world_size = int_at(j, "world_size");
    d.replaced = j.at("replaced").get<std::vector<std::pair<int, int>>>();
    d.exclude = j.at("exclude").get<std::vector<std::string>>();
    d.summary = j.at("summary").get<std::string>();
    d.exit_code = int_at(j, "exit_code");
    d.wait_seconds = j.at("wait").get<double>();
    d.cause = j.at("cause").get<std::string>();
    if (j.contains("left_behind")) d.left_behind = runs_from(j.at("left_behind"));  // absent: none
    return m;
}

Message gate_from(const json& j) {
    Gate m{int_at(j, "attempt"), runs_from(j.at("members")), {}};
    for (const json& l : j.at("left_out"))
        m.left_out.push_back({m.attempt, l.at("host").get<std::string>(), l.at("why").get<std::string>()});
    return m;
}

Message message_from(const json& j) {
    const std::string type = j.at("type").get<std::string>();
    if (type == "hello")
        return Hello{j.at("run").get<std::string>(),        int_at(j, "member"),  j.at("host").get<std::string>(),
                     j.at("credential").get<std::string>(), int_at(j, "attempt"), j.at("nonce").get<std::string>()};
    if (type == "welcome") return Welcome{j.at("nonce").get<std::string>()};
    if (type == "refused") return Refused{j.at("reason").get<std::string>()};
    if (type == "beat") return Beat{int_at(j, "member"), int_at(j, "attempt")};
    if (type == "stop") return Stop{int_at(j, "attempt"), j.at("why").get<std::string>()};
    if (type == "failing") return Failing{int_at(j, "member"), int_at(j, "attempt"), j.at("why").get<std::string>()};
    if (type == "leaving") return Leaving{int_at(j, "signal")};
    if (type == "ended") return ended_from(j);
    if (type == "health") return Health{int_at(j, "member"), int_at(j, "attempt"), j.at("why").get<std::string>()};
    if (type == "gate") return gate_from(j);
    if (type == "doctor")
        return DoctorReport{int_at(j, "member"), j.at("host").get<std::string>(), j.at("sent").get<double>(),
                            j.at("sees_log_dir").get<bool>(), j.at("report").dump()};
    if (type == "decision") return decided_from(j);
    throw std::invalid_argument("unknown message type '" + type + "'");
}

// Why `from` may not say the message `j`, or "".
std::string unexpected(const json& j, From from) {
    static const std::array<std::vector<std::string_view>, 4> kSays{{
        {},
        {"hello"},
        {"hello", "beat", "health", "failing", "ended", "doctor"},
        {"welcome", "refused", "beat", "stop", "leaving", "gate", "decision"},
    }};
    const auto& says = kSays[static_cast<size_t>(from)];
    const auto type = j.find("type");
    if (says.empty() || (type != j.end() && type->is_string() &&
                         std::find(says.begin(), says.end(), type->get_ref<const std::string&>()) != says.end()))
        return "";
    if (from == From::Stranger) return "the first message is not a hello";
    return std::string(from == From::Member ? "a member" : "the leader") + " does not send " +
           (type == j.end() ? "a message without a type" : type->dump().substr(0, 40));
}

}  // namespace

std::string encode(const Message& message) {
    json j = std::visit([](const auto& m) { return to_json(m); }, message);
    j["v"] = kProtocolVersion;
    return j.dump() + "\n";
}

Result<Message> decode(const std::string& line, From from) {
    const std::string what = "group: a message from another agent";
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return Error{what + " is not JSON", "only dlaunch agents may connect"};
    const auto v = j.find("v");
    if (v == j.end() || !v->is_number_integer() || *v != kProtocolVersion)
        return Error{what + " has protocol version " + (v == j.end() ? "none" : v->dump().substr(0, 40)) + ", not " +
                         std::to_string(kProtocolVersion),
                     "run the same dlaunch version on every node"};
    if (auto refused = unexpected(j, from); !refused.empty()) return Error{refused, ""};
    try {
        return message_from(j);
    } catch (const std::exception& e) {
        return Error{what + " is malformed: " + e.what(), "only dlaunch agents may connect"};
    }
}

std::string refusal(const Hello& hello, const Sender& sender, uint32_t job_uid, const std::string& run_id,
                    int members_expected, int attempt) {
    if (sender.uid != job_uid)
        return "the credential is of uid " + std::to_string(sender.uid) + ", not the job's (" +
               std::to_string(job_uid) + ")";
    if (sender.payload != hello.run_id) return "the credential was made for another run";
    if (hello.run_id != run_id) return "run '" + hello.run_id + "' is not this group's ('" + run_id + "')";
    if (hello.member < 1 || hello.member >= members_expected)
        return "member " + std::to_string(hello.member) + " is not one of the group's " +
               std::to_string(members_expected - 1) + " members (1.." + std::to_string(members_expected - 1) + ")";
    if (hello.attempt != attempt)
        return "member " + std::to_string(hello.member) + " starts with attempt " + std::to_string(hello.attempt) +
               ", the leader with attempt " + std::to_string(attempt) +
               ": the nodes read different ledgers; is --log-dir on a file system every node shares?";
    return "";
}

Admission admission(const Hello& hello, const Sender& sender, uint32_t job_uid, const std::string& run_id,
                    int members_expected, int attempt) {
    return {refusal(hello, sender, job_uid, run_id, members_expected, attempt), sender.uid == job_uid};
}

}  // namespace dlaunch::group
