#include "dlaunch/stack_report.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "dlaunch/text.hpp"

namespace dlaunch::hang {
namespace {

constexpr std::string_view kThread = "Thread ";
constexpr std::string_view kCurrent = "Current thread ";

std::optional<ThreadStack> thread_header(std::string_view line) {
    ThreadStack t;
    if (line.starts_with(kCurrent)) {
        t.current = true;
        line.remove_prefix(kCurrent.size());
    } else if (line.starts_with(kThread)) {
        line.remove_prefix(kThread.size());
    } else {
        return std::nullopt;
    }
    t.id = std::string(line.substr(0, line.find(' ')));
    return t;
}

// `  File "train.py", line 14 in main`
std::optional<Frame> frame_line(std::string_view line) {
    constexpr std::string_view open = "  File \"";
    if (!line.starts_with(open)) return std::nullopt;
    line.remove_prefix(open.size());
    const size_t quote = line.rfind("\", line ");
    if (quote == std::string_view::npos) return std::nullopt;
    Frame f;
    f.file = std::string(line.substr(0, quote));
    line.remove_prefix(quote + 8);
    const size_t in = line.find(" in ");
    try {
        f.line = std::stoi(std::string(line.substr(0, in)));
    } catch (...) {
        return std::nullopt;
    }
    if (in != std::string_view::npos) f.function = std::string(line.substr(in + 4));
    return f;
}

bool in_torch(const Frame& f) {
    return f.file.find("/torch/") != std::string::npos;
}

bool in_python_library(const Frame& f) {
    return in_torch(f) || f.file.find("/lib/python") != std::string::npos || f.file.starts_with("<frozen");
}

// The collective the thread waits in, when it waits in one: "all_reduce", or "backward" (DDP's
// all-reduce runs in the backward pass).
std::optional<std::string> collective_of(const ThreadStack& t) {
    static const std::set<std::string> collectives{"all_reduce",
                                                   "all_reduce_coalesced",
                                                   "barrier",
                                                   "monitored_barrier",
                                                   "broadcast",
                                                   "broadcast_object_list",
                                                   "all_gather",
                                                   "all_gather_object",
                                                   "all_gather_into_tensor",
                                                   "_all_gather_base",
                                                   "reduce",
                                                   "reduce_scatter",
                                                   "reduce_scatter_tensor",
                                                   "_reduce_scatter_base",
                                                   "all_to_all",
                                                   "all_to_all_single",
                                                   "gather",
                                                   "gather_object",
                                                   "scatter",
                                                   "scatter_object_list",
                                                   "send",
                                                   "recv",
                                                   "isend",
                                                   "irecv",
                                                   "batch_isend_irecv",
                                                   "_store_based_barrier",
                                                   "new_group",
                                                   "init_process_group"};
    for (auto& f : t.frames) {
        if (f.file.find("torch/distributed/") != std::string::npos && collectives.contains(f.function))
            return f.function;
        if (f.file.find("torch/autograd/") != std::string::npos && f.function == "backward") return "backward";
    }
    return std::nullopt;
}

// The innermost frame of the user's own code (not Python's or torch's), else the innermost frame.
const Frame* user_frame(const ThreadStack& t) {
    for (auto& f : t.frames)
        if (!in_python_library(f)) return &f;
    return t.frames.empty() ? nullptr : &t.frames.front();
}

std::string trim(const std::string& s) {
    const size_t first = s.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return "";
    return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

std::string rank_list(const std::vector<int>& ranks) {
    std::string out = ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
    return out;
}

struct Classified {
    std::map<std::string, std::vector<int>> waiting;  // collective -> ranks
    std::vector<int> elsewhere;                       // captured, not in a collective
    std::vector<int> unknown;                         // no stack
};

Classified classify(const std::vector<RankStacks>& ranks) {
    Classified c;
    for (auto& r : ranks) {
        const ThreadStack* t = main_thread(r.threads);
        if (!t) {
            c.unknown.push_back(r.rank);
            continue;
        }
        auto coll = collective_of(*t);
        if (coll)
            c.waiting[*coll].push_back(r.rank);
        else
            c.elsewhere.push_back(r.rank);
    }
    return c;
}

const RankStacks* find_rank(const std::vector<RankStacks>& ranks, int rank) {
    for (auto& r : ranks)
        if (r.rank == rank) return &r;
    return nullptr;
}

// Likeliest first: the rank silent the longest.
void by_silence(std::vector<int>& ranks, const std::vector<RankStacks>& all) {
    std::stable_sort(ranks.begin(), ranks.end(),
                     [&](int a, int b) { return find_rank(all, a)->last_progress < find_rank(all, b)->last_progress; });
}

void add_waiting_evidence(Culprit& out, const Classified& c, const std::vector<RankStacks>& ranks,
                          const SourceLine& source_line) {
    for (auto& [coll, members] : c.waiting) {
        const ThreadStack* t = main_thread(find_rank(ranks, members.front())->threads);
        const Frame* mine = t ? user_frame(*t) : nullptr;
        out.evidence.push_back(rank_list(members) + (members.size() == 1 ? " waits in " : " wait in ") + coll +
                               (mine ? " (" + describe_frame(*mine, source_line) + ")" : ""));
    }
}

}  // namespace

std::vector<ThreadStack> parse_faulthandler(std::string_view text) {
    std::vector<ThreadStack> threads;
    for (auto& line : split(std::string(text), '\n')) {
        if (auto header = thread_header(line)) {
            threads.push_back(std::move(*header));
        } else if (auto frame = frame_line(line); frame && !threads.empty()) {
            threads.back().frames.push_back(std::move(*frame));
        }
    }
    return threads;
}

// dlaunch's sitecustomize.py runs a thread that only takes the stack signal: never the program's.
bool dlaunch_thread(const ThreadStack& t) {
    return std::any_of(t.frames.begin(), t.frames.end(),
                       [](const Frame& f) { return f.function == "_dlaunch_stack_signal_thread"; });
}

const ThreadStack* main_thread(const std::vector<ThreadStack>& threads) {
    for (auto& t : threads)
        if (!t.frames.empty() && t.frames.back().function == "<module>") return &t;
    for (auto& t : threads)
        if (t.current && !dlaunch_thread(t)) return &t;
    // faulthandler lists the newest thread first: the main thread comes last.
    for (auto t = threads.rbegin(); t != threads.rend(); ++t)
        if (!dlaunch_thread(*t)) return &*t;
    return nullptr;
}

std::string describe_frame(const Frame& f, const SourceLine& source_line) {
    std::string out = f.file + ":" + std::to_string(f.line) + " in " + f.function;
    std::string code = source_line ? trim(source_line(f.file, f.line)) : "";
    if (!code.empty()) out += ": " + code;
    return out;
}

std::string where_it_runs(const std::vector<ThreadStack>& threads, const SourceLine& source_line) {
    const ThreadStack* t = main_thread(threads);
    if (!t || t->frames.empty()) return "no Python stack";
    std::string out = describe_frame(t->frames.front(), source_line);
    const Frame* mine = user_frame(*t);
    if (mine && mine != &t->frames.front()) out += " (from " + describe_frame(*mine, source_line) + ")";
    return out;
}

Culprit find_culprit(const std::vector<RankStacks>& ranks, const SourceLine& source_line, bool other_nodes) {
    Culprit out;
    Classified c = classify(ranks);
    if (!c.waiting.empty() && !c.elsewhere.empty()) {
        out.ranks = c.elsewhere;
        by_silence(out.ranks, ranks);
        out.reason = "the other ranks wait in a collective for " + rank_list(out.ranks);
    } else if (c.waiting.size() > 1) {
        auto rarest = std::min_element(c.waiting.begin(), c.waiting.end(),
                                       [](auto& a, auto& b) { return a.second.size() < b.second.size(); });
        out.ranks = rarest->second;
        out.reason = "the ranks wait in different collectives; " + rank_list(out.ranks) + " in " + rarest->first;
    } else if (other_nodes && c.waiting.size() == 1 && c.elsewhere.empty()) {
        out.elsewhere = true;
        const std::string& collective = c.waiting.begin()->first;
        out.reason = ranks.size() == 1  // a rank watched alone (srun --dist-launch, dlaunch-mpi)
                         ? "rank " + std::to_string(ranks.front().rank) + " waits in " + collective +
                               ": the culprit is another rank"
                         : "every rank of this node waits in " + collective + ": the culprit is on another node";
    } else if (other_nodes && ranks.size() == 1 && !c.elsewhere.empty()) {
        out.ranks = c.elsewhere;
        out.reason = "it is not in a collective: the job's other ranks may wait for it";
    } else if (!ranks.empty()) {
        out.ranks.push_back(std::min_element(ranks.begin(), ranks.end(), [](auto& a, auto& b) {
                                return a.last_progress < b.last_progress;
                            })->rank);
        out.reason = c.waiting.empty() ? "silent the longest"
                                       : "silent the longest; every rank waits in " + c.waiting.begin()->first;
    }
    add_waiting_evidence(out, c, ranks, source_line);
    for (int r : c.elsewhere)
        out.evidence.push_back("rank " + std::to_string(r) + " is not in a collective: at " +
                               where_it_runs(find_rank(ranks, r)->threads, source_line));
    if (!c.unknown.empty())
        out.evidence.push_back(rank_list(c.unknown) +
                               ": no Python stack (not a Python process, or Python run with -S or -I)");
    return out;
}

}  // namespace dlaunch::hang
