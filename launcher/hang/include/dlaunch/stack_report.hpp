// Stacks of a hung job and the likeliest culprit. Pure: parses what Python's faulthandler wrote into each
// rank's stacks file and compares the ranks; the executor captures, this file reads.
//
// The rule: a rank waiting in a torch.distributed collective (or in a backward pass, where DDP's
// all-reduce runs) is a victim when another rank is not in one; those others are the culprits. When every
// rank waits in a collective but not all in the same one, the ranks in the rarer collective are (the
// collectives do not match). When they all wait in the same one and the job has ranks on other nodes, the
// culprit is elsewhere. Otherwise, the rank silent the longest.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlaunch::hang {

struct Frame {
    std::string file;
    int line = 0;
    std::string function;
    bool operator==(const Frame&) const = default;
};

struct ThreadStack {
    std::string id;  // "0x00007f3a5c1ff740"
    bool current = false;
    std::vector<Frame> frames;  // innermost first, as faulthandler prints them
    bool operator==(const ThreadStack&) const = default;
};

// Every thread of the last dump in `text` (faulthandler's format, several dumps may follow each other).
std::vector<ThreadStack> parse_faulthandler(std::string_view text);

// The thread that runs the script: the one whose outermost frame is "<module>", else the current one, else
// the oldest (faulthandler lists it last); never dlaunch's own stack-signal thread (nullptr when only it is left).
const ThreadStack* main_thread(const std::vector<ThreadStack>& threads);

struct RankStacks {
    int rank = 0;
    std::string host;
    double last_progress = 0;          // seconds since the epoch
    std::vector<ThreadStack> threads;  // empty: not captured (not a Python process, or it did not answer)
};

struct Culprit {
    std::vector<int> ranks;             // likeliest first; empty when nothing points anywhere
    std::string reason;                 // one line: why these
    std::vector<std::string> evidence;  // one line per rank or group of ranks
    bool elsewhere = false;             // every rank here waits for a rank of another node
};

// Reads line N of a source file ("" when unreadable); injected so tests need no files.
using SourceLine = std::function<std::string(const std::string& file, int line)>;

// `other_nodes`: the job has ranks whose stacks are not in `ranks` (on other nodes, or every rank but one
// when each rank has its own watcher).
Culprit find_culprit(const std::vector<RankStacks>& ranks, const SourceLine& source_line, bool other_nodes = false);

// "train.py:14 in main: time.sleep(3600)"
std::string describe_frame(const Frame& frame, const SourceLine& source_line);

// Where the script's thread is: its innermost frame, and the script's own frame below it when that is
// another ("threading.py:324 in wait (from train.py:14 in main: ...)"); "no Python stack" without one.
std::string where_it_runs(const std::vector<ThreadStack>& threads, const SourceLine& source_line);

}  // namespace dlaunch::hang
