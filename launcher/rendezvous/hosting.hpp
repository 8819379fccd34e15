// The node rendezvous host's and joiner's parts that node 0's door (rendezvous_door.cpp) shares with the
// rendezvous itself (node_rendezvous_io.cpp). Private to launcher/rendezvous/.
#pragma once

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/clock.hpp"
#include "dlaunch/fd.hpp"
#include "dlaunch/job_setup.hpp"
#include "dlaunch/node_rendezvous.hpp"
#include "dlaunch/refusal_log.hpp"

namespace dlaunch::rdzv_host {

// How read_line() ended without a line.
enum class NoLine { Timeout, Closed, TooLong };

// One line of at most `most` bytes before the deadline, else why not (`why`). Read in chunks: what follows
// the line stays in `rest` for the next call.
std::optional<std::string> read_line(int fd, Clock::time_point deadline, size_t most, std::string& rest, NoLine& why);
// Writes all of `line` (blocking), or as much as the peer takes before it fails.
void write_line(int fd, const std::string& line);
std::string rendezvous_job(const LaunchRequest& req);
// The IPv4 address of one end of a connection: this side's (getsockname) or the peer's (getpeername).
std::string address_of(int fd, int (*end)(int, sockaddr*, socklen_t*));

struct Joiner {
    Fd fd;
    JoinHello hello;
    int waits_said = 0;  // at node 0's door: the wait lines it was sent (their numbers)
};

// Why the host turns a proved hello away ("" when it may join): another job (a stranger to this run), or a
// node of this run that cannot be in it: other worker options, a rank that is out of range or taken.
struct Refusal {
    std::string why;  // "" when it may join
    std::string hint;
    bool of_this_run = false;  // the run cannot start as asked: the rendezvous ends on every node
    std::string text() const { return why + "; " + hint; }
};

Refusal refusal_for(const LaunchRequest& req, const JoinHello& hello, const std::vector<Joiner>& joiners);

// Drops the joiners whose connection closed while they waited (a node stopped or restarted by hand): a
// joiner sends nothing after its hello (and reads only), so a readable socket is one at its end. `under_way`:
// they waited at node 0's door (the run started), not for its start.
void drop_departed(std::vector<Joiner>& joiners, bool under_way = false);

// A connection the host welcomed with its nonce and that has not said its hello yet. The host serves every
// such connection at once (poll), each bounded: kHelloBytes, and kHelloSeconds to say it; at most kMaxPending
// of them, or the run's node count when larger (kMaxPendingPerAddress from one address), a new one closing
// the oldest (whose joiner, if it was one, connects again), so neither silent nor flooding clients hold the
// nodes back.
struct Pending {
    Fd fd;
    std::string nonce, inbox, address;  // address: the peer's
    Clock::time_point hello_by;
};
constexpr size_t kHelloBytes = 4096;
// How long a joiner of the static form waits for the host's first line (a host sends it at once).
constexpr std::chrono::seconds kStaticChallengeWait{10};
constexpr int kHelloSeconds = 5, kMaxPending = 64, kMaxPendingPerAddress = 8;
constexpr int kSendSeconds = 5;  // the most one answer to a joiner may take to send
// Node 0's door (rendezvous_door.hpp) tells every node it holds to wait this often; a joiner told so waits
// kDoorHoldsFor more each time (a host that stops saying it is gone).
constexpr std::chrono::seconds kDoorWaitEvery{5}, kDoorHoldsFor{30};

// The host's side of the rendezvous: the joiners it admitted, the connections still to say hello, and
// refusals said once per address per 10 s.
struct Hosting {
    const LaunchRequest& req;
    const MeetingTerms& terms;
    std::vector<Joiner> joiners;
    std::vector<Pending> pending;
    RefusalLog refusals;
    std::optional<Error> ended;            // a node of this run that cannot join ended the rendezvous: who and why
                                           // (without the "rdzv: " of the host's own error), and the fix
    Clock::time_point departed_checked{};  // drop_departed() polls every joiner: at most every 100 ms
    bool door = false;                     // node 0's door (rendezvous_door.hpp): the run is under way
    bool ranks_asked = true;               // the node ranks joiners ask for are kept (else node 0 gives them)

    void refuse(const std::string& peer, const std::string& why, bool warn = true) {
        if (auto line = refusals.refused(peer, why, Clock::now())) {
            if (warn)
                spdlog::warn("rdzv: {}", *line);
            else
                spdlog::debug("rdzv: {}", *line);
        }
    }
    // At the door: the joiners that wait to be taken (not members meeting again).
    int waiting() const {
        return static_cast<int>(
            std::count_if(joiners.begin(), joiners.end(), [](const Joiner& j) { return j.hello.met < 0; }));
    }
    void say_unsaid(bool all = false) {
        for (const std::string& line : refusals.unsaid(Clock::now(), all)) spdlog::warn("rdzv: {}", line);
    }
};

// Node ranks for everyone (the joiners' requested ones kept, the rest in joining order), each joiner told its
// own with where the run stands (`at`); this node's assignment. An Error (every joiner told) when the ranks
// cannot be given or a proof cannot be made.
Result<NodeAssignment> assign(const LaunchRequest& req, std::vector<Joiner>& joiners, const std::string& advertise,
                              int port, const NodeShare& own, const rdzv_auth::Proofs& proofs, Met at);

// One round of the host's loop: waits until `until` at most for a connection, a hello or a deadline, then
// serves what came. False when nothing came before `until`.
bool host_round(Hosting& h, int listener, Clock::time_point until);

// A joiner's meeting at the host at master_ip:port: connects (again, until the deadline, while the host is
// not there or closes the connection unanswered), says its hello and waits for the answer (a host that
// holds it says so every few seconds: it then waits as long as it does).
// `met`: a member meeting the others again at node 0's door, the attempt it last met for (-1: none).
Result<Met> join_rendezvous(const LaunchRequest& req, const MeetingTerms& terms, const std::string& master_ip, int port,
                            Clock::time_point deadline, const NodeShare& own, int met = -1);

}  // namespace dlaunch::rdzv_host
