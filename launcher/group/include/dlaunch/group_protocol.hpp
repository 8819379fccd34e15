// The group channel's messages: what a job's agents say to the group's leader and
// back, one JSON object per line over TCP. Pure: encode, decode, and the rule for who may join.
//
//   leader -> any     {"v":6,"type":"welcome","nonce":N}               (first, on every connection)
//   member -> leader  {"v":6,"type":"hello","run":R,"member":M,"host":H,"credential":C,"attempt":A,"nonce":N}
//   leader -> member  {"v":6,"type":"refused","reason":...}            (then the leader closes)
//   both ways         {"v":6,"type":"beat","member":M,"attempt":A}     (heartbeats)
//   member -> leader  {"v":6,"type":"health","member":M,"attempt":A,"why":W}   (before each attempt; "": passed)
//   leader -> member  {"v":6,"type":"gate","attempt":A,"members":[[0,9],11],"left_out":[{"host":H,"why":W}]}
//                     (the attempt runs on these members; or a "decision" when it cannot start)
//   member -> leader  {"v":6,"type":"failing","member":M,"attempt":A,"why":...}  (its first failure, at once)
//   leader -> member  {"v":6,"type":"stop","attempt":A,"why":...}      (end the attempt: the group restarts)
//   leader -> member  {"v":6,"type":"leaving","signal":S}              (the leader leaves by signal S)
//   member -> leader  {"v":6,"type":"ended","member":M,"attempt":A,"end":"failed","failures":[...],"health":W}
//                     ("health": this node's quick health check before attempt A+1, made as A ended; absent when
//                     its check may take long)
//   member -> leader  {"v":6,"type":"doctor","member":M,"host":H,"sent":T,"sees_log_dir":B,"report":{...}}
//                     (`dlaunch doctor` on every node: node 0 gathers the reports)
//   leader -> member  {"v":6,"type":"decision","attempt":A,"kind":"restart","members":[[0,1023]],"wait":S,...}
//
// A restart without a wait (--restart-backoff 0) takes one round: the members' ends carry their health for the
// next attempt, and the leader sends its decision and the next attempt's gate together (group_run.cpp).
//
// Lists of node ids (members, left_behind) go as runs, [first,last] or a lone id: O(nodes missing), not O(N).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "dlaunch/group.hpp"
#include "dlaunch/result.hpp"

namespace dlaunch::group {

inline constexpr int kProtocolVersion = 6;
inline constexpr size_t kMaxListed = 1 << 20;  // node ids one list may name (runs are expanded when read)

struct Hello {
    std::string run_id;
    int member = 0;
    std::string host;
    std::string credential;  // MUNGE under Slurm, the run's secret by hand
    int attempt = 0;         // the attempt it starts with (under --requeue: the job's ledger as it reads it)
    std::string nonce;       // the leader's greeting to this connection, echoed (and signed, by hand)
    bool operator==(const Hello&) const = default;
};

// The leader's first line on every connection: a fresh nonce the hello must echo, so that a hello seen on
// the network (this run or an earlier one) cannot be played again.
struct Welcome {
    std::string nonce;
    bool operator==(const Welcome&) const = default;
};

struct Refused {
    std::string reason;
    bool operator==(const Refused&) const = default;
};

struct Beat {
    int member = 0;
    int attempt = 0;
    bool operator==(const Beat&) const = default;
};

struct Stop {
    int attempt = 0;
    std::string why;  // "rank 3 on nsn2: exit code 3", "nsn3 lost: no heartbeat for 10 s"
    bool operator==(const Stop&) const = default;
};

// A member's first worker failure of the attempt, as it happens: the leader stops the other nodes
// meanwhile instead of after this node's workers took their grace to end.
struct Failing {
    int member = 0;
    int attempt = 0;
    std::string why;  // "rank 3 on nsn2: exit code 3"
    bool operator==(const Failing&) const = default;
};

// The leader leaves the group by a signal (Slurm ending the job, a user's ^C): the members leave as if
// they had it too, instead of taking the leader for lost.
struct Leaving {
    int signal = 0;
    bool operator==(const Leaving&) const = default;
};

struct Ended {
    int member = 0;
    int attempt = 0;
    MemberEnd end = MemberEnd::Succeeded;
    std::vector<FailureRecord> failures;
    // This node's health check before the next attempt, made as this one ended: a quick check only
    // (GroupSetup::health_check_is_quick), which the leader takes when the restart has no wait.
    std::optional<std::string> next_health;
    bool operator==(const Ended&) const = default;
};

// A node's health check before an attempt (health/health.hpp).
struct Health {
    int member = 0;
    int attempt = 0;
    std::string why;  // what failed; "" when it passed
    bool operator==(const Health&) const = default;
};

// The health gate's answer when the attempt starts: who runs it (decide_gate).
struct Gate {
    int attempt = 0;
    std::vector<int> members;
    std::vector<LeftOut> left_out;
    bool operator==(const Gate&) const = default;
};

// `dlaunch doctor` on several nodes: a node's report for node 0, with its clock when sent and whether it
// sees node 0's marker in the log directory.
struct DoctorReport {
    int member = 0;
    std::string host;
    double sent = 0;  // seconds since the epoch, by the sender's clock
    bool sees_log_dir = false;
    std::string report;  // doctor::to_json(), as text
    bool operator==(const DoctorReport&) const = default;
};

struct Decided {
    int attempt = 0;
    GroupDecision decision;
    bool operator==(const Decided&) const = default;
};

using Message =
    std::variant<Hello, Welcome, Refused, Beat, Stop, Failing, Leaving, Ended, Health, Gate, DoctorReport, Decided>;

std::string encode(const Message& message);  // one line, with its '\n'

// Who sent a line, and so which messages it may say: a connection that has not said hello (only a hello), an
// admitted member (hello, beat, health, failing, ended, doctor) or the leader (welcome, refused, beat, stop,
// leaving, gate, decision). Another type is refused before anything it names is built.
enum class From { Anyone, Stranger, Member, Leader };
Result<Message> decode(const std::string& line, From from = From::Anyone);

// What a verified credential says about its sender (munge_decode, or the secret's check).
struct Sender {
    uint32_t uid = 0;
    std::string payload;  // what the sender signed: its run id
};

// Why the leader refuses a hello, or "" when it may join: the credential must come from the job's own user
// and name this run, the member must be one the group expects, and start with the leader's attempt.
std::string refusal(const Hello& hello, const Sender& sender, uint32_t job_uid, const std::string& run_id,
                    int members_expected, int attempt = 0);

// The leader's answer to a hello: `why` it is refused ("" admits it) and whether its sender proved it is the
// job's user (a valid credential of that user, or the run's secret). Only a proved sender is told why: a
// stranger learns nothing of the group.
struct Admission {
    std::string why;
    bool proved = false;
};
Admission admission(const Hello& hello, const Sender& sender, uint32_t job_uid, const std::string& run_id,
                    int members_expected, int attempt = 0);

}  // namespace dlaunch::group
