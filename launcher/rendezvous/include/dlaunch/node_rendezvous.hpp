// dlaunch's node rendezvous: how nodes started by hand (no Slurm, no mpirun) find each other, as
// paddle.distributed.launch's master does. One node hosts it (the first one started with `--nnodes N` and
// no master address, which prints the command for the others, or the node whose address is --master's
// host); the others join with `--master HOST:PORT`. The host assigns node ranks (requested ones kept,
// the rest in joining order, itself first), then every node starts its workers. It is a start-up exchange,
// not a store; only with --nnodes MIN:MAX does node 0 keep its port open for the run (rendezvous_door.hpp):
// nodes that come late wait there, and the nodes meet there again to take them.
//
// Wire format (one text line each, over TCP):
//   host -> joiner: "dlaunch-rdzv-nonce <host_nonce>\n"
//   joiner -> host: "dlaunch-rdzv 7 <job> <shape> <rank|-1> <addr> <procs> <role> <met|-1> <joiner_nonce> <proof>\n"
//   host -> joiner: "ok <node_rank> <nnodes> <master_addr> <master_port> <addr0,addr1,...|-> <procs0,...>
//                    <role0,...> <group_port> <attempt> <restarts_used> <proof>\n"   (one line)
//                   where the procs and roles lists are runs: "8*1024" is 1,024 nodes of 8 workers (version 5),
//                   and the addresses are "-" unless the workers' environment names every node (Paddle's
//                   endpoint lists, tell_addresses()) or the host is not node 0: a node needs node 0's (master_addr)
//                   and its own, and every node's list made the host's answers O(N²) bytes, ~12 MB at 1,024
//                   nodes (version 7); <nnodes> is at most kMaxNodes
//                or "error <message>\n"
//                or, to a node that came while the run is under way, "wait <seq> <proof>\n" every few
//                seconds until an attempt takes it (each a proof that the host still holds it; <seq> rises
//                from 1, so that a recorded one cannot be replayed to hold the node)
// <group_port> is where node 0's group channel listens (0: on the rendezvous port, once it is closed);
// <attempt> and <restarts_used> where the run stands: 0 0 at its start, the next attempt's for a node taken
// into a run under way.
// <shape> is what must match on every node (PS counts, the env contract); <addr> is how the other nodes
// reach the joiner; <procs> its worker count and <role> its --role (hex-encoded: any text), which may differ
// from node to node as under torchrun. <proof> is rdzv_auth's HMAC of the rest of the line, keyed with
// DLAUNCH_RDZV_SECRET and bound to the reader's nonce ("-" without a secret): a node without the run's secret cannot
// join, and a joiner takes no assignment from a host without it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlaunch/fd.hpp"
#include "dlaunch/job_context.hpp"
#include "dlaunch/node_limits.hpp"
#include "dlaunch/rdzv_auth.hpp"
#include "dlaunch/request.hpp"
#include "dlaunch/result.hpp"

namespace dlaunch {

// How one meeting is held beyond what its request says: how its messages are proved (the run's secret, or
// MUNGE under Slurm), and what node 0 says to do when nodes are missing at the timeout ("": the hint of the
// request's form).
struct MeetingTerms {
    rdzv_auth::Proofs proofs;
    std::string missing_hint;
    bool step = false;  // the agents of a Slurm step, met as the static form's: messages speak of the step
};

class RendezvousDoor;

// What a node learns when the nodes meet: its place, where the run stands, and (scale-up by hand,
// keeps_door_open()) where node 0 keeps the rendezvous open for the rest of the run.
struct Met {
    NodeAssignment assignment;  // its rendezvous_port: node 0's group channel's
    int attempt = 0;            // the attempt this node starts with (a node taken into a run under way: the next)
    int restarts_used = 0;      // of --max-restarts before it, as node 0 counts them
    std::string door_ip;        // node 0's rendezvous, open while the run lasts ("": closed once the nodes met)
    int door_port = 0;
    std::shared_ptr<RendezvousDoor> door;  // on node 0 when it keeps its rendezvous open (rendezvous_door.hpp)
    // On node 0 of a group with its door closed (the group's leader listens on the rendezvous port): the
    // rendezvous's listening socket, for the leader to take over (Leader::adopt). A node answered connects to
    // the leader at once and waits in its backlog, instead of trying again until a new socket listens.
    std::shared_ptr<Fd> group_listener;
};

struct JoinHello {
    std::string job;
    std::string shape;
    int rank = -1;  // requested node rank, -1: any
    std::string addr;
    NodeShare share;          // its workers and role
    std::string nonce = "-";  // the joiner's, for the host's proof
    std::string proof = "-";
    // A member meeting the others again at node 0's door: the attempt it last met for (its `rank` and `addr`
    // are its place in it); -1: a node not in the run (yet).
    int met = -1;
    bool operator==(const JoinHello&) const = default;
};

std::string encode_challenge(const std::string& nonce);
// What the host of a run that started without restarts answers on its rendezvous port while the run lasts:
// the nodes met, the rendezvous is over (with restarts, the group's leader answers there instead).
std::string encode_over();
// The host's nonce; an Error when the line is not a dlaunch rendezvous's first line, or says it is over.
Result<std::string> decode_challenge(const std::string& line);
// What the hello's proof covers: every field but the proof.
std::string hello_text(const JoinHello& hello);
std::string encode_hello(const JoinHello& hello);
Result<JoinHello> decode_hello(const std::string& line);
// The host's answers to the nodes of one rendezvous: the assignment (with where the run stands) as node
// `node_rank` is told it, proved for the joiner whose nonce is `nonce`; an Error when no proof can be made.
// What every node is told alike (the nodes' addresses and shares) is written and hashed once, when made: the
// host's work per node does not grow with the nodes' number (beyond copying those words).
class Answers {
public:
    // met.assignment.node_rank is not used; every_address: the addresses are told (tell_addresses()), else "-".
    Answers(const Met& met, bool every_address);
    Result<std::string> line(int node_rank, const rdzv_auth::Proofs& proofs, const std::string& nonce) const;

private:
    Met met_;
    std::string alike_;  // the words told every node alike
    // Their digest, which each proof covers in their place; an Error when Nettle cannot be loaded.
    Result<std::string> digest_;
};
// One answer: the assignment as met.assignment.node_rank is told it, with every address.
Result<std::string> encode_assignment(const Met& met, const rdzv_auth::Proofs& proofs, const std::string& nonce);
std::string encode_refusal(const std::string& message);
// "Still held; wait", the host's `seq`th such line to the joiner whose nonce is `nonce`, proved for it.
Result<std::string> encode_wait(const rdzv_auth::Proofs& proofs, const std::string& nonce, int seq);
// Whether `line` is a wait line; an Error when it is one whose proof does not hold or whose number is not above
// `last` (the last one taken; raised to it).
Result<bool> decode_wait(const std::string& line, const rdzv_auth::Proofs& proofs, const std::string& nonce, int& last);
// This node's share as the nodes' meeting told it: the one every node brings (NodeAssignment::every_share),
// its entry in the shares, or the default when none were told (Paddle's parameter-server layout fixes every
// node's).
NodeShare own_share(const Met& met);

// The host's answer: the assignment and where the run stands when its proof holds for this joiner's `nonce`,
// or the refusal or the failed proof as an Error. (door_ip/door_port/door are the joiner's to fill, and the
// node addresses when the host did not tell them: own_addresses().)
Result<Met> decode_reply(const std::string& line, const rdzv_auth::Proofs& proofs, const std::string& nonce);

// Whether the host tells every node every node's address: only when the workers' environment names every node
// (names_every_node()); the host's request decides, its shape (env contract) being every node's.
bool tell_addresses(const LaunchRequest& request);
// A joiner's node addresses when the host did not tell them (node_addrs empty): one per node, node 0's (the
// master's) and this node's (`own`, as its hello said it) known, the others "" (nobody at a member names
// them: the group's leader, node 0, knows every one). An Error when this node needs every address
// (`every_address_needed`: tell_addresses() of its own request) and was not told them.
Status own_addresses(NodeAssignment& assignment, const std::string& own, bool every_address_needed);

// What must be equal on every node for the request to make sense ("ps=1,2,0;env=0", ...): under Paddle's
// parameter-server layout the worker count too; otherwise nodes may differ in it.
std::string rendezvous_shape(const LaunchRequest& request);

// Node ranks for the host (entry 0) and the joiners (1..), in joining order: requested ranks are kept,
// the rest take the lowest free ones. Fails when two nodes ask for one rank or a rank is out of range.
Result<std::vector<int>> assign_node_ranks(const std::vector<int>& requested);

// Whether the endpoint's host, given as `name` and resolved to `ip` here, is this machine by its own
// name: a name (not an address, not "localhost") that resolves to a loopback address, as Debian's /etc/hosts
// maps the hostname to 127.0.1.1. The other nodes resolve it to this machine's real address: the host then
// listens on every interface and gives the others a non-loopback address.
bool names_this_machine(const std::string& name, const std::string& ip);

// The IPv4 address of the rendezvous endpoint's host (--master, or c10d's --rdzv-endpoint) as this machine
// resolves it; "" when the request names none. An Error naming the option when the host has no address.
Result<std::string> resolve_meeting_host(const LaunchRequest& request);

// Whether this agent hosts the node rendezvous when it meets the others by hand (and so leads their group):
// node 0 of torchrun's static form; an agent that holds the address of --master or c10d's endpoint (or
// names it by its hostname; --local-addr counts as its own); the first agent of `--nnodes N` with neither.
// False when the endpoint does not resolve (the rendezvous says why).
bool hosts_node_rendezvous(const LaunchRequest& request, const std::vector<std::string>& local_addrs);

// Whether a request needs the node rendezvous: run by hand (no launcher) across nodes, without a master
// address or a Paddle static layout (--ips, --servers) to go by.
bool needs_node_rendezvous(const LaunchRequest& request);

// The command the other nodes run: `argv` with `--master HOST:PORT` after the program name, minus the
// options before SCRIPT (argv[script_at]) that name this node (--host, --local-addr, --rank,
// --node-rank), shell-quoted where needed.
std::string join_command(const std::vector<std::string>& argv, size_t script_at, const std::string& master);

}  // namespace dlaunch
