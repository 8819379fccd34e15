#include "dlaunch/node_rendezvous.hpp"

#include <algorithm>
#include <charconv>
#include <set>
#include <sstream>

#include "dlaunch/plan.hpp"
#include "dlaunch/rdzv_auth.hpp"
#include "dlaunch/text.hpp"

namespace dlaunch {
namespace {

constexpr const char* kMagic = "dlaunch-rdzv";
constexpr const char* kChallenge = "dlaunch-rdzv-nonce";
constexpr const char* kOver = "dlaunch-rdzv-over";
constexpr int kVersion = 7;

std::optional<int> to_int(const std::string& text) {
    int v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc{} || p != text.data() + text.size()) return std::nullopt;
    return v;
}

bool plain_word(const std::string& s) {
    return !s.empty() && s.size() < 256 && s.find_first_of(" \t\r\n") == std::string::npos;
}

// A role on the wire: its bytes in hex ("-" for none), so that any --role passes as one word.
std::string role_word(const std::string& role) {
    return role.empty() ? "-" : hex_of(role);
}

std::optional<std::string> role_of_word(const std::string& word) {
    if (word == "-") return std::string();
    auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    if (word.size() % 2 != 0 || word.find_first_not_of("0123456789abcdef") != std::string::npos) return std::nullopt;
    std::string out;
    out.reserve(word.size() / 2);
    for (size_t i = 0; i < word.size(); i += 2) out += static_cast<char>(nibble(word[i]) * 16 + nibble(word[i + 1]));
    return out;
}

std::string strip_newline(std::string line) {
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    return line;
}

}  // namespace

std::string encode_challenge(const std::string& nonce) {
    return std::string(kChallenge) + " " + nonce + "\n";
}

std::string encode_over() {
    return std::string(kOver) + "\n";
}

Result<std::string> decode_challenge(const std::string& line) {
    if (strip_newline(line) == kOver)
        return Error{
            "rdzv: the rendezvous is over: its nodes have started (without --max-restarts: no node joins "
            "a run that started)",
            "start every node again with the same command to include this one"};
    // The group's leader welcomes every connection with a JSON line (group_channel.hpp): the nodes met already.
    if (line.rfind("{\"", 0) == 0 && line.find("\"type\":\"welcome\"") != std::string::npos)
        return Error{"rdzv: the rendezvous is over: its nodes have started and run as a group",
                     "a node cannot join a run that started; start every node again with the same command to "
                     "include this one"};
    auto words = split(strip_newline(line), ' ');
    if (words.size() != 2 || words[0] != kChallenge || !plain_word(words[1]))
        return Error{"rdzv: what answers there is not a dlaunch rendezvous of this version",
                     "check the address and port, and run the same dlaunch version on every node"};
    return words[1];
}

std::string hello_text(const JoinHello& h) {
    return std::string(kMagic) + " " + std::to_string(kVersion) + " " + h.job + " " + h.shape + " " +
           std::to_string(h.rank) + " " + h.addr + " " + std::to_string(h.share.procs) + " " + role_word(h.share.role) +
           " " + std::to_string(h.met) + " " + h.nonce;
}

std::string encode_hello(const JoinHello& h) {
    return hello_text(h) + " " + h.proof + "\n";
}

namespace {

// A node's worker count as a word of a hello or an answer: 1 to kMaxNodeProcs.
std::optional<int> procs_of(const std::string& word) {
    auto procs = to_int(word);
    if (!procs || *procs < 1 || *procs > kMaxNodeProcs) return std::nullopt;
    return procs;
}

}  // namespace

Result<JoinHello> decode_hello(const std::string& line) {
    auto words = split(strip_newline(line), ' ');
    if (words.size() < 2 || words[0] != kMagic)
        return Error{"rdzv: a connection that is not a dlaunch node",
                     "check that nothing else uses the rendezvous port"};
    if (words[1] != std::to_string(kVersion))
        return Error{"rdzv: a node speaks rendezvous version " + words[1] + ", this one " + std::to_string(kVersion),
                     "run the same dlaunch version on every node"};
    const Error malformed{"rdzv: a malformed join request", "run the same dlaunch version on every node"};
    if (words.size() != 11) return malformed;
    auto rank = to_int(words[4]), procs = procs_of(words[6]), met = to_int(words[8]);
    auto role = role_of_word(words[7]);
    if (!rank || *rank < -1 || !procs || !role || !met || *met < -1 || !plain_word(words[2]) || !plain_word(words[3]) ||
        !plain_word(words[5]) || !plain_word(words[9]) || !plain_word(words[10]))
        return malformed;
    return JoinHello{words[2], words[3], *rank, words[5], NodeShare{*procs, *role}, words[9], words[10], *met};
}

namespace {

// Words as a list of runs: "w" for one, "w*K" for K equal ones in a row ("-" for none). Every node's share
// is usually the same: one run, whatever the node count.
std::string runs_text(const std::vector<std::string>& words) {
    std::string out;
    for (size_t i = 0; i < words.size();) {
        size_t k = 1;
        while (i + k < words.size() && words[i + k] == words[i]) ++k;
        out += (out.empty() ? "" : ",") + words[i] + (k > 1 ? "*" + std::to_string(k) : "");
        i += k;
    }
    return out.empty() ? "-" : out;
}

// runs_text() read back as (word, count) pairs, when they name exactly `n` words in the form runs_text()
// writes: no empty word, none of 256 characters or more, a count of 2 or more without leading zeros.
std::optional<std::vector<std::pair<std::string, int>>> runs_of(const std::string& text, int n) {
    std::vector<std::pair<std::string, int>> runs;
    int named = 0;
    for (const std::string& run : split(text, ',')) {
        const auto star = run.find('*');
        const bool counted = star != std::string::npos;
        const auto k = counted ? to_int(run.substr(star + 1)) : std::optional<int>(1);
        if (!k || (counted && (*k < 2 || run[star + 1] == '0')) || *k > n - named) return std::nullopt;
        runs.emplace_back(run.substr(0, star), *k);
        if (runs.back().first.empty() || runs.back().first.size() >= 256) return std::nullopt;
        named += *k;
    }
    if (named != n) return std::nullopt;
    return runs;
}

// The words of the answer every node is told alike: the nodes' addresses ("-": not told), workers and roles.
std::string alike_words(const NodeAssignment& a, bool every_address) {
    std::string addrs;
    std::vector<std::string> procs, roles;
    for (auto& x : a.node_addrs) addrs += (addrs.empty() ? "" : ",") + x;
    if (!every_address) addrs = "-";
    for (auto& s : a.shares) {
        procs.push_back(std::to_string(s.procs));
        roles.push_back(role_word(s.role));
    }
    return addrs + " " + runs_text(procs) + " " + runs_text(roles);
}

// What a proof of an answer covers: its words with the ones every node is told alike in their digest's
// place (rdzv_auth::digest without a nonce), so that the host hashes those once, not once per node.
std::string proved_words(const std::string& head, const std::string& alike_digest, const std::string& tail) {
    return head + " sha256:" + alike_digest + " " + tail;
}

constexpr const char* kWait = "wait";

// Every node's share from the assignment's lists ("- -": none given) into `a`: one share for every node
// (a.every_share, the shares left empty) when each list is one run, else a share per node, each run's word
// read once. False when they do not name a.nnodes nodes.
bool shares_of(const std::string& procs, const std::string& roles, NodeAssignment& a) {
    if (procs == "-" && roles == "-") return true;
    const int n = a.nnodes;
    auto counts = runs_of(procs, n), names = runs_of(roles, n);
    if (!counts || !names) return false;
    if (counts->size() == 1 && names->size() == 1) {
        auto count = procs_of(counts->front().first);
        auto role = role_of_word(names->front().first);
        if (!count || !role) return false;
        a.every_share = NodeShare{*count, *role};
        return true;
    }
    std::vector<int> each;
    each.reserve(static_cast<size_t>(n));
    for (const auto& [word, k] : *counts) {
        auto count = procs_of(word);
        if (!count) return false;
        each.insert(each.end(), static_cast<size_t>(k), *count);
    }
    a.shares.reserve(static_cast<size_t>(n));
    for (const auto& [word, k] : *names) {
        auto role = role_of_word(word);
        if (!role) return false;
        for (int i = 0; i < k; ++i) a.shares.push_back(NodeShare{each[a.shares.size()], *role});
    }
    return true;
}

}  // namespace

Answers::Answers(const Met& met, bool every_address)
    : met_(met), alike_(alike_words(met.assignment, every_address)), digest_(rdzv_auth::digest("", alike_)) {}

Result<std::string> Answers::line(int node_rank, const rdzv_auth::Proofs& proofs, const std::string& nonce) const {
    const NodeAssignment& a = met_.assignment;
    const std::string head = "ok " + std::to_string(node_rank) + " " + std::to_string(a.nnodes) + " " + a.master_addr +
                             " " + std::to_string(a.master_port);
    const std::string tail = std::to_string(a.rendezvous_port) + " " + std::to_string(met_.attempt) + " " +
                             std::to_string(met_.restarts_used);
    if (!digest_) return digest_.error();
    auto proof = proofs.prove(nonce, proved_words(head, *digest_, tail));
    if (!proof) return proof.error();
    return head + " " + alike_ + " " + tail + " " + *proof + "\n";
}

Result<std::string> encode_assignment(const Met& met, const rdzv_auth::Proofs& proofs, const std::string& nonce) {
    return Answers(met, true).line(met.assignment.node_rank, proofs, nonce);
}

std::string encode_refusal(const std::string& message) {
    std::string m = message;
    std::replace(m.begin(), m.end(), '\n', ' ');
    return "error " + m + "\n";
}

Result<std::string> encode_wait(const rdzv_auth::Proofs& proofs, const std::string& nonce, int seq) {
    const std::string text = std::string(kWait) + " " + std::to_string(seq);
    auto proof = proofs.prove(nonce, text);
    if (!proof) return proof.error();
    return text + " " + *proof + "\n";
}

Result<bool> decode_wait(const std::string& in, const rdzv_auth::Proofs& proofs, const std::string& nonce, int& last) {
    auto words = split(strip_newline(in), ' ');
    if (words.empty() || words[0] != kWait) return false;
    const int seq = words.size() == 3 ? to_int(words[1]).value_or(-1) : -1;  // numbers start at 1
    std::string why = seq > 0 ? proofs.check(nonce, std::string(kWait) + " " + words[1], words[2]) : "malformed";
    if (why.empty() && seq <= last) why = "said again (number " + words[1] + " after " + std::to_string(last) + ")";
    if (!why.empty())
        return Error{"rdzv: the rendezvous host's word to wait does not prove " + proofs.what + ": " + why,
                     "check that the address is this run's first node"};
    last = seq;
    return true;
}

Result<Met> decode_reply(const std::string& in, const rdzv_auth::Proofs& proofs, const std::string& nonce) {
    std::string line = strip_newline(in);
    if (line.rfind("error ", 0) == 0)
        return Error{"rdzv: the rendezvous host refused this node: " + line.substr(6), ""};
    const Error malformed{"rdzv: the rendezvous host sent a malformed answer",
                          "run the same dlaunch version on every node"};
    auto words = split(line, ' ');
    if (words.size() != 12 || words[0] != "ok") return malformed;
    // The proof covers the text as it came (the words told every node alike by their digest): checked before
    // any list in it is read.
    const std::string head = words[0] + " " + words[1] + " " + words[2] + " " + words[3] + " " + words[4];
    const auto alike = rdzv_auth::digest("", words[5] + " " + words[6] + " " + words[7]);
    if (!alike) return alike.error();
    const std::string tail = words[8] + " " + words[9] + " " + words[10];
    if (auto why = proofs.check(nonce, proved_words(head, *alike, tail), words[11]); !why.empty())
        return Error{"rdzv: the rendezvous host's answer does not prove " + proofs.what + ": " + why,
                     "check that the address is this run's first node"};
    auto rank = to_int(words[1]), n = to_int(words[2]), port = to_int(words[4]);
    if (n && *n > kMaxNodes)  // the lists below are made for each node: their size is bounded before
        return Error{"rdzv: the rendezvous host's answer names " + std::to_string(*n) +
                         " nodes, more than a run may have (" + std::to_string(kMaxNodes) + ")",
                     "check that the address is this run's first node"};
    auto group_port = to_int(words[8]), attempt = to_int(words[9]), restarts = to_int(words[10]);
    if (!rank || !n || !port || *n < 1 || *rank < 0 || *rank >= *n || !group_port || *group_port < 0 ||
        *group_port > 65535 || !attempt || *attempt < 0 || !restarts || *restarts < 0)
        return malformed;
    Met met;
    met.attempt = *attempt;
    met.restarts_used = *restarts;
    NodeAssignment& a = met.assignment;
    a.rendezvous_port = *group_port;
    a.node_rank = *rank;
    a.nnodes = *n;
    a.master_addr = words[3];
    a.master_port = *port;
    if (words[5] != "-") a.node_addrs = split(words[5], ',');  // "-": not told (tell_addresses())
    if (words[5] != "-" && static_cast<int>(a.node_addrs.size()) != a.nnodes) return malformed;
    if (!shares_of(words[6], words[7], a)) return malformed;
    return met;
}

NodeShare own_share(const Met& met) {
    const NodeAssignment& a = met.assignment;
    const auto at = static_cast<size_t>(a.node_rank);
    if (a.every_share) return *a.every_share;
    return at < a.shares.size() ? a.shares[at] : NodeShare{};
}

bool tell_addresses(const LaunchRequest& req) {
    return names_every_node(req.env_contract);
}

Status own_addresses(NodeAssignment& a, const std::string& own, bool every_address_needed) {
    if (!a.node_addrs.empty()) return Ok{};
    if (every_address_needed)
        return Error{
            "rdzv: the rendezvous host did not tell every node's address, which this node's workers are given "
            "(--env paddle or all)",
            "run the same dlaunch version on every node"};
    a.node_addrs.resize(static_cast<size_t>(a.nnodes));
    a.node_addrs[0] = a.master_addr;
    a.node_addrs[static_cast<size_t>(a.node_rank)] = own;
    return Ok{};
}

std::string rendezvous_shape(const LaunchRequest& req) {
    std::ostringstream s;
    if (req.paddle.ps) {  // its layout places servers and trainers by one worker count on every node
        const auto& n = req.nproc_per_node;
        s << "nproc=";
        switch (n.kind) {
            case NprocSpec::Kind::Count: s << n.count; break;
            case NprocSpec::Kind::Gpu: s << "gpu"; break;
            case NprocSpec::Kind::Cpu: s << "cpu"; break;
            case NprocSpec::Kind::Auto: s << "auto"; break;
            case NprocSpec::Kind::GpuOrOne: s << "gpu1"; break;
        }
        s << ";ps=" << req.paddle.ps->server_num << "," << req.paddle.ps->trainer_num << ","
          << req.paddle.ps->heter_worker_num << ";";
    }
    s << "env=" << static_cast<int>(req.env_contract);
    return s.str();
}

Result<std::vector<int>> assign_node_ranks(const std::vector<int>& requested) {
    const int n = static_cast<int>(requested.size());
    std::vector<int> ranks(requested.size(), -1);
    std::set<int> taken;
    for (size_t i = 0; i < requested.size(); ++i) {
        int r = requested[i];
        if (r < 0) continue;
        if (r >= n)
            return Error{"rdzv: a node asked for rank " + std::to_string(r) + " of " + std::to_string(n) + " nodes",
                         "node ranks run from 0 to " + std::to_string(n - 1)};
        if (!taken.insert(r).second)
            return Error{"rdzv: two nodes asked for rank " + std::to_string(r),
                         "give each node its own --rank, or none"};
        ranks[i] = r;
    }
    int next = 0;
    for (auto& r : ranks) {
        if (r >= 0) continue;
        while (taken.contains(next)) ++next;
        r = next;
        taken.insert(next);
    }
    return ranks;
}

bool names_this_machine(const std::string& name, const std::string& ip) {
    const bool literal = name.find_first_not_of("0123456789.") == std::string::npos;
    return !literal && name != "localhost" && ip.rfind("127.", 0) == 0;
}

bool needs_node_rendezvous(const LaunchRequest& req) {
    if (req.launcher != Launcher::Agent) return false;
    if (req.rendezvous_master || req.c10d_endpoint) return true;
    // torchrun's forms keep their meaning: --standalone, other backends, --node-rank (static) and MIN:MAX
    // without a master address stay errors. Paddle allows --rank and ranges with an auto-detected master.
    if (req.standalone || req.rdzv_backend != "static") return false;
    if (!req.paddle.layout && (req.node_rank || req.nnodes.min != req.nnodes.max)) return false;
    const bool static_layout = req.master_addr || !req.rdzv_endpoint.empty() || !req.paddle.ips.empty() ||
                               (req.paddle.ps && !req.paddle.ps->servers.empty());
    return req.nnodes.max > 1 && !static_layout;
}

std::string join_command(const std::vector<std::string>& argv, size_t script_at, const std::string& master) {
    static const std::set<std::string> node_specific{"--host",      "--local-addr", "--local_addr", "--rank",
                                                     "--node-rank", "--node_rank",  "--master"};
    std::string base = argv.empty() ? "dlaunch" : argv[0].substr(argv[0].rfind('/') + 1);
    std::string out = shell_quote(base) + " --master " + shell_quote(master);
    for (size_t i = 1; i < argv.size(); ++i) {
        const std::string& a = argv[i];
        if (i < script_at) {
            auto eq = a.find('=');
            if (node_specific.contains(a.substr(0, eq))) {
                if (eq == std::string::npos) ++i;  // and its value
                continue;
            }
        }
        out += " " + shell_quote(a);
    }
    return out;
}

}  // namespace dlaunch
